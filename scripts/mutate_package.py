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
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
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
