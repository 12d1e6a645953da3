"""Run the mutation catalogue: break each claim on purpose and check that a check fails.

    python scripts/mutate.py                      # every tests/mutations/chNN.py
    python scripts/mutate.py --chapter 13         # one chapter's catalogue
    python scripts/mutate.py --id ch13:rope-sign  # one mutation (chNN:id)
    python scripts/mutate.py --sample             # the entries marked "sample": True
    python scripts/mutate.py --check              # only load, validate and locate `old`

Each mutation replaces ``old`` by ``new`` in one file (a chapter notebook's code
cells, or a file under ``src/``) of a scratch copy of the checkout, never in
the working tree, and runs every entry of ``caught_by`` there:

- a chapter notebook is re-executed in a fresh kernel (nbclient, as
  ``scripts/notebooks.py`` runs it) and must stop with an ``AssertionError``;
- anything else is a pytest argument, run in the copy, and that run must fail
  (exit status 1; a collection or usage error is not a failure of a check).

Outcomes: *caught* (every entry failed as it should), *survived* (one entry
passed), *broken* (the mutated code raised something other than an
``AssertionError``, timed out, or pytest could not collect: the mutation is not
a realistic bug, or the check is not what failed), *does not apply* (``old``
does not occur exactly ``count`` times), *malformed* (the entry's keys or
types are wrong). Anything but caught makes the exit status non-zero.

The copy's ``src/`` is first on ``PYTHONPATH`` for the kernel and for pytest,
so the mutated package is what runs, not the editable install of the working
tree. Each worker (``--workers``, default ``$WORKERS`` or 2) keeps one copy and
restores the mutated file after each mutation. The last line printed is
``N mutations: N caught, 0 survived`` (with the counts of errors, if any).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import pathlib
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "tests" / "mutations"
#: What the scratch copy holds as real copies; every other top-level entry of
#: the checkout is a symbolic link to the original (read by tests, never mutated).
COPIED = ("chapters", "src", "tests")
#: Never linked into the copy.
SKIPPED = {".git", ".venv", "_build", ".hypothesis", ".pytest_cache"}
IGNORED = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", ".hypothesis", "*.pyc")
CATALOGUE_NAME = re.compile(r"ch(\d\d)\.py")
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
REQUIRED = {"id": str, "claim": str, "file": str, "old": str, "new": str, "caught_by": list}
OPTIONAL = {"count": int, "sample": bool}
#: Seconds one notebook cell, or one pytest run, may take before the mutation is "broken".
TIMEOUT = float(os.environ.get("MUTATE_TIMEOUT", "300"))


class Malformed(ValueError):
    """A catalogue entry whose keys or types are wrong."""


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One catalogue entry, validated; ``key`` is ``chNN:id``."""

    chapter: str
    id: str
    claim: str
    file: str
    old: str
    new: str
    caught_by: tuple[str, ...]
    count: int = 1
    sample: bool = False

    @property
    def key(self) -> str:
        return f"ch{self.chapter}:{self.id}"


@dataclasses.dataclass
class Result:
    """What running one mutation found."""

    key: str
    outcome: str  # caught, survived, broken, does-not-apply, malformed
    detail: str
    seconds: float = 0.0
    #: CPU seconds of the worker and the kernels and pytest runs it waited for: what the
    #: mutation costs on an idle machine, whatever the load on a shared one.
    cpu_seconds: float = 0.0


def is_notebook(path: str) -> bool:
    return path.endswith(".ipynb")


def validate(entry: Any, chapter: str, where: str) -> Mutation:
    """Check one entry's keys and types; return it as a Mutation or raise Malformed."""
    if not isinstance(entry, dict):
        raise Malformed(f"{where}: an entry must be a dict, got {type(entry).__name__}")
    missing = sorted(set(REQUIRED) - set(entry))
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise Malformed(f"{where}: missing keys {missing}, unknown keys {unknown}")
    for key, kind in {**REQUIRED, **OPTIONAL}.items():
        if key in entry and (
            not isinstance(entry[key], kind) or (kind is int and isinstance(entry[key], bool))
        ):
            raise Malformed(
                f"{where}: {key!r} must be {kind.__name__}, got {type(entry[key]).__name__}"
            )
    if not KEBAB.fullmatch(entry["id"]):
        raise Malformed(f"{where}: id {entry['id']!r} is not kebab-case (a-z, 0-9, -)")
    where = f"{where} ({entry['id']})"
    for key in ("claim", "file", "old"):
        if not entry[key].strip():
            raise Malformed(f"{where}: {key!r} is empty")
    if entry["old"] == entry["new"]:
        raise Malformed(f"{where}: 'new' equals 'old'")
    if entry.get("count", 1) < 1:
        raise Malformed(f"{where}: 'count' must be at least 1, got {entry['count']}")
    file = entry["file"]
    if (
        not ((file.startswith("chapters/") and is_notebook(file)) or file.startswith("src/"))
        or ".." in pathlib.PurePosixPath(file).parts
    ):
        raise Malformed(f"{where}: 'file' must be chapters/*.ipynb or under src/, got {file!r}")
    caught_by = entry["caught_by"]
    if not caught_by or not all(isinstance(c, str) and c.strip() for c in caught_by):
        raise Malformed(f"{where}: 'caught_by' must be a non-empty list of non-empty strings")
    return Mutation(
        chapter=chapter,
        id=entry["id"],
        claim=entry["claim"],
        file=file,
        old=entry["old"],
        new=entry["new"],
        caught_by=tuple(caught_by),
        count=entry.get("count", 1),
        sample=entry.get("sample", False),
    )


def load(catalogue: pathlib.Path = CATALOGUE) -> tuple[list[Mutation], list[Result]]:
    """Every valid mutation of every ``chNN.py`` in ``catalogue``, and one error per bad entry."""
    mutations: list[Mutation] = []
    errors: list[Result] = []
    for path in sorted(catalogue.glob("ch*.py")):
        match = CATALOGUE_NAME.fullmatch(path.name)
        if not match:
            errors.append(Result(path.name, "malformed", "not named chNN.py (two digits)"))
            continue
        chapter = match.group(1)
        namespace: dict[str, Any] = {"__name__": f"mutations_ch{chapter}"}
        try:
            exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - any error in a catalogue file is reported
            errors.append(Result(path.name, "malformed", f"{type(error).__name__}: {error}"))
            continue
        entries = namespace.get("MUTATIONS")
        if not isinstance(entries, list):
            errors.append(Result(path.name, "malformed", "no MUTATIONS list"))
            continue
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"{path.name}[{index}]"
            try:
                mutation = validate(entry, chapter, where)
            except Malformed as error:
                errors.append(Result(f"ch{chapter}:#{index}", "malformed", str(error)))
                continue
            if mutation.id in seen:
                errors.append(Result(mutation.key, "malformed", f"{where}: duplicate id"))
                continue
            seen.add(mutation.id)
            mutations.append(mutation)
    return mutations, errors


def code_sources(notebook: Any) -> list[tuple[int, str]]:
    """(index, joined source) of each code cell."""
    return [(i, cell.source) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]


def occurrences(mutation: Mutation, root: pathlib.Path) -> int:
    """How many times ``old`` occurs in the target (code cells only, for a notebook)."""
    path = root / mutation.file
    if not path.is_file():
        return -1
    if is_notebook(mutation.file):
        import nbformat

        notebook = nbformat.read(path, as_version=4)
        return sum(source.count(mutation.old) for _, source in code_sources(notebook))
    return path.read_text(encoding="utf-8").count(mutation.old)


def locate(mutation: Mutation, root: pathlib.Path) -> Result | None:
    """A does-not-apply error if ``old`` is not found exactly ``count`` times, else None."""
    found = occurrences(mutation, root)
    if found == -1:
        return Result(mutation.key, "does-not-apply", f"{mutation.file} does not exist")
    if found != mutation.count:
        return Result(
            mutation.key,
            "does-not-apply",
            f"'old' occurs {found} times in {mutation.file}, expected {mutation.count}:"
            f" {mutation.old[:60]!r}",
        )
    return None


def apply(mutation: Mutation, root: pathlib.Path) -> int | None:
    """Replace ``old`` by ``new`` in ``root``'s copy; return the first mutated cell's index."""
    path = root / mutation.file
    if not is_notebook(mutation.file):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
        return None
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    first = None
    for index, source in code_sources(notebook):
        if mutation.old in source:
            notebook.cells[index].source = source.replace(mutation.old, mutation.new)
            first = index if first is None else first
    nbformat.write(notebook, path)
    return first


# The worker side: one scratch copy per process, restored after each mutation.
_SCRATCH: pathlib.Path | None = None


def make_scratch(parent: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    """A copy of ``root``'s chapters/, src/, tests/ under ``parent``; links for the rest."""
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="worker-", dir=parent))
    for entry in sorted(root.iterdir()):
        if entry.name in SKIPPED:
            continue
        if entry.name in COPIED and entry.is_dir():
            shutil.copytree(entry, scratch / entry.name, ignore=IGNORED, symlinks=True)
        else:
            (scratch / entry.name).symlink_to(entry)
    return scratch


def environment(scratch: pathlib.Path) -> dict[str, str]:
    """The environment for the kernel and pytest: the copy's package first, no bytecode.

    Without bytecode caching, a mutation that keeps a file's size and mtime
    second cannot be hidden by a stale ``.pyc``.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(scratch / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # Chapter 16's kernels run under Triton's interpreter on a CPU (the package
    # sets it too when there is no GPU); tests/test_kernels.py unsets it where it must.
    env.setdefault("TRITON_INTERPRET", "1")
    # One thread per worker: the workers share the cores.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, "1")
    env.setdefault("MPLBACKEND", "Agg")
    # Property tests draw the same examples on every run (tests/conftest.py).
    env["HYPOTHESIS_PROFILE"] = "mutate"
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    return env


def init_worker(parent: str, root: str) -> None:
    global _SCRATCH
    _SCRATCH = make_scratch(pathlib.Path(parent), pathlib.Path(root))
    os.environ.clear()
    os.environ.update(environment(_SCRATCH))


def run_notebook(path: pathlib.Path, first_cell: int | None) -> tuple[str, str]:
    """Execute one notebook in a fresh kernel; (caught|survived|broken, detail)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=TIMEOUT,
        kernel_name="python3",
        record_timing=False,
        # Killed at once when done: a graceful shutdown (the kernel's exit
        # handlers, torch's teardown) costs about 0.5 s of CPU per mutation.
        shutdown_kernel="immediate",
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        cell = _failing_cell(notebook)
        where = f"cell {cell}" if cell is not None else "a cell"
        if error.ename != "AssertionError":
            return "broken", f"{path.name}: {error.ename} in {where}: {error.evalue[:120]}"
        if first_cell is not None and cell is not None and cell < first_cell:
            return "broken", (
                f"{path.name}: AssertionError in {where}, before the mutated cell"
                f" {first_cell} (does the chapter fail unmutated?)"
            )
        return "caught", f"{path.name}: AssertionError in {where}"
    except (CellTimeoutError, DeadKernelError, TimeoutError) as error:
        return "broken", f"{path.name}: {type(error).__name__}: {str(error)[:120]}"
    return "survived", f"{path.name} ran to the end without an AssertionError"


def _failing_cell(notebook: Any) -> int | None:
    """The index of the cell whose output holds the error."""
    for index, cell in enumerate(notebook.cells):
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            return index
    return None


def run_pytest(argument: str, scratch: pathlib.Path) -> tuple[str, str]:
    """Run pytest on one ``caught_by`` entry in the copy; exit status 1 means caught."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-x",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:nbval",
        "--no-header",
        "--tb=line",
        *shlex.split(argument),
    ]
    try:
        completed = subprocess.run(
            command,
            cwd=scratch,
            env=os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return "broken", f"pytest {argument}: timed out after {TIMEOUT:.0f} s"
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else completed.stderr.strip()[-200:]
    if completed.returncode == 1:
        return "caught", f"pytest {argument}: {last}"
    if completed.returncode == 0:
        return "survived", f"pytest {argument}: {last}"
    return "broken", f"pytest {argument}: exit status {completed.returncode}: {last}"


def run_one(mutation: Mutation) -> Result:
    """Apply one mutation to this worker's copy, run its checks, restore the copy."""
    assert _SCRATCH is not None, "init_worker first"
    start, cpu_start = time.perf_counter(), cpu_time()
    error = locate(mutation, _SCRATCH)
    if error is not None:
        return error
    target = _SCRATCH / mutation.file
    original = target.read_bytes()
    try:
        first_cell = apply(mutation, _SCRATCH)
        details = []
        outcome = "caught"
        for entry in mutation.caught_by:
            if is_notebook(entry):
                found, detail = run_notebook(
                    _SCRATCH / entry, first_cell if entry == mutation.file else None
                )
            else:
                found, detail = run_pytest(entry, _SCRATCH)
            details.append(detail)
            if found != "caught":
                outcome = found
                break
    finally:
        target.write_bytes(original)
    seconds, cpu_seconds = time.perf_counter() - start, cpu_time() - cpu_start
    return Result(mutation.key, outcome, "; ".join(details), seconds, cpu_seconds)


def cpu_time() -> float:
    """User and system CPU seconds of this process and its waited-for children."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def select(
    mutations: list[Mutation], chapter: str | None, ids: list[str], sample: bool
) -> list[Mutation]:
    """The mutations a command line asks for (an unknown id raises ValueError)."""
    chosen = mutations
    if chapter:
        chosen = [m for m in chosen if m.chapter == f"{int(chapter):02d}"]
    if sample:
        chosen = [m for m in chosen if m.sample]
    if ids:
        wanted = set(ids)
        chosen = [m for m in chosen if m.key in wanted or m.id in wanted]
        known = {m.key for m in chosen} | {m.id for m in chosen}
        if wanted - known:
            raise ValueError(f"no such mutation: {', '.join(sorted(wanted - known))}")
    return chosen


#: Chapters that take longest run first, so that the two workers finish together.
SLOW = ("16_", "15_", "11_", "14_", "13_", "12_")


def order(mutations: list[Mutation]) -> list[Mutation]:
    def weight(mutation: Mutation) -> int:
        name = pathlib.PurePosixPath(mutation.caught_by[0]).name
        return next((i for i, prefix in enumerate(SLOW) if name.startswith(prefix)), len(SLOW))

    return sorted(mutations, key=weight)


def summary(results: list[Result]) -> str:
    """``N mutations: C caught, S survived`` and the count of each kind of error."""
    counts = {
        kind: sum(r.outcome == kind for r in results)
        for kind in ("caught", "survived", "broken", "does-not-apply", "malformed")
    }
    line = f"{len(results)} mutations: {counts['caught']} caught, {counts['survived']} survived"
    for kind, label in (
        ("broken", "broken"),
        ("does-not-apply", "do not apply"),
        ("malformed", "malformed"),
    ):
        if counts[kind]:
            line += f", {counts[kind]} {label}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chapter", help="run only this chapter's catalogue (e.g. 13)")
    parser.add_argument(
        "--id", action="append", default=[], help="run only this mutation (chNN:id); repeatable"
    )
    parser.add_argument("--sample", action="store_true", help="only the entries marked sample")
    parser.add_argument(
        "--check", action="store_true", help="validate and locate only; run nothing"
    )
    parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKERS") or 2))
    parser.add_argument("--catalogue", type=pathlib.Path, default=CATALOGUE)
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the checkout to copy")
    parser.add_argument("--json", type=pathlib.Path, help="also write every result to this file")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    mutations, errors = load(args.catalogue)
    # Errors of other chapters' files do not concern a run of one chapter; a run
    # of given ids reports only a file of theirs that could not be loaded.
    if args.chapter:
        errors = [e for e in errors if e.key[:4] == f"ch{int(args.chapter):02d}"]
    if args.id:
        files = {key.split(":")[0] + ".py" for key in args.id}
        errors = [e for e in errors if e.key in files]
    try:
        chosen = select(mutations, args.chapter, args.id, args.sample)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results: list[Result] = list(errors)
    runnable = []
    for mutation in chosen:
        error = locate(mutation, root)
        if error is None:
            runnable.append(mutation)
        else:
            results.append(error)
    for result in results:
        print(f"{result.outcome:<15} {result.key}: {result.detail}", flush=True)
    if args.check:
        results += [Result(m.key, "caught", "located") for m in runnable]
        print(f"{len(runnable)} mutations located, {len(results) - len(runnable)} errors")
        return 0 if len(results) == len(runnable) else 1

    start = time.perf_counter()
    workers = max(1, min(args.workers, len(runnable) or 1))
    if not runnable:
        print(summary(results))
        return 0 if all(r.outcome == "caught" for r in results) else 1
    with tempfile.TemporaryDirectory(prefix="mutate-") as parent:
        context = multiprocessing.get_context("forkserver")
        with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=init_worker, initargs=(parent, str(root))
        ) as pool:
            futures = [pool.submit(run_one, m) for m in order(runnable)]
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                results.append(result)
                print(
                    f"{result.outcome:<15} {result.key} ({result.seconds:.1f} s,"
                    f" {result.cpu_seconds:.1f} s CPU): {result.detail}",
                    flush=True,
                )
    elapsed = time.perf_counter() - start
    ran = [r for r in results if r.seconds]
    cpu = sum(r.cpu_seconds for r in ran)
    if ran:
        print(
            f"{len(ran)} mutations run in {elapsed:.0f} s on {workers} workers"
            f" ({sum(r.seconds for r in ran) / len(ran):.1f} s each on average,"
            f" slowest {max(ran, key=lambda r: r.seconds).key}"
            f" {max(r.seconds for r in ran):.1f} s); CPU {cpu:.0f} s in all,"
            f" {cpu / len(ran):.1f} s each: about {cpu / workers:.0f} s on {workers} idle cores"
        )
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1) + "\n")
    print(summary(results))
    return 0 if all(r.outcome == "caught" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
