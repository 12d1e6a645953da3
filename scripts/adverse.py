"""Run a command under the adverse conditions a reader's machine may impose.

    python scripts/adverse.py CONDITION [CONDITION ...] -- COMMAND ...

Each condition runs COMMAND once, in turn, and the script stops at the first
failure. ``make test-adverse`` runs nbval over every chapter this way, so that
a check whose result depends on the machine (a timing, a speed ratio, a
floating-point reduction order) shows up before a reader meets it.

Conditions:

- ``one-thread``: one thread (``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1``) pinned to
  one core (``taskset -c 0``; on Linux the affinity is set directly);
- ``busy``: the machine kept busy by two CPU-bound processes that this script
  starts before the command and stops after it, however the command ends;
- ``baseline``: PyTorch's baseline CPU kernels (``ATEN_CPU_CAPABILITY=default``),
  with no AVX2 or AVX-512 code paths, as on an older or a non-x86 processor.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

BUSY_PROCESSES = 2


def _spin() -> None:
    # CPU-bound forever: pure-Python arithmetic, no memory growth.
    value = 0
    while True:
        value = (value * 31 + 7) % 1_000_003


def _one_thread_env() -> dict[str, str]:
    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _pin_to_first_core() -> None:
    # Runs in the child before it execs: the same as `taskset -c <first core>`.
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def run_condition(condition: str, command: Sequence[str]) -> int:
    """Run ``command`` once under ``condition``; return its exit status."""
    env = dict(os.environ)
    preexec: Callable[[], None] | None = None
    spinners: list[multiprocessing.Process] = []
    if condition == "one-thread":
        env.update(_one_thread_env())
        preexec = _pin_to_first_core
    elif condition == "baseline":
        env["ATEN_CPU_CAPABILITY"] = "default"
    elif condition == "busy":
        spinners = [
            multiprocessing.Process(target=_spin, daemon=True) for _ in range(BUSY_PROCESSES)
        ]
        for spinner in spinners:
            spinner.start()
    else:
        raise ValueError(f"condition must be one of one-thread, busy, baseline; got {condition!r}")
    try:
        return subprocess.call(list(command), env=env, preexec_fn=preexec)
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            spinner.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or argv.index("--") == 0 or argv.index("--") == len(argv) - 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    split = argv.index("--")
    conditions, command = argv[:split], argv[split + 1 :]
    results = []
    for condition in conditions:
        print(f"=== adverse condition: {condition}", flush=True)
        start = time.perf_counter()
        status = run_condition(condition, command)
        seconds = time.perf_counter() - start
        results.append((condition, status, seconds))
        print(f"=== {condition}: exit {status} in {seconds:.0f} s", flush=True)
        if status != 0:
            break
    for condition, status, seconds in results:
        print(f"{condition:<11} {'passed' if status == 0 else 'FAILED'} in {seconds:.0f} s")
    return max((status for _, status, _ in results), default=0)


if __name__ == "__main__":
    sys.exit(main())
