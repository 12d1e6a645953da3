"""Where the site and the browser are, and how to serve and settle a page.

Shared by conftest.py, the tests and scripts/site.py (make pdf, make screenshot).
"""

import contextlib
import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "html")).resolve()
CHROMIUM = os.environ.get("BOOK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Every host but this machine fails to resolve, so nothing can leave it even
    # by mistake; the tests still see (and fail on) any such request.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

# Let images load, MathJax finish typesetting and fonts arrive; report what is there.
SETTLE = """async () => {
  for (const img of document.images) img.loading = "eager";
  await Promise.all([...document.images].map((img) => img.complete ? null :
    new Promise((done) => {
      img.addEventListener("load", done);
      img.addEventListener("error", done);
    })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  return {
    formulas: document.querySelectorAll(".math").length,
    typeset: document.querySelectorAll("mjx-container").length,
    images: document.images.length,
    broken: [...document.images].filter((img) => !img.naturalWidth).map((img) => img.src),
  };
}"""

# Takes the elements matching a selector out of the page, each replaced by an
# empty comment, until _RESTORE puts the last ones taken back (prunes nest).
# With a second selector, `keep`, an element that matches it, lies inside one
# or holds one stays.
_PRUNE = """([selector, keep]) => {
  const stays = (e) => keep && (e.closest(keep) || e.querySelector(keep));
  const chosen = [...document.querySelectorAll(selector)].filter((e) => !stays(e));
  const pruned = chosen.map((element) => {
    const mark = document.createComment("");
    element.replaceWith(mark);
    return [mark, element];
  });
  (window.__saPruned = window.__saPruned || []).push(pruned);
  return pruned.length;
}"""
_RESTORE = "() => window.__saPruned.pop().forEach(([mark, element]) => mark.replaceWith(element))"
#: The formulas and the code: axe-core reads the whole tree whatever its context
#: excludes, and these are most of a chapter's nodes, so the runs that leave them
#: out of their context also take them out of the page while they run (every
#: rule still reaches them in test_site.py's code-and-math sample).
FORMULAS_AND_CODE = "mjx-container, .highlight"


@contextlib.contextmanager
def pruned(page, selector: str, keep: str | None = None):
    """Take the elements matching `selector` (those `keep` spares aside) out of the page."""
    page.evaluate(_PRUNE, [selector, keep])
    try:
        yield
    finally:
        page.evaluate(_RESTORE)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the signature is http.server's
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """Say nothing when the browser drops a connection (a page left mid-load)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 on a free port, from a thread; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


#: Filled by the accessibility tests, printed at the end of the run by conftest.py.
AXE_REPORT: dict[str, dict] = {}
