"""GPU kernels written in Triton, run by Triton's interpreter where there is no GPU.

``flash_attention`` (chapter 16) is FlashAttention's forward pass as one
Triton kernel. The same kernel source serves two machines:

- with a CUDA GPU, Triton compiles the kernel and runs it on the GPU;
- without one, importing this package sets ``TRITON_INTERPRET=1`` before
  ``triton`` is imported, and Triton's interpreter runs every program of
  the kernel one after another on the CPU, with numpy. The results are the
  kernel's own arithmetic, so they can be checked against
  ``torch.nn.functional.scaled_dot_product_attention``; the time is not the
  kernel's (the interpreter is thousands of times slower by design).

Triton decides between the two when each kernel is defined, and its own
library functions are defined when ``triton`` is first imported. So this
package must be imported before anything else imports ``triton`` on a
machine without a GPU (or ``TRITON_INTERPRET=1`` must be set before that):
otherwise the import raises an ``ImportError`` that says so, rather than
letting the kernel fail later with Triton's own message. Setting
``TRITON_INTERPRET=1`` yourself on a GPU machine selects the interpreter
there too.

Only this package needs ``triton``; the rest of ``selfattention`` does not
import it. ``requirements.txt`` pins it (Linux wheels only).
"""

from __future__ import annotations

import os
import sys

import torch


def _interpreter_needed() -> bool:
    """Select Triton's interpreter when no CUDA GPU is present; say if it runs."""
    if torch.cuda.is_available():
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")
    standard = sys.modules.get("triton.language.standard")
    if standard is not None:
        from triton.runtime.interpreter import InterpretedFunction

        if not isinstance(standard.zeros, InterpretedFunction):
            raise ImportError(
                "triton was imported before selfattention.kernels, without "
                "TRITON_INTERPRET=1, on a machine without a CUDA GPU: its kernels "
                "cannot run here. Import selfattention.kernels before anything that "
                "imports triton (or set TRITON_INTERPRET=1 before that), in a fresh "
                "Python process"
            )
    os.environ["TRITON_INTERPRET"] = "1"
    return True


_INTERPRETED = _interpreter_needed()

try:
    import triton  # noqa: F401  (imported here, after the interpreter is chosen)
except ModuleNotFoundError as error:  # pragma: no cover - triton is pinned on Linux
    raise ImportError(
        "selfattention.kernels needs triton (pinned in requirements.txt; wheels "
        "exist for Linux only): pip install -r requirements.txt"
    ) from error

from .flash import flash_attention  # noqa: E402

#: True when Triton's interpreter runs the kernels (no CUDA GPU, or
#: ``TRITON_INTERPRET=1`` set by hand); False when Triton compiles them for
#: the GPU.
INTERPRETED: bool = _INTERPRETED

#: The device the kernels' inputs live on, ``"cpu"`` under the interpreter
#: and ``"cuda"`` when the kernels are compiled.
DEVICE: str = "cpu" if INTERPRETED else "cuda"

__all__ = ["INTERPRETED", "DEVICE", "flash_attention"]
