"""Counting the work a piece of torch code really does (chapters 9 and 10)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._checks import check_callable


def count_multiply_adds(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run ``fn(*args, **kwargs)`` once and return the multiply-adds of its matrix products.

    PyTorch's ``torch.utils.flop_counter.FlopCounterMode`` records every
    matrix product (``mm``, ``bmm``, ``addmm``, ``matmul``, fused attention,
    convolutions) with its real shapes and reports floating-point
    operations, two per multiply-add (one multiplication, one addition);
    this returns half its total. Softmax, masking, bias additions and other
    element-wise operations are not counted. ``fn`` runs under
    ``torch.no_grad()`` (a forward pass only), and what it returns is
    discarded; anything it changes, such as a ``KVCache``, stays changed.

    ``F.scaled_dot_product_attention`` runs on its math backend here: the
    counter does not see inside PyTorch's fused CPU kernel (which 4-D inputs
    without a mask would take), and would count 0 for its products. The math
    backend does the same two products, so the count is the same whichever
    kernel a normal call would pick.

    Parameters
    ----------
    fn : callable
        The code to measure, for example a module or a function.
    *args, **kwargs
        Passed to ``fn``.

    Returns
    -------
    int
        Multiply-adds of every matrix product in one call of ``fn``.

    Raises
    ------
    TypeError
        If ``fn`` is not callable.

    Examples
    --------
    A ``(2, 3) @ (3, 4)`` product is 2 * 4 dot products of length 3:

    >>> import torch
    >>> count_multiply_adds(torch.matmul, torch.ones(2, 3), torch.ones(3, 4))
    24
    >>> layer = torch.nn.Linear(16, 8, bias=False)
    >>> count_multiply_adds(layer, torch.ones(5, 16))  # 5 rows of 16 x 8
    640

    One decoding step of 4 heads over 1000 cached keys of width 64: the
    query against every key, then the weights against every value.

    >>> import torch.nn.functional as F
    >>> query, keys = torch.ones(1, 4, 1, 64), torch.ones(1, 4, 1000, 64)
    >>> count_multiply_adds(F.scaled_dot_product_attention, query, keys, keys)
    512000
    """
    check_callable(fn, "fn")
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with (
        FlopCounterMode(display=False) as counter,
        torch.no_grad(),
        sdpa_kernel(SDPBackend.MATH),
    ):
        fn(*args, **kwargs)
    return int(counter.get_total_flops()) // 2
