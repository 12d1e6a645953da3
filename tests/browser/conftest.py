"""Browser tests: Debian's Chromium, driven by Playwright, against the built site.

`make test-browser` runs them on `_build/html` (set BOOK_SITE to test another
build). They need Chromium at /usr/bin/chromium (`apt-get install -y chromium`)
and never download a browser. Without Chromium they are skipped, unless
BOOK_REQUIRE_BROWSER is set (as in CI), where that is a failure.

Each worker (`make test-browser` runs two) has one browser and one tab per
viewport. Each page of the site is loaded once per viewport (`visit`), its
facts are collected in one pass and cached, and the tests assert on those
facts; `scope_of` sends every test of one page and viewport to one worker.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from book_site import AXE_REPORT, CHROMIUM, CHROMIUM_ARGS, SITE, serve


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the tests that share one page load, or the Lab.

    `make test-browser` runs two pytest-xdist workers. Each has its own
    Chromium and its own cache of page visits, so all the tests that read one
    visit go to one worker, one after another, and each page is still loaded
    once per viewport. A test that reads a visit is parametrized by its page,
    and the id says the viewport: "chapters/07_softmax.html" (desktop, whichever
    module asks), "phone:chapters/07_softmax.html", "no-script:...". The
    JupyterLab checks share one server; every other test is a unit of its own.
    """
    path, _, name = nodeid.partition("::")
    if path.endswith("test_lab.py"):
        return "lab"
    if name.endswith("]"):
        return name[name.index("[") + 1 : -1]
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Schedule the browser tests by page (scope_of), the biggest units first."""
    from xdist.scheduler import LoadScopeScheduling

    class PageScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return PageScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def pytest_sessionfinish(session):
    """On an xdist worker, hand this worker's axe-core counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["axe_report"] = json.dumps(AXE_REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # noqa: ARG001 - the signature is xdist's
    """On the xdist controller, gather the axe-core counts of each worker that finished."""
    AXE_REPORT.update(json.loads(getattr(node, "workeroutput", {}).get("axe_report", "{}")))


def pytest_terminal_summary(terminalreporter):
    """Print the axe-core counts of the run: serious/critical by origin, the rest by rule."""
    if not AXE_REPORT:
        return
    rows = AXE_REPORT.values()
    own, theme, excused = (
        sum(len(row[key]) for row in rows) for key in ("own", "theme", "excused")
    )
    minor: dict[str, int] = {}
    for row in rows:
        for rule, count in row["minor"].items():
            minor[rule] = minor.get(rule, 0) + count
    write = terminalreporter.write_line
    terminalreporter.section("axe-core")
    write(
        f"{len(AXE_REPORT)} runs. Serious or critical: {own} in the book's content, "
        f"{theme} from the theme, {excused} excused (AXE_EXCEPTIONS in test_site.py)."
    )
    write(
        "Moderate or minor (nodes per rule): "
        + (", ".join(f"{r} {n}" for r, n in sorted(minor.items())) or "none")
    )
    for name, row in AXE_REPORT.items():
        for item in row["own"] + row["theme"] + row["excused"]:
            write(f"  {name}: {item}")


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site at {SITE}: run `make book` first (or set BOOK_SITE)")
    return SITE


@pytest.fixture(scope="session")
def server(site):
    """Serve the site on 127.0.0.1, on a free port, from a thread of this process."""
    with serve(site) as origin:
        yield origin


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).is_file():
        message = f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium`"
        if os.environ.get("BOOK_REQUIRE_BROWSER"):
            pytest.fail(message + " (BOOK_REQUIRE_BROWSER is set)")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Tab:
    """One browser tab that records, for each load, what went wrong on the wire and console."""

    def __init__(self, browser, origin: str, **context_options):
        self.origin = origin
        self.context_options = context_options
        options = {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"}
        self.context = browser.new_context(
            **{**options, **context_options}, service_workers="block"
        )
        self.page = self.context.new_page()
        self.reset()
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.console_errors.append(f"uncaught: {error}"))
        self.page.on("request", self._on_request)
        self.page.on("requestfailed", self._on_request_failed)
        self.page.on("response", self._on_response)

    def is_local(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in ("data", "blob", "about") or parts.hostname == "127.0.0.1"

    def reset(self):
        """Start recording afresh for the next load."""
        self.console_errors: list[str] = []
        self.failed: list[str] = []
        self.foreign: list[str] = []

    def _on_console(self, message):
        if message.type == "error":
            self.console_errors.append(message.text)

    def _on_request_failed(self, request):
        # net::ERR_ABORTED is a request cancelled by a navigation (say, the favicon
        # of the page before); a missing file shows up as an HTTP 404 response.
        if "ERR_ABORTED" not in (request.failure or ""):
            self.failed.append(f"{request.url} ({request.failure})")

    def _on_request(self, request):
        if not self.is_local(request.url):
            self.foreign.append(request.url)

    def _on_response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.url} (HTTP {response.status})")

    def url(self, path: str) -> str:
        return f"{self.origin}/{path}"

    def path_of(self, url: str) -> str:
        """The site path of a URL on this server: 'chapters/01_why_attention.html'."""
        return urlsplit(url).path.lstrip("/")


@pytest.fixture(scope="session")
def tab(browser, server):
    tab = Tab(browser, server)
    yield tab
    tab.context.close()


#: A phone in portrait (an iPhone 12-15's CSS size), touch and all.
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}


@pytest.fixture(scope="session")
def phone(browser, server):
    """A second tab, on a phone-sized screen, for the checks a phone reader needs.

    Its browser cache is off, so that every load is a first visit (what
    test_reading.py weighs) and the phone's page loads share nothing.
    """
    tab = Tab(browser, server, **PHONE)
    cdp = tab.context.new_cdp_session(tab.page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    yield tab
    tab.context.close()


@pytest.fixture
def tablet(browser, server):
    """A tab on a tablet-sized screen, where the theme folds the sidebar away (below 992px)."""
    tab = Tab(browser, server, viewport={"width": 900, "height": 1200}, has_touch=True)
    yield tab
    tab.context.close()
