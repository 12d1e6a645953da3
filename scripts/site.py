"""Print the book to one PDF, or take the README's screenshot, with Debian's Chromium.

    python scripts/site.py pdf         # _build/singlehtml -> _build/pdf/book.pdf   (make pdf)
    python scripts/site.py screenshot  # _build/html, chapter 1 -> docs/screenshot.png
                                       #   and docs/screenshot-phone.png (make screenshot)

Both serve the built site on 127.0.0.1 from this process and drive
/usr/bin/chromium (`apt-get install -y chromium`) through Playwright; no
browser is downloaded. The PDF waits for MathJax to typeset every formula and
for every figure to load, opens the exercise solutions, then prints.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The browser plumbing (Chromium's path and flags, serving, settling a page) is
# shared with the browser tests.
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from book_site import CHROMIUM, CHROMIUM_ARGS, SETTLE, serve  # noqa: E402

SCREENSHOT_PAGE = "chapters/01_why_attention.html"
SCREENSHOT_MAX_BYTES = 300_000

FOOTER = (
    '<div style="font-size:8px; width:100%; text-align:center; color:#555;">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)


@contextlib.contextmanager
def chromium_page(**context_options):
    if not Path(CHROMIUM).is_file():
        sys.exit(f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(**context_options)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            # What printing needs: figures, styles, fonts and MathJax. (A single-page
            # build has no search index, which the theme still asks for.)
            page.on(
                "requestfailed",
                lambda r: (
                    errors.append(f"{r.url} {r.failure}")
                    if r.resource_type in ("image", "stylesheet", "font") or "/mathjax/" in r.url
                    else None
                ),
            )
            yield page, errors
        finally:
            browser.close()


def pdf(site: Path, out: Path) -> Path:
    """Print the single-page build of the whole book to one PDF."""
    start = next(
        (site / name for name in ("intro.html", "index.html") if (site / name).is_file()), None
    )
    if start is None:
        sys.exit(
            f"no single-page build in {site}: run `jupyter-book build . --builder singlehtml`"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with serve(site) as origin, chromium_page() as (page, errors):
        page.goto(f"{origin}/{start.name}", wait_until="load")
        state = page.evaluate(SETTLE)
        if state["broken"] or state["typeset"] < state["formulas"] or errors:
            sys.exit(f"not printing a broken page: {state}, errors {errors}")
        # The printed book shows the exercise solutions; a reader cannot click paper.
        page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        page.emulate_media(media="print")
        page.pdf(
            path=str(out),
            format="A4",
            print_background=True,
            margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
        )
    print(f"{state['typeset']} formulas typeset, {state['images']} images")
    return out


#: A phone in portrait, as tests/browser/conftest.py's PHONE: 390x844 CSS px at 2x.
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}
MENU_OPEN = """() => [...document.querySelectorAll("nav.bd-docs-nav a")]
  .some((a) => a.checkVisibility() && a.getBoundingClientRect().left >= 0)"""


def screenshot(site: Path, out: Path, phone: bool = False) -> Path:
    """Screenshot the top of chapter 1 for the README, as a PNG under 300 KB.

    With ``phone``, on a 390x844 phone screen with the chapter menu tapped open.
    """
    from PIL import Image

    if not (site / SCREENSHOT_PAGE).is_file():
        sys.exit(f"no {SCREENSHOT_PAGE} in {site}: run `make book` first")
    options = PHONE if phone else {"viewport": {"width": 1200, "height": 760}}
    with serve(site) as origin, chromium_page(**options, color_scheme="light") as (page, errors):
        page.goto(f"{origin}/{SCREENSHOT_PAGE}", wait_until="load")
        page.evaluate(SETTLE)
        if phone:
            page.locator(".primary-toggle:visible").first.tap()
            page.wait_for_function(MENU_OPEN, timeout=5_000)
            page.wait_for_timeout(500)  # let the menu finish sliding in
        png = page.screenshot()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    # A page is mostly flat colour: 128 colours keep it crisp at a fraction of the size.
    image = image.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, optimize=True)
    size = out.stat().st_size
    if size > SCREENSHOT_MAX_BYTES:
        sys.exit(f"{out} is {size} bytes, over {SCREENSHOT_MAX_BYTES}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["pdf", "screenshot"])
    parser.add_argument(
        "--site", type=Path, help="the built site (default: _build/singlehtml or _build/html)"
    )
    parser.add_argument("--out", type=Path, help="the output file")
    args = parser.parse_args(argv)
    if args.mode == "pdf":
        out = pdf(
            args.site or ROOT / "_build" / "singlehtml",
            args.out or ROOT / "_build" / "pdf" / "book.pdf",
        )
        print(f"The PDF is at {out.resolve()}")
    else:
        site = args.site or ROOT / "_build" / "html"
        desktop = args.out or ROOT / "docs" / "screenshot.png"
        for out in (
            screenshot(site, desktop),
            screenshot(site, desktop.with_name(f"{desktop.stem}-phone.png"), phone=True),
        ):
            print(f"Screenshot saved to {out.resolve()} ({out.stat().st_size // 1000} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
