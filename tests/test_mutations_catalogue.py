"""The mutation catalogue (tests/mutations/chNN.py) cannot rot: format, ids, targets, samples.

Fast: nothing is executed. Each entry's `old` text must still occur exactly
`count` times in its target now, so a chapter edit that removes or duplicates
it fails here (run the mutation itself with `make mutate CHAPTER=NN`).
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import shlex
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "tests" / "mutations"
FILES = sorted(CATALOGUE.glob("ch*.py"))
MIN_PER_CHAPTER = 10


@functools.cache
def mutate():
    """scripts/mutate.py, the runner (`make mutate`)."""
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "scripts" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutate", module)
    spec.loader.exec_module(module)
    return module


@functools.cache
def catalogue():
    return mutate().load(CATALOGUE)


def entries_of(path: pathlib.Path):
    chapter = path.stem[2:]
    return [m for m in catalogue()[0] if m.chapter == chapter]


def test_every_catalogue_file_is_well_formed():
    errors = catalogue()[1]
    assert not errors, "\n".join(f"{e.key}: {e.detail}" for e in errors)


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_chapter_has_enough_mutations_and_one_sample(path):
    entries = entries_of(path)
    assert len(entries) >= MIN_PER_CHAPTER, (
        f"{path.name} has {len(entries)} mutations; each chapter needs {MIN_PER_CHAPTER}"
    )
    samples = [m.id for m in entries if m.sample]
    assert len(samples) == 1, f"{path.name}: exactly one entry must be sample: True, got {samples}"


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_each_old_text_occurs_count_times(path):
    stale = [mutate().locate(m, ROOT) for m in entries_of(path)]
    stale = [f"{e.key}: {e.detail}" for e in stale if e is not None]
    assert not stale, "mutations that no longer apply:\n" + "\n".join(stale)


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_caught_by_names_existing_checks(path):
    missing = []
    for mutation in entries_of(path):
        for entry in mutation.caught_by:
            # A pytest argument: its first path (before any ::test) must exist.
            words = [w for w in shlex.split(entry) if not w.startswith("-")]
            targets = [w.split("::")[0] for w in words] if words else []
            missing += [
                f"{mutation.key}: {target}" for target in targets if not (ROOT / target).exists()
            ]
            if mutation.file.endswith(".ipynb") and entry.endswith(".ipynb"):
                if entry != mutation.file:
                    missing.append(
                        f"{mutation.key}: a notebook mutation of {mutation.file}"
                        f" is caught by its own notebook, not {entry}"
                    )
    assert not missing, "caught_by names what does not exist:\n" + "\n".join(missing)


def test_chapter_numbers_match_the_chapters():
    """ch07.py's entries target chapter 7's notebook (or the package)."""
    wrong = []
    for mutation in catalogue()[0]:
        name = pathlib.PurePosixPath(mutation.file).name
        if mutation.file.startswith("chapters/") and not name.startswith(mutation.chapter + "_"):
            wrong.append(f"{mutation.key}: {mutation.file}")
    assert not wrong, "entries filed under the wrong chapter:\n" + "\n".join(wrong)
