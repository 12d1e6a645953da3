"""Maintainer tooling: the GitHub Actions workflow, pre-commit and .ci/run.

actionlint cannot run inside GitHub here, so the workflow is checked with it
in the unit tests; a deliberately broken copy proves the linter is awake.
"""

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
BIN = pathlib.Path(sys.executable).parent


def tool(name):
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: it is pinned in requirements.txt (make setup)")
        return found
    return str(path)


def actionlint(path):
    return subprocess.run(
        [tool("actionlint"), "-no-color", str(path)], capture_output=True, text=True, cwd=ROOT
    )


def test_actionlint_accepts_the_workflow():
    result = actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    broken = WORKFLOW.read_text().replace("needs: test", "needs: no-such-job")
    assert broken != WORKFLOW.read_text()
    (tmp_path / "broken.yml").write_text(broken)
    result = actionlint(tmp_path / "broken.yml")
    assert result.returncode != 0 and "no-such-job" in result.stdout


def test_workflow_tests_then_publishes_from_main():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    test, deploy = workflow["jobs"]["test"], workflow["jobs"]["deploy"]
    steps = " ".join(
        str(step.get("run", "")) + str(step.get("uses", "")) for step in test["steps"]
    )
    assert "apt-get install" in steps and "chromium" in steps
    assert "make test" in steps
    assert "torch==2.13.0" in steps and "whl/cpu" in steps, "install the CPU build of torch"
    assert "actions/cache@" in steps and "actions/upload-pages-artifact@" in steps
    assert deploy["needs"] == "test" and "refs/heads/main" in deploy["if"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")
    # pull requests run the tests; only pushes to main publish
    assert "pull_request" in workflow[True] and "push" in workflow[True]


def test_pre_commit_config_is_valid_and_local():
    config = ROOT / ".pre-commit-config.yaml"
    result = subprocess.run(
        [tool("pre-commit"), "validate-config", str(config)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    hooks = yaml.safe_load(config.read_text())["repos"]
    assert [repo["repo"] for repo in hooks] == ["local"], "hooks must not need the network"
    ids = {hook["id"] for hook in hooks[0]["hooks"]}
    expected = {
        "ruff-check",
        "ruff-format",
        "trailing-whitespace",
        "end-of-file",
        "check-yaml",
        "check-toml",
        "notebooks-executed",
        "actionlint",
    }
    assert expected <= ids
    for hook in hooks[0]["hooks"]:
        executable = hook["entry"].split()[0]
        assert executable.startswith(".venv/bin/"), hook["id"]
        assert (BIN / pathlib.Path(executable).name).exists(), f"{executable} is not installed"


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / "README.md").read_text()
    assert "make test" in (ROOT / ".ci" / "run").read_text()
