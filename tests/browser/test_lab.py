"""`make lab` reads like the site: JupyterLab with jupyterlab-myst, in Chromium.

The test runs the Makefile's own `lab` target (so a change there is what gets
tested) once, on a private copy of every chapter (links between chapters open
their notebooks), on a free 127.0.0.1 port, with no browser of its own and no
token. It opens one chapter of each kind (Part I, and a training chapter of
Part III; LAB_CHAPTERS=all for every chapter) in
the browser of the other tests and checks what a reader then sees:

* no raw role or target: no ``{py:func}``, no ``name <selfattention.name>``;
* no bare label: no cross-reference JupyterLab could not resolve (its
  "Cross Reference Not Found" mark, or a ``ch-``/``fig-`` label in the text),
  and no such warning in the console;
* no citation key: references read "[Vaswani et al., 2017]";
* every figure has its caption right below it ("Fig. 10.3" numbering);
* the solution dropdowns render, closed;
* opening the chapter does not mark it unsaved.

It never saves: autosave is off, and the notebooks are copies. The server and
its kernels are shut down however the test ends. LAB_SOURCE points it at
another folder of notebooks (to watch a check fail on a broken copy), and
LAB_MAKE_VARS passes variables to make (VENV=... for another environment).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from book_site import ROOT

SOURCE = Path(os.environ.get("LAB_SOURCE", ROOT / "chapters"))
# One chapter of each kind: a Part I chapter, and a training chapter of Part III
# with an interactive figure (15). The Markdown of all chapters is the same MyST, and
# test_notebook_hygiene.py checks every chapter's references for JupyterLab
# without a browser; LAB_CHAPTERS=all opens every chapter here.
# Chapter 1 is opened last, so that it is still the notebook shown when the Run All
# check runs it (RUN_ALL_CHAPTER).
KINDS = [
    "15_induction_heads",
    "01_why_attention",
]
CHAPTERS = (
    sorted(path.stem for path in SOURCE.glob("*.ipynb"))
    if os.environ.get("LAB_CHAPTERS") == "all"
    else [name for name in KINDS if (SOURCE / f"{name}.ipynb").is_file()]
)
STARTUP_SECONDS = 90
RENDER_SECONDS = 60
KERNEL_SECONDS = 30

# JupyterLab settings for the run: no autosave, no news or update checks (they
# would call another host).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}
# The windowing mode is make lab's own (scripts/lab_settings/overrides.json: every
# cell rendered at once); LAB_WINDOWING=full tries JupyterLab's default, which
# renders cells as they scroll in (and then warns of unresolved references).
if os.environ.get("LAB_WINDOWING"):
    LAB_SETTINGS["@jupyterlab/notebook-extension/tracker"] = {
        "windowingMode": os.environ["LAB_WINDOWING"]
    }

# What the notebook shows once JupyterLab has rendered its Markdown cells: the
# rendered text (not the hidden editors' source), the marks of unresolved
# references, the solution dropdowns, and, for every figure a code cell draws,
# the caption of the cell below it.
RENDERED = """() => {
  const cells = [...document.querySelectorAll(".jp-Notebook .jp-Cell")];
  // jupyterlab-myst renders into a .myst widget; JupyterLab's own renderer into
  // .jp-RenderedMarkdown (then MyST shows raw, which the tests catch).
  const rendered = (cell) => cell.querySelector(".myst, .jp-RenderedMarkdown");
  const markdown = cells.filter((c) => c.classList.contains("jp-MarkdownCell"));
  const figures = [];
  cells.forEach((cell, index) => {
    if (!cell.classList.contains("jp-CodeCell")) return;
    if (!cell.querySelector(".jp-OutputArea-output img")) return;
    const next = cells[index + 1];
    const caption = next && next.classList.contains("jp-MarkdownCell") && rendered(next)
      ? next.querySelector("figcaption") : null;
    figures.push({cell: index, caption: caption ? caption.textContent.trim() : null});
  });
  return {
    markdownCells: markdown.length,
    rendered: markdown.filter(rendered).length,
    text: markdown.map((c) => rendered(c) ? rendered(c).innerText : "").join("\\n"),
    notFound: [...document.querySelectorAll('.jp-Notebook [title="Cross Reference Not Found"]')]
      .map((e) => e.textContent.trim()),
    dropdowns: [...document.querySelectorAll(".jp-Notebook details")].map((d) => ({
      title: d.querySelector("summary") ? d.querySelector("summary").textContent.trim() : "",
      open: d.open,
    })),
    figures,
    // In-page links (glossary terms, citations, figures, package names) whose
    // target is not in the notebook.
    lostLinks: [...document.querySelectorAll('.jp-Notebook .myst a[href^="#"]')]
      .map((a) => decodeURIComponent(a.getAttribute("href").slice(1)))
      .filter((id) => id && !document.getElementById(id)),
  };
}"""

# Click the first glossary term (then the first citation): where its target lands
# relative to the notebook's visible area (true when on screen).
CLICK_REACHES = """async (prefix) => {
  const link = [...document.querySelectorAll('.jp-Notebook .myst a.hover-link[href^="#"]')]
    .find((a) => prefix === "term-" ? a.getAttribute("href").startsWith("#term-")
      : a.textContent.trim().startsWith("["));
  if (!link) return null;
  const id = decodeURIComponent(link.getAttribute("href").slice(1));
  link.scrollIntoView();
  link.click();
  const onScreen = () => {
    const target = document.getElementById(id);
    const view = document.querySelector(".jp-WindowedPanel-outer, .jp-Notebook")
      .getBoundingClientRect();
    const box = target.getBoundingClientRect();
    return box.bottom > view.top && box.top < view.bottom;
  };
  // Up to 1.5 s for the jump (and any smooth scroll) to bring the target in.
  for (let waited = 0; waited < 1500 && !onScreen(); waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {id, onScreen: onScreen()};
}"""

RAW_ROLE = re.compile(r"\{[a-z]+(?::[a-z]+)?\}`|<selfattention\.[\w.]+>")
BARE_LABEL = re.compile(r"\b(?:ch|fig|sec)-[a-z0-9]+(?:-[a-z0-9]+)+\b")
CAPTION = re.compile(r"^Figure\s\d+\.\d+:\s*\S.{20,}", re.S)
UNRESOLVED = re.compile(r"Cross reference target was not found|No target for internal reference")


def bibtex_keys() -> set[str]:
    return set(re.findall(r"@\w+\{([^,\s]+),", (ROOT / "references.bib").read_text()))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api(base: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{base}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - 127.0.0.1 only
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` on a copy of every chapter; yields the server's base URL; always shut down."""
    if not shutil.which("make"):
        pytest.skip("no make here")
    if not CHAPTERS:
        pytest.skip(f"no chapters in {SOURCE}")
    tmp_path = tmp_path_factory.mktemp("lab")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in SOURCE.glob("*.ipynb"):
        # JupyterLab also records the running Python's version in language_info,
        # which no stored notebook can match on every machine (make execute stores
        # the executing machine's): the copies carry this machine's, so that the
        # dirty-on-open check tests what the notebooks control, their kernelspec.
        notebook = json.loads(path.read_text(encoding="utf-8"))
        notebook.get("metadata", {}).get("language_info", {})["version"] = (
            platform.python_version()
        )
        (notebooks / path.name).write_text(json.dumps(notebook), encoding="utf-8")
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
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp opens each chapter
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
        # LAB_MAKE_VARS="VENV=/tmp/labvenv" tries another environment's JupyterLab.
        *os.environ.get("LAB_MAKE_VARS", "").split(),
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


@pytest.fixture(scope="module")
def lab_page(browser, lab):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("console", lambda message: CONSOLE.append(message.text))
    yield page
    context.close()


CONSOLE: list[str] = []  # what the JupyterLab page logged since the last chapter opened


_seen: dict[str, dict] = {}


# Open a notebook in the running JupyterLab (the app is exposed to the page for
# the test), after disposing of the one before, so that one app serves every
# chapter and the page holds one notebook at a time.
OPEN = """async (path) => {
  const app = window.jupyterapp;
  await app.restored;
  for (const widget of [...app.shell.widgets("main")]) widget.dispose();
  await app.commands.execute("docmanager:open", {path});
}"""


def read_in_lab(page, lab: str, name: str) -> dict:
    """Open chapter `name` in JupyterLab once, let it render, and record what it shows."""
    if name in _seen:
        return _seen[name]
    if not page.evaluate("() => !!(window.jupyterapp && window.jupyterapp.shell)"):
        page.goto(f"{lab}/lab?reset", wait_until="load")
        page.wait_for_function(
            "() => !!(window.jupyterapp && window.jupyterapp.shell)",
            timeout=RENDER_SECONDS * 1000,
        )
    CONSOLE.clear()
    page.evaluate(OPEN, f"{name}.ipynb")
    page.wait_for_selector(
        ".jp-Notebook .jp-MarkdownCell :is(.myst, .jp-RenderedMarkdown)",
        state="attached",
        timeout=RENDER_SECONDS * 1000,
    )
    try:  # jupyterlab-myst renders the dropdowns last
        page.wait_for_function(
            """() => document.querySelectorAll(".jp-Notebook details").length > 0""",
            timeout=RENDER_SECONDS * 1000,
        )
    except Exception:  # noqa: BLE001 - Playwright's TimeoutError; reported by the tests
        pass
    # The kernel starts, and JupyterLab stores its name: the moment a stale name
    # would mark the notebook unsaved.
    try:
        page.wait_for_function(
            """() => /ipykernel|Python/.test(
              (document.querySelector(".jp-Toolbar-kernelName") || {}).textContent || "")""",
            timeout=KERNEL_SECONDS * 1000,
        )
    except Exception:  # noqa: BLE001
        pass
    page.wait_for_timeout(1000)
    state = page.evaluate(RENDERED)
    state["dirty"] = page.evaluate(
        """() => [...document.querySelectorAll(".lm-DockPanel-tabBar .lm-TabBar-tab")]
          .filter((tab) => tab.classList.contains("jp-mod-dirty"))
          .map((tab) => tab.textContent.trim())"""
    )
    state["unresolved"] = sorted({text for text in CONSOLE if UNRESOLVED.search(text)})
    state["clicks"] = [page.evaluate(CLICK_REACHES, prefix) for prefix in ("term-", "cite")]
    _seen[name] = state
    return state


@pytest.fixture(params=CHAPTERS)
def chapter(request, lab_page, lab):
    return request.param, read_in_lab(lab_page, lab, request.param)


def test_markdown_renders_with_closed_solution_dropdowns(chapter):
    name, state = chapter
    assert state["rendered"] == state["markdownCells"] > 0, (
        f"{name}: {state['rendered']} of {state['markdownCells']} Markdown cells rendered"
    )
    solutions = [d for d in state["dropdowns"] if d["title"].startswith("Solution")]
    assert solutions, (
        f"JupyterLab shows no rendered Solution dropdown in {name} (is jupyterlab-myst "
        "installed and enabled, and compatible with this JupyterLab?)"
    )
    assert not [d for d in solutions if d["open"]], f"{name}: solution dropdowns open on arrival"


def test_no_raw_roles_or_targets(chapter):
    name, state = chapter
    raw = sorted({match.group(0) for match in RAW_ROLE.finditer(state["text"])})
    assert not raw, f"{name}: raw MyST roles or targets in JupyterLab: {raw[:8]}"
    fences = [line for line in state["text"].splitlines() if line.strip().startswith(":::")]
    assert not fences, f"{name}: raw directives in JupyterLab: {fences[:3]}"


def test_no_bare_labels(chapter):
    """Every cross-reference resolves: no "not found" mark, no label in the text, no
    unresolved-reference warning in the console."""
    name, state = chapter
    assert not state["notFound"], f"{name}: unresolved references shown as {state['notFound']}"
    bare = sorted(set(BARE_LABEL.findall(state["text"])))
    assert not bare, f"{name}: bare labels in JupyterLab: {bare}"
    assert not state["unresolved"], f"{name}: console: {state['unresolved'][:5]}"


def test_links_reach_their_targets(chapter):
    """Every glossary term, citation, figure and package link has its target in the
    notebook, and clicking a term and a citation brings the target on screen."""
    name, state = chapter
    assert not state["lostLinks"], f"{name}: links without a target: {state['lostLinks'][:5]}"
    for click in state["clicks"]:
        assert click is None or click["onScreen"], (
            f"{name}: clicking the link to {click['id']} does not bring it on screen"
        )


def test_no_citation_keys(chapter):
    name, state = chapter
    words = set(re.findall(r"[\w-]+", state["text"]))
    keys = sorted(bibtex_keys() & words)
    assert not keys, f"{name}: citations show their BibTeX keys in JupyterLab: {keys}"


def test_every_figure_has_its_caption(chapter):
    name, state = chapter
    assert state["figures"], f"{name}: no figures rendered in JupyterLab"
    missing = [f["cell"] for f in state["figures"] if not CAPTION.match(f["caption"] or "")]
    assert not missing, (
        f"{name}: figures without a 'Figure N.M:' caption below them in JupyterLab "
        f"(cells {missing}); `make execute` writes the caption cells"
    )


def test_opening_does_not_mark_the_chapter_unsaved(chapter):
    name, state = chapter
    assert not state["dirty"], (
        f"{name}: JupyterLab marks the notebook unsaved on opening ({state['dirty']}): "
        "its stored kernelspec differs from the kernel's"
    )


# Run All in the open notebook, wait until every code cell has run, and report
# each solution cell's (tag hide-cell) visible output text and stored answer.
SHOWN = "() => window.jupyterapp.shell.currentWidget.context.path"
RUN_ALL = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.sessionContext.ready;
  await app.commands.execute("notebook:run-all-cells");
}"""
RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const code = panel.content.widgets.filter((cell) => cell.model.type === "code");
  return code.every((cell) => cell.model.executionCount !== null
    && !cell.node.querySelector(".jp-InputPrompt").textContent.includes("*"));
}"""
SOLUTIONS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets
    .filter((cell) => cell.model.type === "code"
      && (cell.model.getMetadata("tags") || []).includes("hide-cell"))
    .map((cell) => ({
      index: panel.content.widgets.indexOf(cell),
      visible: cell.outputArea.node.innerText,
      answer: cell.model.outputs.toJSON()
        .map((o) => [].concat((o.data || {})["text/plain"] || o.text || "").join(""))
        .join(""),
      errors: cell.model.outputs.toJSON().filter((o) => o.output_type === "error").length,
    }));
}"""
# Run All on the lightest chapter (its kernel runs in about 3 s). Every solution
# cell of every chapter starts with %answer and stores only closed <details>
# (test_notebook_hygiene.py), so one chapter shows that the fold holds in
# JupyterLab; LAB_RUN_ALL=13_rotary_position_embeddings tries the issue's own case.
RUN_ALL_CHAPTER = os.environ.get("LAB_RUN_ALL", "01_why_attention")


def test_run_all_shows_no_answer_until_opened(lab_page, lab):
    """Run All unfolds every output in JupyterLab: each solution's result must stay
    folded ("Result (click to show)", the %answer magic) until the reader opens it."""
    read_in_lab(lab_page, lab, RUN_ALL_CHAPTER)
    if lab_page.evaluate(SHOWN) != f"{RUN_ALL_CHAPTER}.ipynb":
        _seen.pop(RUN_ALL_CHAPTER, None)  # another chapter is shown: open this one again
        read_in_lab(lab_page, lab, RUN_ALL_CHAPTER)
    shown = lab_page.evaluate(SHOWN)
    assert shown == f"{RUN_ALL_CHAPTER}.ipynb", f"Run All would run {shown}"
    lab_page.evaluate(RUN_ALL)
    lab_page.wait_for_function(RAN, timeout=300_000, polling=1000)
    solutions = lab_page.evaluate(SOLUTIONS)
    answered = [s for s in solutions if s["answer"].strip()]
    assert answered, f"{RUN_ALL_CHAPTER}: no solution cell printed anything after Run All"
    for solution in solutions:
        assert not solution["errors"], f"solution cell {solution['index']} failed under Run All"
        shown = [
            line.strip()
            for line in solution["answer"].splitlines()
            if line.strip() and line.strip() in solution["visible"]
        ]
        assert not shown, (
            f"{RUN_ALL_CHAPTER}: after Run All, solution cell {solution['index']} shows its "
            f"answer before the reader opens it: {shown[:2]}"
        )
    # Opening the fold shows the answer.
    first = answered[0]["answer"].splitlines()[0].strip()
    summary = lab_page.locator(".jp-Notebook details.sa-answer > summary").first
    summary.scroll_into_view_if_needed()
    summary.click()
    lab_page.wait_for_function(
        "(text) => document.querySelector('.jp-Notebook').innerText.includes(text)", arg=first
    )
