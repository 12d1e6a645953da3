"""What a reader sees on every page, at 1280x800 and on a 390x844 phone (issue 35).

- Display math fits its column at 1280 px; on a phone at most
  PHONE_MAX_SCROLLING displays per page scroll sideways.
- No text line starts with ".", ",", ":", ";" or ")" (at both widths).
- The first visit to a page on a phone (cold cache) transfers at most
  FIRST_VISIT_BUDGET bytes, and nothing leaves this machine.
- In dark mode an interactive figure sits on the page's background (no light
  frame) and the scroll cue of a wide display is a faint shadow, not a blob.

The facts are read on test_site.py's one load of each page per width
(`reading_visit`), and the tests assert on them. The phone tab loads every
page with the browser cache off (conftest.py), so each phone visit is a first
visit.
"""

from __future__ import annotations

import pytest
from book_site import SETTLE
from test_site import PAGES, css_rgb
from test_site import phone_visit as site_phone_visit
from test_site import visit as site_visit

#: Bytes a first visit to any page may transfer (uncompressed, as the tests' server sends).
FIRST_VISIT_BUDGET = 2_500_000
#: Displays that may scroll sideways on one page of a 390 px phone.
PHONE_MAX_SCROLLING = 3
#: A display may be this much wider than its column before it counts as cut (px).
SLACK = 1.0
#: The brightest the scroll shadow of a wide display may be in dark mode (0-1).
DARK_SHADOW_MAX = 0.25
PUNCTUATION = ".,:;)"


# One pass over the page: display widths, lines that start with punctuation,
# the bytes loaded so far, and (on request) the dark-mode facts.
READING = """([punctuation, dark]) => {
  const own = document.querySelector(".bd-article");
  const article = own || document.body;
  const texOf = new Map();
  try {
    for (const item of MathJax.startup.document.math) texOf.set(item.typesetRoot, item.math);
  } catch (error) {}
  const heading = (node) => {
    const section = (node.nodeType === 1 ? node : node.parentElement).closest("section");
    const h = section && section.querySelector("h1, h2, h3, h4");
    return h ? h.textContent.replace(/[#¶]/g, "").trim().slice(0, 60) : "";
  };
  const displays = [];
  for (const box of article.querySelectorAll('mjx-container[display="true"]')) {
    const math = box.querySelector("mjx-math");
    const width = Math.max(box.scrollWidth, math ? math.getBoundingClientRect().width : 0);
    if (!width) continue;  // inside a closed dropdown
    const holder = box.closest("div.math") || box;
    const parent = holder.parentElement;
    const style = getComputedStyle(parent);
    const column = parent.clientWidth - parseFloat(style.paddingLeft)
      - parseFloat(style.paddingRight);
    const tex = (texOf.get(box) || box.textContent || "").replace(/\\s+/g, " ").trim();
    displays.push({tex: tex.slice(0, 50), width: Math.round(width), column: Math.round(column),
                   section: heading(box)});
  }
  // A text node that starts with punctuation, after an inline box (code, math,
  // a link): does the punctuation sit on a later line than what comes before it?
  // Code, and the API's signatures: a signature wider than a phone's line
  // breaks anywhere, as code does (book.css), not at its punctuation.
  const skip = "pre, code, .sig, script, style, mjx-container, .highlight, nav, svg";
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  const lastRect = (node) => {
    if (node.nodeType === 3) {
      const text = node.data.replace(/\\s+$/, "");
      if (!text) return null;
      const range = document.createRange();
      range.setStart(node, text.length - 1);
      range.setEnd(node, text.length);
      const rects = range.getClientRects();
      return rects.length ? rects[rects.length - 1] : null;
    }
    if (node.nodeType !== 1) return null;
    const rects = node.getClientRects();
    return rects.length ? rects[rects.length - 1] : null;
  };
  const before = (node) => {
    let here = node;
    while (here && here !== article) {
      let prev = here.previousSibling;
      while (prev && prev.nodeType === 3 && !prev.data.trim()) prev = prev.previousSibling;
      if (prev) return prev;
      here = here.parentElement;
      if (!here || getComputedStyle(here).display !== "inline") return null;
    }
    return null;
  };
  const lines = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.search(/\\S/);
    if (at < 0 || !punctuation.includes(node.data[at])) continue;
    if (node.parentElement.closest(skip)) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + 1);
    const rect = range.getClientRects()[0];
    if (!rect || !rect.width) continue;  // hidden
    const prev = before(node);
    const other = prev && lastRect(prev);
    if (!other || !other.width) continue;
    if (rect.left + 1 < other.right && rect.top > other.top + 1) {
      const said = (prev.textContent || "").replace(/\\s+/g, " ").trim();
      lines.push({after: said.slice(-30), line: node.data.slice(at, at + 30),
                  section: heading(node)});
    }
  }
  const entries = [...performance.getEntriesByType("navigation"),
                   ...performance.getEntriesByType("resource")];
  const loaded = entries.map((e) => ({url: e.name, bytes: e.decodedBodySize || 0}));
  let darkFacts = null;
  if (dark && own) {
    const root = document.documentElement;
    const theme = root.dataset.theme;
    root.dataset.theme = "dark";
    const frames = [...document.querySelectorAll(".cell_output .text_html")]
      .filter((box) => box.querySelector(".sa-interactive"))
      .map((box) => {
        const s = getComputedStyle(box);
        return {background: s.backgroundColor, padding: s.paddingTop};
      });
    const art = getComputedStyle(article);
    darkFacts = {
      frames,
      page: getComputedStyle(document.body).backgroundColor,
      cover: art.getPropertyValue("--book-scroll-cover").trim(),
      shadow: art.getPropertyValue("--book-scroll-shadow").trim(),
      probe: (() => {
        const probe = document.createElement("span");
        probe.style.color = art.getPropertyValue("--book-scroll-shadow");
        probe.style.backgroundColor = art.getPropertyValue("--book-scroll-cover");
        article.append(probe);
        const s = getComputedStyle(probe);
        const out = {shadow: s.color, cover: s.backgroundColor};
        probe.remove();
        return out;
      })(),
    };
    root.dataset.theme = theme;
  }
  return {displays, lines, loaded, dark: darkFacts};
}"""

_visits: dict[tuple[str, str], dict] = {}


def reading_visit(tab, name: str, page: str) -> dict:
    """The facts of READING for `page`, read on test_site.py's own load of it.

    test_site.py loads every page once on the desktop tab and once on the phone
    tab (whose cache is off: each phone load is a first visit), and these
    tests' ids are that module's, so both run on the worker that holds the
    loaded page: READING reads it there, without a load of its own.
    """
    key = (name, page)
    if key not in _visits:
        facts = site_phone_visit(tab, page) if name == "phone" else site_visit(tab, page)
        if tab.path_of(tab.page.url) != page:  # test_interactive moved on, or a redirect
            tab.reset()
            tab.page.goto(tab.url(page), wait_until="load")
            tab.page.evaluate(SETTLE)
        reading = tab.page.evaluate(READING, [PUNCTUATION, name == "phone"])
        reading["status"] = facts.get("status", 200)
        reading["foreign"] = list(facts.get("foreign", tab.foreign))
        reading["failed"] = list(facts.get("failed", tab.failed))
        _visits[key] = reading
    return _visits[key]


@pytest.fixture(params=PAGES)
def desktop(request, tab):
    return reading_visit(tab, "desktop", request.param), request.param


@pytest.fixture(params=PAGES, ids=[f"phone:{page}" for page in PAGES])
def phone_first(request, phone):
    return reading_visit(phone, "phone", request.param), request.param


def describe(displays) -> str:
    return "\n".join(
        f"  {d['section']!r}: {d['tex']!r}... {d['width']} px in a {d['column']} px column"
        for d in displays
    )


def too_wide(facts) -> list[dict]:
    return [d for d in facts["displays"] if d["width"] > d["column"] + SLACK]


def test_displays_fit_their_column_at_1280(desktop):
    facts, page = desktop
    cut = too_wide(facts)
    assert not cut, f"{page}: display math wider than its column at 1280 px:\n" + describe(cut)


def test_few_displays_scroll_on_a_phone(phone_first):
    facts, page = phone_first
    scrolling = too_wide(facts)
    assert len(scrolling) <= PHONE_MAX_SCROLLING, (
        f"{page}: {len(scrolling)} displays scroll sideways at 390 px "
        f"(at most {PHONE_MAX_SCROLLING}):\n" + describe(scrolling)
    )


def lines_of(lines) -> str:
    return "\n".join(
        f"  {line['section']!r}: ...{line['after']!r} / then a line starts {line['line']!r}"
        for line in lines
    )


def test_no_line_starts_with_punctuation_at_1280(desktop):
    facts, page = desktop
    lines = facts["lines"]
    assert not lines, f"{page}: lines start with punctuation at 1280 px:\n" + lines_of(lines)


def test_no_line_starts_with_punctuation_on_a_phone(phone_first):
    facts, page = phone_first
    lines = facts["lines"]
    assert not lines, f"{page}: lines start with punctuation at 390 px:\n" + lines_of(lines)


def test_first_visit_is_light_and_stays_on_this_machine(phone_first):
    facts, page = phone_first
    assert facts["status"] == 200, f"{page}: HTTP {facts['status']}"
    assert not facts["foreign"], f"{page}: requests left this machine: {facts['foreign']}"
    assert not facts["failed"], f"{page}: failed requests: {facts['failed']}"
    total = sum(item["bytes"] for item in facts["loaded"])
    heaviest = sorted(facts["loaded"], key=lambda item: -item["bytes"])[:6]
    assert total <= FIRST_VISIT_BUDGET, (
        f"{page}: a first visit on a phone loads {total / 1e6:.2f} MB "
        f"(at most {FIRST_VISIT_BUDGET / 1e6:.1f} MB) in {len(facts['loaded'])} responses; "
        "heaviest: "
        + ", ".join(
            f"{item['url'].split('/')[-1].split('?')[0]} {item['bytes'] / 1e3:.0f} KB"
            for item in heaviest
        )
    )


def rgba(value: str) -> tuple[float, float, float, float]:
    """'rgb(1, 2, 3)' or 'rgba(1, 2, 3, 0.5)' -> (r, g, b, alpha), r g b in 0-1."""
    *channels, alpha = css_rgb(value)
    return (*(channel / 255 for channel in channels), alpha)


def test_dark_mode_has_no_light_frames_or_blobs(phone_first):
    facts, page = phone_first
    dark = facts["dark"]
    if dark is None:
        pytest.skip(f"{page} has no article (Sphinx's search page)")
    light_frames = [
        frame
        for frame in dark["frames"]
        if rgba(frame["background"])[3] > 0 and rgba(frame["background"]) != rgba(dark["page"])
    ]
    assert not light_frames, (
        f"{page}: in dark mode an interactive figure sits in a frame of its own colour "
        f"(the page is {dark['page']}): {light_frames}"
    )
    r, g, b, alpha = rgba(dark["probe"]["shadow"])
    glow = alpha * (0.2126 * r + 0.7152 * g + 0.0722 * b)
    assert glow <= DARK_SHADOW_MAX, (
        f"{page}: in dark mode the scroll shadow of a wide display is {dark['shadow']} "
        f"(brightness {glow:.2f} over the page, at most {DARK_SHADOW_MAX})"
    )
    assert rgba(dark["probe"]["cover"])[:3] == rgba(dark["page"])[:3], (
        f"{page}: the scroll cue's cover {dark['probe']['cover']} is not the page's "
        f"background {dark['page']} in dark mode"
    )
