"""scripts/adverse.py: the conditions of `make test-adverse` apply; the busy processes stop."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("adverse", ROOT / "scripts" / "adverse.py")
adverse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(adverse)

REPORT = (
    "import os; print(os.environ.get('OMP_NUM_THREADS'), os.environ.get('ATEN_CPU_CAPABILITY'),"
    " len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else 1)"
)


def child_report(condition: str, capfd) -> list[str]:
    assert adverse.run_condition(condition, [sys.executable, "-c", REPORT]) == 0
    return capfd.readouterr().out.split()


def test_one_thread_sets_one_thread_and_one_core(capfd, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    threads, _, cores = child_report("one-thread", capfd)
    assert threads == "1"
    assert cores == "1"


def test_baseline_selects_the_default_cpu_kernels(capfd, monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert child_report("baseline", capfd)[1] == "default"


def test_busy_starts_two_spinning_processes_and_stops_them(tmp_path):
    before = set(adverse.multiprocessing.active_children())
    script = f"import os; open({str(tmp_path / 'ran')!r}, 'w').write(str(os.getloadavg()))"
    assert adverse.run_condition("busy", [sys.executable, "-c", script]) == 0
    assert (tmp_path / "ran").exists()
    assert set(adverse.multiprocessing.active_children()) == before


def test_a_failing_command_stops_the_run_and_its_status_is_returned(capsys):
    status = adverse.main(["busy", "baseline", "--", sys.executable, "-c", "raise SystemExit(3)"])
    assert status == 3
    out = capsys.readouterr().out
    assert "busy        FAILED" in out
    assert "baseline" not in out.split("=== busy: exit 3")[1]  # stopped after the first


def test_an_unknown_condition_is_named():
    with pytest.raises(ValueError, match="'fast'"):
        adverse.run_condition("fast", [sys.executable, "-c", "pass"])


def test_no_command_prints_the_usage(capsys):
    assert adverse.main(["busy"]) == 2
    assert "adverse.py" in capsys.readouterr().err
    assert os.environ.get("ATEN_CPU_CAPABILITY") != "default"  # nothing leaked into this process
