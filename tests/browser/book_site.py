"""Where the site and the browser are: shared by conftest.py and the tests."""

import os
import shutil
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

#: Filled by the accessibility tests, printed at the end of the run by conftest.py.
AXE_REPORT: dict[str, dict] = {}
