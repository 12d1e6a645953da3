"""mutmut over the package's layers, masks and kernels, one target at a time.

    python scripts/mutate_package.py                  # every target below
    python scripts/mutate_package.py masks            # one target
    python scripts/mutate_package.py kernels --max-children 1
    python scripts/mutate_package.py layers --folder layers-heads \
        --names 'selfattention.layers.multi_head*'

Each target gets its own folder, ``.mutmut/<target>/``, holding links to
``src/``, ``tests/`` and ``pyproject.toml`` and a ``setup.cfg`` with the
target's mutmut configuration (which files to mutate, which unit tests to run);
mutmut copies them into ``mutants/`` there and never touches the working
tree. The results stay in that folder (``cd .mutmut/masks && mutmut
results``, ``mutmut show NAME``); this script prints the counts per target.
The measured scores are in docs/mutation-score.md, the equivalent mutants in
tests/mutations/EQUIVALENT.md. A measurement, not a test: ``make
mutate-package``.

    python scripts/mutate_package.py kernels --replay   # re-check the survivors

``--replay`` takes each mutant that mutmut reported as surviving in the
target's folder, makes its change as a plain edit in a scratch copy of
``src/`` (``.mutmut/replay/``), and runs the tests listed for its function in
REPLAY_TESTS (or the target's tests) against that copy. mutmut's verdicts on
``kernels/`` are not to be trusted by themselves: the kernels' build check
runs in a subprocess (tests/compile_kernels.py), whose calls mutmut does not
trace, and some edits that fail the tests when made by hand were reported as
surviving. A replayed mutant that the tests catch is a false survivor.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import fnmatch
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Outside _build, which make test-book deletes: a run takes tens of minutes.
WORK = ROOT / ".mutmut"
MUTMUT = pathlib.Path(sys.executable).parent / "mutmut"

#: target: (files to mutate, the fastest unit tests that exercise them)
TARGETS = {
    "masks": (
        ["src/selfattention/masks.py"],
        [
            "tests/test_mask_converters.py",
            "tests/test_bad_inputs.py",
            "tests/test_masks_contract.py",
        ],
    ),
    "layers": (
        ["src/selfattention/layers/*"],
        [
            "tests/test_torch_modules.py",
            "tests/test_chunked.py",
            "tests/test_rotary.py",
            "tests/test_latent_attention.py",
            "tests/test_cache_sizes.py",
            "tests/test_bad_inputs.py",
            "tests/test_layers_contract.py",
            "tests/test_paged_cache.py",
            "tests/test_paged_contract.py",
            "tests/test_paged_cache_contract.py",
            "tests/test_multi_head_contract.py",
            "tests/test_chunked_memory_contract.py",
            "tests/test_windows.py",
            "tests/test_part2_package.py",
            "tests/test_properties.py",
            "tests/test_measure.py",
            "tests/test_ch09.py",
        ],
    ),
    "kernels": (
        ["src/selfattention/kernels/*"],
        [
            "tests/test_kernels.py",
            "tests/test_flash_backward.py",
            "tests/test_kernels_contract.py",
        ],
    ),
}


# --replay: the tests each function's survivors are run against, by target. The
# build check compiles the kernels for sm_90 and sm_80 with _default_blocks,
# _launch_options and _precision (tests/compile_kernels.py, in a subprocess) and
# reads from them whether float32 multiplies exactly and 16-bit on tensor cores.
_KERNEL_BUILD = ["tests/test_kernels.py", "-k", "builds or fits or exact_products"]
_KERNEL_FILES = ["tests/test_kernels.py", "tests/test_kernels_contract.py"]
_NOT_THE_BUILD = ["-k", "not builds and not fits and not exact_products"]
_KERNEL_RUNS = [*_KERNEL_FILES, *_NOT_THE_BUILD]
REPLAY_TESTS = {
    "kernels": {
        "_default_blocks": _KERNEL_BUILD,
        "_launch_options": _KERNEL_BUILD,
        "_precision": _KERNEL_BUILD,
        "_backward": ["tests/test_flash_backward.py", "tests/test_kernels_contract.py"],
        "_forward_with_lse": [*_KERNEL_FILES, "tests/test_flash_backward.py", *_NOT_THE_BUILD],
        "_check_inputs_finite": _KERNEL_RUNS,
        "_interpreter_needed": _KERNEL_RUNS,
    },
}


def configure(target: str, folder_name: str | None = None) -> pathlib.Path:
    """``.mutmut/<folder_name or target>/``: links to the checkout and this target's setup.cfg."""
    files, tests = TARGETS[target]
    folder = WORK / (folder_name or target)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("src", "tests", "pyproject.toml"):
        link = folder / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name)
    lines = ["[mutmut]", "source_paths = src/selfattention", "only_mutate ="]
    lines += [f"    {pattern}" for pattern in files]
    lines += ["pytest_add_cli_args_test_selection ="]
    lines += [f"    {test}" for test in tests]
    options = ["-p", "no:xdist", "-p", "no:nbval", "-q"]
    lines += ["pytest_add_cli_args =", *(f"    {option}" for option in options)]
    (folder / "setup.cfg").write_text("\n".join(lines) + "\n")
    return folder


def counts(folder: pathlib.Path) -> collections.Counter:
    """Each status's count, from ``mutmut results --all true``."""
    done = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    statuses = collections.Counter()
    for line in done.stdout.splitlines():
        if ":" in line:
            statuses[line.rsplit(":", 1)[1].strip()] += 1
    return statuses


def plain_edit(folder: pathlib.Path, name: str) -> tuple[str, str, str]:
    """(file, old, new) of mutant ``name``: its hunk from ``mutmut show``, context included."""
    shown = subprocess.run(
        [str(MUTMUT), "show", name], cwd=folder, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    path = next(line[4:].strip() for line in shown if line.startswith("--- "))
    hunk = shown[next(i for i, line in enumerate(shown) if line.startswith("@@")) + 1 :]
    old = "".join(line[1:] + "\n" for line in hunk if line[:1] in (" ", "-"))
    new = "".join(line[1:] + "\n" for line in hunk if line[:1] in (" ", "+"))
    return path, old, new


def replay_one(target: str, name: str, edit: tuple[str, str, str]) -> tuple[str, str]:
    """Make one survivor's change in a scratch src/ and run its tests: (verdict, detail)."""
    path, old, new = edit
    function = re.search(r"\.x_?(\w+?)__mutmut_\d+$", name.replace("ǁ", "."))
    tests = REPLAY_TESTS.get(target, {}).get(function.group(1) if function else "", None)
    scratch = WORK / "replay" / name.rsplit(".", 1)[-1]
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(ROOT / "src", scratch / "src")
    source = (scratch / path).read_text()
    if source.count(old) != 1:
        return "not applied", f"{source.count(old)} matches of its hunk"
    (scratch / path).write_text(source.replace(old, new))
    env = dict(os.environ, PYTHONPATH=str(scratch / "src"), OMP_NUM_THREADS="1")
    # Triton's cache is keyed by each kernel's source and options: safe to share.
    env["TRITON_CACHE_DIR"] = str(WORK / "replay" / "triton-cache")
    options = ["-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:nbval", "-q", "-x"]
    pytest = str(pathlib.Path(sys.executable).parent / "pytest")
    done = subprocess.run(
        [pytest, *options, *(tests or TARGETS[target][1])],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    shutil.rmtree(scratch, ignore_errors=True)
    last = next((line for line in reversed(done.stdout.splitlines()) if line.strip()), "")
    verdict = {0: "survived", 1: "caught"}.get(done.returncode, f"pytest exit {done.returncode}")
    return verdict, last


def replay(
    target: str, folder: pathlib.Path, workers: int, patterns: list[str]
) -> collections.Counter:
    """Replay the survivors of ``folder`` (those matching ``patterns``, if any) as
    plain edits; print each verdict; count them."""
    listed = subprocess.run(
        [str(MUTMUT), "results"], cwd=folder, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [line.split(":")[0].strip() for line in listed if line.endswith(": survived")]
    if patterns:
        names = [name for name in names if any(fnmatch.fnmatch(name, p) for p in patterns)]
    edits = {name: plain_edit(folder, name) for name in names}
    verdicts: collections.Counter = collections.Counter()
    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
        jobs = {name: pool.submit(replay_one, target, name, edits[name]) for name in names}
        for name, job in jobs.items():
            verdict, detail = job.result()
            verdicts[verdict] += 1
            print(f"{name}: {verdict}: {detail}", flush=True)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("targets", nargs="*", help=f"any of {', '.join(TARGETS)}")
    parser.add_argument("--max-children", type=int, default=int(os.environ.get("WORKERS") or 2))
    parser.add_argument(
        "--names", nargs="+", default=[], help="only these mutants (mutmut globs, e.g. 'x.y*')"
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop each target after this long; what was checked by then is kept and counted",
    )
    parser.add_argument(
        "--folder",
        default=None,
        help="work in .mutmut/FOLDER instead of .mutmut/<target> (one target only), so that"
        " two runs over the same target, say for different --names, do not share results",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="re-check the survivors of the last run as plain edits (see above); runs no mutmut",
    )
    args = parser.parse_args(argv)
    if args.folder and len(args.targets) != 1:
        parser.error("--folder needs exactly one target")
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; choose from {list(TARGETS)}")
    # HYPOTHESIS_PROFILE=mutate (tests/conftest.py): property tests draw the same
    # examples for every mutant and every run, so a verdict does not change
    # from one run to the next (a random draw once hid a chunked_attention mutant).
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1", HYPOTHESIS_PROFILE="mutate")
    for target in args.targets or list(TARGETS):
        folder = configure(target, args.folder)
        start = time.perf_counter()
        if args.replay:
            verdicts = replay(target, folder, args.max_children, args.names)
            print(f"{target}: {sum(verdicts.values())} survivors replayed as plain edits:"
                  f" {dict(verdicts)}; {time.perf_counter() - start:.0f} s")  # fmt: skip
            continue
        command = [str(MUTMUT), "run", "--max-children", str(args.max_children), *args.names]
        process = subprocess.Popen(command, cwd=folder, env=env, start_new_session=True)
        try:
            process.wait(timeout=args.max_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)  # mutmut and the children it forked
            process.wait()
            print(f"\n{target}: stopped after {args.max_seconds:.0f} s (--max-seconds)")
        seconds = time.perf_counter() - start
        statuses = counts(folder)
        total = sum(statuses.values())
        unchecked = statuses.pop("not checked", 0)
        killed, survived = statuses.get("killed", 0), statuses.get("survived", 0)
        score = f"{100 * killed / (total - unchecked):.1f}%" if total > unchecked else "n/a"
        print(
            f"{target}: {total} mutants, {total - unchecked} checked ({unchecked} not checked):"
            f" {killed} killed, {survived} survived, score {score} of the checked;"
            f" all statuses {dict(statuses)}; {seconds:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
