"""scripts/mutate.py, the mutation runner, on a tiny fixture checkout.

tests/mutations_fixtures/project is a checkout with one chapter, one package
module and one check file; tests/mutations_fixtures/catalogue/ch01.py holds a
mutation of each outcome: caught in the notebook, caught in the package (by
pytest and the notebook), survived, does not apply, broken, a `count` of 2,
and a malformed entry.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "mutations_fixtures"
SCRIPT = ROOT / "scripts" / "mutate.py"


@functools.cache
def mutate():
    spec = importlib.util.spec_from_file_location("mutate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutate", module)
    spec.loader.exec_module(module)
    return module


def run_runner(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "--catalogue", str(FIXTURES / "catalogue")]
    command += ["--root", str(FIXTURES / "project"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)


def outcomes(stdout: str) -> dict[str, str]:
    """{key: outcome} from the runner's report lines."""
    found = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) >= 2 and words[1].startswith("ch01:"):
            found[words[1].rstrip(":")] = words[0]
    return found


@pytest.fixture(scope="module")
def full_run():
    """The whole fixture catalogue on two workers (one run, shared by the tests below)."""
    return run_runner("--workers", "2")


def test_each_outcome_is_reported(full_run):
    found = outcomes(full_run.stdout)
    assert found == {
        "ch01:wrong-input": "caught",
        "ch01:triple": "caught",
        "ch01:label": "survived",
        "ch01:gone": "does-not-apply",
        "ch01:typo": "broken",
        "ch01:both-twos": "caught",
        "ch01:#6": "malformed",
    }, full_run.stdout + full_run.stderr


def test_last_line_counts_and_exit_status(full_run):
    last = full_run.stdout.strip().splitlines()[-1]
    assert last == "7 mutations: 3 caught, 1 survived, 1 broken, 1 do not apply, 1 malformed"
    assert full_run.returncode == 1


def test_broken_names_the_exception(full_run):
    line = next(line for line in full_run.stdout.splitlines() if "ch01:typo" in line)
    assert "NameError" in line


def test_the_working_tree_is_left_as_it_was(full_run):
    """Mutations are applied to a scratch copy only."""
    core = (FIXTURES / "project" / "src" / "mutfix" / "core.py").read_text()
    notebook = (FIXTURES / "project" / "chapters" / "01_tiny.ipynb").read_text()
    assert "return 2 * x" in core and "y = double(2)" in notebook
    assert "dubble" not in notebook and "3 * x" not in core


def test_one_mutation_by_id_passes():
    done = run_runner("--id", "ch01:both-twos", "--workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1 mutations: 1 caught, 0 survived"


def test_sample_runs_only_the_sample_entries():
    done = run_runner("--sample")
    assert done.stdout.strip().splitlines()[-1].startswith("2 mutations: 1 caught")
    assert "ch01:wrong-input" in done.stdout and "ch01:triple" not in done.stdout


def test_check_mode_runs_nothing_and_reports_errors():
    done = run_runner("--check")
    assert done.returncode == 1
    assert "does-not-apply" in done.stdout and "malformed" in done.stdout


def test_unknown_id_is_an_error():
    done = run_runner("--id", "ch01:nonexistent")
    assert done.returncode == 2 and "no such mutation" in done.stderr


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"id": "x"}, "missing keys"),
        (
            {
                "id": "Bad_Id",
                "claim": "c",
                "file": "src/a.py",
                "old": "a",
                "new": "b",
                "caught_by": ["t"],
            },
            "kebab-case",
        ),
        (
            {
                "id": "x",
                "claim": "c",
                "file": "src/a.py",
                "old": "a",
                "new": "b",
                "caught_by": ["t"],
                "count": True,
            },
            "'count' must be int",
        ),
        (
            {
                "id": "x",
                "claim": "c",
                "file": "src/a.py",
                "old": "a",
                "new": "a",
                "caught_by": ["t"],
            },
            "equals",
        ),
        (
            {
                "id": "x",
                "claim": "c",
                "file": "README.md",
                "old": "a",
                "new": "b",
                "caught_by": ["t"],
            },
            "chapters/",
        ),
        (
            {"id": "x", "claim": "c", "file": "src/a.py", "old": "a", "new": "b", "caught_by": []},
            "non-empty list",
        ),
        (
            {
                "id": "x",
                "claim": "c",
                "file": "src/a.py",
                "old": "a",
                "new": "b",
                "caught_by": ["t"],
                "extra": 1,
            },
            "unknown keys",
        ),
    ],
)
def test_validate_rejects_malformed_entries(entry, message):
    with pytest.raises(mutate().Malformed, match=message):
        mutate().validate(entry, "01", "ch01.py[0]")


def test_duplicate_ids_are_malformed(tmp_path):
    entry = (
        '{"id": "a", "claim": "c", "file": "src/a.py", "old": "x", "new": "y", "caught_by": ["t"]}'
    )
    (tmp_path / "ch03.py").write_text(f"MUTATIONS = [{entry}, {entry}]\n")
    mutations, errors = mutate().load(tmp_path)
    assert len(mutations) == 1 and "duplicate id" in errors[0].detail


def test_the_mutated_copy_of_the_package_is_what_runs(tmp_path):
    """In the environment the runner gives the kernel and pytest, selfattention is the copy's."""
    scratch = mutate().make_scratch(tmp_path, ROOT)
    assert not (scratch / "chapters").is_symlink() and (scratch / "src").is_dir()
    assert (scratch / "pyproject.toml").is_symlink()
    env = mutate().environment(scratch)
    assert env["TRITON_INTERPRET"] == "1" or "TRITON_INTERPRET" in os.environ
    code = "import selfattention, sys; print(selfattention.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert pathlib.Path(where).is_relative_to(scratch / "src"), where
