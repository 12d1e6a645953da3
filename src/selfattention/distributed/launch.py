"""Start a group of processes that talk over torch.distributed (gloo, on this machine).

``spawn(fn, world_size, *args)`` is what ``torchrun`` and
``torch.multiprocessing.spawn`` do, cut down to what a notebook and a test
need: fresh processes (none inherits a notebook's state, and each works
under Jupyter), one thread each, the ``gloo`` backend over loopback
(127.0.0.1), the results in rank order, and every process ended however
the call ends.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import pickle
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from .._checks import check_flag, check_positive_int, check_real, describe


class RankError(RuntimeError):
    """A rank of ``spawn`` raised; ``rank`` says which, the message says what.

    Examples
    --------
    >>> error = RankError(1, "ValueError: bad input", "Traceback ...")
    >>> error.rank, str(error).splitlines()[0]
    (1, 'rank 1 raised ValueError: bad input')
    """

    def __init__(self, rank: int, error: str, details: str = "") -> None:
        self.rank = rank
        self.error = error
        message = f"rank {rank} raised {error}"
        super().__init__(message + (f"\n\nThe rank's traceback:\n{details}" if details else ""))


def _context() -> multiprocessing.context.BaseContext:
    """On Linux the forkserver, torch imported in it; elsewhere spawn.

    macOS has a forkserver too, but Python starts processes there with spawn
    by default (forking after Apple's frameworks have loaded is not safe), so
    spawn it stays.
    """
    if not sys.platform.startswith("linux"):
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Read when the server starts (the first call); the server itself is fresh.
    context.set_forkserver_preload(["torch", "torch.distributed", __name__])
    return context


def _worker(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    args: tuple[Any, ...],
    timeout: float,
    pipe: Connection,
    quiet: bool,
) -> None:
    """One rank: join the group, run ``fn``, send back its result or its error."""
    if quiet:  # what the rank (or gloo, in C++) prints goes nowhere, not into a notebook
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        try:
            store = dist.TCPStore(
                "127.0.0.1",
                port,
                is_master=False,
                timeout=datetime.timedelta(seconds=timeout),
            )
            dist.init_process_group(
                "gloo",
                store=store,
                rank=rank,
                world_size=world_size,
                timeout=datetime.timedelta(seconds=timeout),
            )
            result = fn(rank, world_size, *args)
            message = ("ok", pickle.dumps(result))
        except BaseException as error:  # noqa: BLE001 - every error goes back to the parent
            # When it was raised: a rank whose peer failed first fails too (its
            # connection is reset), and the parent reports the earliest error.
            message = (
                "error",
                f"{type(error).__name__}: {error}",
                traceback.format_exc(),
                time.time(),
            )
        try:
            # Before the group is torn down: tearing it down resets the peers'
            # connections, and their errors must not overtake this one.
            pipe.send_bytes(pickle.dumps(message))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    finally:
        pipe.close()


#: Seconds that spawn waits, after a rank's error, for the other ranks' errors.
_GRACE = 2.0


def _later_errors(waiting: dict[Any, int], seconds: float) -> list[tuple[float, int, tuple]]:
    """The errors the ranks still ``waiting`` send within ``seconds``, as (time, rank, message)."""
    errors = []
    deadline = time.monotonic() + seconds
    while waiting and (remaining := deadline - time.monotonic()) > 0:
        ready = wait(list(waiting), timeout=remaining)
        if not ready:
            break
        for pipe in ready:
            rank = waiting.pop(pipe)
            try:
                message = pickle.loads(pipe.recv_bytes())
            except EOFError:
                continue  # ended without a word: the first error stands
            if message[0] == "error":
                errors.append((message[3], rank, message))
    return errors


def _end(processes: list[Any]) -> None:
    """End every process: terminate, then kill what is still there, and reap all."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
        process.close()


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    quiet: bool = True,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` processes of one gloo group.

    Parameters
    ----------
    fn : callable
        A function defined in an importable module (not in a notebook or
        ``__main__``): each new process imports it by name. It runs after
        ``torch.distributed.init_process_group("gloo", ...)``; its result
        must pickle.
    world_size : int
        How many processes (ranks), ``P``.
    *args
        Passed to ``fn`` after ``rank`` and ``world_size`` (they must pickle).
    timeout : float, default 120
        Seconds for the whole call, process start-up included.
    quiet : bool, default True
        Discard what the ranks print (their standard output and error, C++
        warnings included), so that nothing of theirs lands in a notebook's
        outputs; an error still comes back, with its traceback. False
        lets them print.

    Returns
    -------
    list
        ``[fn(0, P, *args), fn(1, P, *args), ...]``, in rank order.

    Raises
    ------
    RankError
        If a rank raises: names the rank and its error, with its traceback.
    TimeoutError
        If the ranks have not all finished within ``timeout`` seconds.
    RuntimeError
        If a process dies without a result (killed, or ``os._exit``).
    TypeError, ValueError
        If ``fn`` cannot be imported by name, or for a bad ``world_size``
        or ``timeout``.

    Notes
    -----
    The group's rendezvous (a ``torch.distributed.TCPStore``) listens in
    this process on a free port of 127.0.0.1 that the system picks, so two
    calls never collide. Each rank runs with one thread
    (``torch.set_num_threads(1)``) and gloo on the loopback interface. In
    every case, result or error, each process is ended (terminated, then
    killed if it lingers) and reaped, and the store is closed, freeing the
    port, before ``spawn`` returns or raises.

    On Linux the ranks start from multiprocessing's ``forkserver`` (Python
    3.14's default there): a fresh server process, started on the first
    call, imports torch once and forks each rank from itself, so a rank
    starts in a fraction of a second instead of importing torch again
    (about 2 s each). It holds no state of the caller's: like a
    ``spawn``-ed process, a rank imports ``fn`` by name. The server stays,
    idle, until the caller exits. Elsewhere (macOS, Windows) the ranks are
    ``spawn``-ed.

    Examples
    --------
    >>> from selfattention.distributed.demos import rank_and_size
    >>> spawn(rank_and_size, 2, timeout=120)  # doctest: +SKIP
    [(0, 2), (1, 2)]
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {describe(fn)}")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if module in (None, "__main__", "__mp_main__") or "<" in qualname:
        raise ValueError(
            f"fn must be a function defined at the top of an importable module, so that "
            f"each new process can import it by name; got {qualname or fn!r} from "
            f"module {module!r} (a function defined in a notebook or a script's "
            "__main__ cannot be imported: put it in a .py module)"
        )
    world = check_positive_int(world_size, "world_size")
    quiet = check_flag(quiet, "quiet")
    limit = check_real(timeout, "timeout", kind="a number of seconds")
    if not (math.isfinite(limit) and limit > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")

    import torch.distributed as dist

    deadline = time.monotonic() + limit
    context = _context()
    # Held in a list, not a name: an exception's traceback keeps this frame's
    # names alive, and the store must close (freeing its port) in any case.
    stores = [dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)]
    port = stores[0].port
    processes, pipes = [], []
    try:
        for rank in range(world):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(
                target=_worker,
                args=(fn, rank, world, port, args, limit, writer, quiet),
                daemon=True,
                name=f"selfattention-rank-{rank}",
            )
            pipes.append(reader)
            try:
                process.start()
            finally:
                writer.close()  # the child holds the other end: EOF when it dies
            processes.append(process)  # started: _end will end it
        results: dict[int, Any] = {}
        waiting = {pipe: rank for rank, pipe in enumerate(pipes)}
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(waiting.values())
                raise TimeoutError(
                    f"spawn: rank{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(str, missing))} of {world} did not finish within "
                    f"{limit:g} s; every process was ended"
                )
            for pipe in wait(list(waiting), timeout=remaining):
                rank = waiting.pop(pipe)  # type: ignore[call-overload]
                try:
                    message = pickle.loads(pipe.recv_bytes())
                except EOFError:
                    processes[rank].join(1.0)
                    raise RuntimeError(
                        f"rank {rank} ended without a result (exit code "
                        f"{processes[rank].exitcode}); every process was ended"
                    ) from None
                if message[0] == "error":
                    errors = [(message[3], rank, message)]
                    errors += _later_errors(waiting, min(_GRACE, max(0.0, remaining)))
                    _, first, message = min(errors, key=lambda error: error[:2])
                    raise RankError(first, message[1], message[2])
                results[rank] = pickle.loads(message[1])
        return [results[rank] for rank in range(world)]
    finally:
        _end(processes)
        for pipe in pipes:
            pipe.close()
        stores.clear()  # the store's last reference: its socket closes, the port is free
