"""`make lab` renders the chapters' MyST: JupyterLab with jupyterlab-myst, in Chromium.

The test runs the Makefile's own `lab` target (so a change there is what gets
tested) on a private copy of one chapter, on a free 127.0.0.1 port, with no
browser of its own and no token, then opens the chapter in the browser of the
other tests and waits for the Exercises' "Solution" dropdowns to render as
closed <details>. It never saves: autosave is off, and the notebook is a copy.
The server and its kernel are shut down however the test ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from book_site import ROOT

CHAPTER = ROOT / "chapters" / "08_attention_output.ipynb"
STARTUP_SECONDS = 90
RENDER_SECONDS = 60

# JupyterLab settings for the run: every cell rendered at once (no windowing),
# no autosave, no news or update checks (they would call another host).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

# What the notebook shows once JupyterLab has rendered its Markdown cells.
RENDERED = """() => {
  const markdown = [...document.querySelectorAll(".jp-MarkdownCell .jp-RenderedMarkdown")];
  const text = markdown.map((cell) => cell.textContent).join("\\n");
  return {
    markdownCells: document.querySelectorAll(".jp-MarkdownCell").length,
    rendered: markdown.length,
    dropdowns: [...document.querySelectorAll(".jp-Notebook details")].map((d) => ({
      title: d.querySelector("summary") ? d.querySelector("summary").textContent.trim() : "",
      open: d.open,
    })),
    rawMyst: [/:::\\{dropdown\\}/, /\\{(term|ref|numref|cite)\\}`/, /\\((ch|fig)-[\\w-]+\\)=/]
      .filter((pattern) => pattern.test(text)).map(String),
    links: [...document.querySelectorAll(".jp-RenderedMarkdown a")].length,
  };
}"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api(base: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{base}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - 127.0.0.1 only
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture
def lab(tmp_path):
    """`make lab` on a copy of one chapter; yields the server's base URL; always shut down."""
    if not shutil.which("make"):
        pytest.skip("no make here")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(CHAPTER, notebooks)
    settings = tmp_path / "settings"
    for plugin, values in LAB_SETTINGS.items():
        package, name = plugin.rsplit("/", 1)
        (settings / package).mkdir(parents=True, exist_ok=True)
        (settings / package / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    port = free_port()
    args = [
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.disable_check_xsrf=True",
    ]
    if os.geteuid() == 0:  # CI runs as root; Jupyter refuses root without this
        args.append("--allow-root")
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
    )
    log = (tmp_path / "lab.log").open("w")
    # -o: the venv counts as set up (the test does not install anything).
    command = [
        "make",
        "--no-print-directory",
        "-s",
        "-o",
        ".venv/.installed",
        "lab",
        f"LAB_DIR={notebooks}",
        f"LAB_ARGS={' '.join(args)}",
    ]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(
                    f"make lab exited with {server.returncode}:\n"
                    + (tmp_path / "lab.log").read_text()[-2000:]
                )
            try:
                api(base, "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"make lab did not answer on {base} in {STARTUP_SECONDS} s")
                time.sleep(0.5)
        yield base
    finally:
        try:  # the kernels run in sessions of their own: shut them down through the API
            for kernel in api(base, "/api/kernels") or []:
                api(base, f"/api/kernels/{kernel['id']}", method="DELETE")
            api(base, "/api/shutdown", method="POST")
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()


def test_make_lab_renders_myst_dropdowns(browser, lab):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{lab}/lab/tree/{CHAPTER.name}", wait_until="load")
        page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=RENDER_SECONDS * 1000)
        try:
            page.wait_for_function(
                """() => document.querySelectorAll(".jp-Notebook details").length > 0""",
                timeout=RENDER_SECONDS * 1000,
            )
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError; reported below
            pass
        state = page.evaluate(RENDERED)
    finally:
        context.close()
    solutions = [d for d in state["dropdowns"] if d["title"].startswith("Solution")]
    assert solutions, (
        f"JupyterLab shows no rendered Solution dropdown in {CHAPTER.name} (is "
        f"jupyterlab-myst installed and enabled?): {state}"
    )
    assert not [d for d in solutions if d["open"]], f"solution dropdowns open on arrival: {state}"
    assert not state["rawMyst"], f"raw MyST left in the rendered Markdown: {state['rawMyst']}"
