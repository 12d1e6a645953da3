"""The interactive figures (issue 23) in Chromium: drawn, operable, and equal to the Python.

A chapter stores each interactive figure as a hidden notebook output with the
figure's data (``selfattention.book.interactive``), including ``checks``: the
numbers the notebook computed with the package for fixed settings. The site's
script, ``_static/interactive.js``, draws the figure from that data. Each page
with one is loaded once on the desktop tab (the load test_site.py's checks use
too), once on the phone and once with JavaScript off; everything is collected
in that visit and the tests assert on it. They check that

- every figure is drawn, and every control changes what it shows: with the
  mouse, with the keyboard (Tab, arrows, Home/End, Space), and by touch;
- the numbers the browser shows, and those it computed, equal the notebook's
  for every stored check;
- there are no console errors and no requests to another host;
- axe-core finds nothing serious on the figures in dark mode after use (test_site.py
  runs it on every page as it loads), and on a 390px phone nothing pans sideways;
- with JavaScript off the figure stays hidden and the static figure shows;
- the script and its stylesheet stay within their budget (300 KB).
"""

from __future__ import annotations

import ast
import json
import re

import pytest
from book_site import FORMULAS_AND_CODE, ROOT, SETTLE, SITE, pruned

try:  # one load per page and viewport for the whole run: test_site.py's visits
    from test_site import phone_visit as site_phone_visit
    from test_site import visit as site_visit
except ImportError:  # pragma: no cover - test_site.py changed; load the pages here
    site_visit = site_phone_visit = None

#: Each chapter's interactive figures: the page, and the static figures they accompany.
FIGURES = {
    "chapters/02_search_analogy.html": {"fig-search-temperature": "softmax"},
    "chapters/07_softmax.html": {"fig-softmax-temperature": "softmax"},
    "chapters/09_multi_head_attention.html": {"fig-mha-heads": "heads"},
    "chapters/10_masked_and_cross_attention.html": {"fig-masked-alignment": "masks"},
    "chapters/11_training_attention.html": {"fig-lannister": "classifier"},
    "chapters/15_induction_heads.html": {"fig-induction-heads": "heads"},
}
PAGES = list(FIGURES)
BUDGET_BYTES = 300_000
TOLERANCE = 1e-9  # the stored numbers have 10 decimals (4 for chapter 9's weights)

# --- in-page drivers: they set the real controls as a reader would (value, then the
# event the browser fires) and read back what the figure shows. --------------------

HOSTS = """() => [...document.querySelectorAll(".sa-interactive")].map((host) => ({
  kind: host.dataset.kind, figure: host.dataset.figure, hidden: host.hidden,
  mounted: host.dataset.mounted === "true",
  data: JSON.parse(host.querySelector('script[type="application/json"]').textContent),
  staticFigure: !!document.getElementById(host.dataset.figure),
  width: host.getBoundingClientRect().width,
}))"""

READ = """(root) => ({
  state: JSON.parse(root.dataset.state),
  status: root.querySelector(".sa-status").textContent,
  numbers: [...root.querySelectorAll("td.sa-num[data-value], .sa-key .sa-num:not([hidden])")]
    .map((e) => ({value: Number(e.dataset.value), text: e.textContent})),
  mask: root.querySelector("table.sa-mask") ?
    JSON.parse(root.querySelector("table.sa-mask").dataset.mask) : null,
  cells: [...root.querySelectorAll("table.sa-mask td")].map((td) => td.textContent),
  invalid: !!root.querySelector("[aria-invalid=true]"),
})"""

DRIVE = (
    """async ([index, settings]) => {
  const READ = """
    + READ
    + """;
  const host = document.querySelectorAll(".sa-interactive")[index];
  const root = host.querySelector(".sa-widget");
  const ranges = [...root.querySelectorAll("input[type=range]")];
  const radios = [...root.querySelectorAll("input[type=radio]")];
  const setRange = (input, value) => {
    input.value = String(value);
    input.dispatchEvent(new Event("input", {bubbles: true}));
  };
  const pick = (value) => {
    const radio = radios.find((r) => r.value === value);
    if (!radio.checked) radio.click();
  };
  const out = [];
  for (const s of settings) {
    if (host.dataset.kind === "softmax") {
      root.querySelectorAll("input[type=checkbox]").forEach((box, j) => {
        const want = s.keep ? s.keep[j] : true;
        if (box.checked !== want) box.click();
      });
      setRange(ranges[0], s.index);
    } else if (host.dataset.kind === "heads") {
      if (radios.length) pick(String(s.view));
      root.querySelectorAll("button.sa-token")[s.query].click();
    } else if (host.dataset.kind === "masks") {
      pick(s.kind);
      if (s.align) pick(s.align);
      if (s.t_q && s.kind !== "cross") setRange(ranges[0], s.t_q - 1);
      if (s.window) setRange(ranges[1], s.window - 1);
      if (s.length) setRange(ranges[2], s.length - 1);
    } else if (host.dataset.kind === "classifier") {
      const select = root.querySelector("select");
      select.value = String(s.index);
      select.dispatchEvent(new Event("change", {bubbles: true}));
    }
    out.push(READ(root));
  }
  return out;
}"""
)

PRINT = """() => [...document.querySelectorAll(".sa-interactive")].map((host) => {
  const figure = document.getElementById(host.dataset.figure);
  const img = figure && figure.querySelector("img");
  return {figure: host.dataset.figure, widget: host.checkVisibility(),
          image: !!img && img.checkVisibility()};
})"""

AXE_RUN = """async (options) => {
  const results = await axe.run({include: [[".sa-widget"]]}, options);
  return results.violations.filter((v) => ["serious", "critical"].includes(v.impact))
    .map((v) => `${v.id} (${v.impact}): ` + v.nodes.map((n) => n.target.join(" ")).join(", "));
}"""

OVERFLOW = """() => ({
  scrollWidth: document.documentElement.scrollWidth,
  width: document.documentElement.clientWidth,
  widgets: [...document.querySelectorAll(".sa-widget")].map((w) => {
    const r = w.getBoundingClientRect();
    return {left: r.left, right: r.right, scrollWidth: w.scrollWidth, clientWidth: w.clientWidth};
  }),
})"""


# Every control of the figures, with its size: each must be a 24 x 24 CSS px target
# (WCAG 2.2's minimum); hidden controls (a mask's unused slider) are skipped.
TARGETS = """() => [...document.querySelectorAll(".sa-widget")].flatMap((w) =>
  [...w.querySelectorAll("input, button, select, summary, textarea")]
    .filter((e) => e.checkVisibility())
    .map((e) => {
      const r = e.getBoundingClientRect();
      const label = e.labels && e.labels.length ? e.labels[0].textContent : e.textContent;
      return {control: `${e.tagName.toLowerCase()}[${e.type || ""}] ${label.trim().slice(0, 24)}`,
              width: r.width, height: r.height};
    }))"""

# A heads figure's height, and the span from its picker to its last row and status
# line: the part a reader must see at once.
FIT = """() => [...document.querySelectorAll(".sa-interactive")].map((host) => {
  const w = host.querySelector(".sa-widget");
  const box = (e) => e.getBoundingClientRect();
  const parts = [w.querySelector("fieldset.sa-choice"), w.querySelector(".sa-heads"),
                 w.querySelector(".sa-status")].filter(Boolean);
  return {kind: host.dataset.kind, height: box(w).height, viewport: innerHeight,
          span: Math.max(...parts.map((e) => box(e).bottom)) -
                Math.min(...parts.map((e) => box(e).top))};
})"""

# Scroll each figure's status line to where the theme's "Back to top" button appears
# on a phone (90% of the viewport's height, after a scroll up) and name any element
# that covers part of it.
COVERED = """async () => {
  const frame = () => new Promise((done) => requestAnimationFrame(done));
  const frames = async () => { await frame(); await frame(); };
  const out = [];
  for (const status of document.querySelectorAll(".sa-widget .sa-status")) {
    const start = status.getBoundingClientRect();
    const target = scrollY + start.top + start.height / 2 - 0.9 * innerHeight;
    window.scrollTo({top: target + 300, behavior: "instant"});
    await frames();
    window.scrollTo({top: target, behavior: "instant"});  // up: the theme shows its button
    await frames();
    await frames();
    const r = status.getBoundingClientRect();
    const blockers = new Set();
    for (const fx of [0.02, 0.25, 0.5, 0.75, 0.98]) {
      for (const fy of [0.2, 0.5, 0.8]) {
        const e = document.elementFromPoint(r.left + fx * r.width, r.top + fy * r.height);
        if (e && !status.contains(e)) {
          blockers.add(e.id ? `#${e.id}` : `${e.tagName}.${e.className}`);
        }
      }
    }
    out.push({status: status.textContent.slice(0, 40), top: r.top, bottom: r.bottom,
              blockers: [...blockers]});
  }
  return out;
}"""

# What a heads figure shows of positions and repeated tokens, from its start query
# in its first view, and the colours and dash patterns of the lines in each view.
MARKS = """async (index) => {
  const host = document.querySelectorAll(".sa-interactive")[index];
  const root = host.querySelector(".sa-widget");
  const data = JSON.parse(host.querySelector('script[type="application/json"]').textContent);
  const radios = [...root.querySelectorAll("input[type=radio]")];
  if (radios.length) radios[0].click();
  const buttons = [...root.querySelectorAll("button.sa-token")];
  buttons[data.start_query || 0].click();
  const marked = (items) => items
    .map((e, i) => (e.querySelector(".sa-mark").checkVisibility() ? i : null))
    .filter((i) => i !== null);
  const texts = (selector) => [...root.querySelectorAll(selector)].map((e) => e.textContent);
  const out = {positions: texts(".sa-positions .sa-pos"), keyPositions: texts(".sa-key .sa-pos"),
               markedQueries: marked(buttons),
               markedKeys: marked([...root.querySelectorAll(".sa-key")]),
               status: root.querySelector(".sa-status").textContent,
               legend: root.querySelector(".sa-legend").textContent, views: []};
  for (const radio of radios.length ? radios : [null]) {
    if (radio) radio.click();
    const lines = [...root.querySelectorAll("svg.sa-lines line")]
      .filter((l) => l.style.display !== "none");
    out.views.push({strokes: [...new Set(lines.map((l) => getComputedStyle(l).stroke))],
                    dashes: [...new Set(lines.map((l) => getComputedStyle(l).strokeDasharray))]});
  }
  return out;
}"""

TEXTS = """() => ({
  titles: [...document.querySelectorAll(".sa-title")].map((t) => t.textContent),
  texts: [...document.querySelectorAll(".sa-widget")].map((w) => w.innerText),
  notes: [...document.querySelectorAll(".sa-elsewhere")].map((n) => n.checkVisibility()),
})"""


def axe(page) -> list[str]:
    """Serious or critical axe-core findings on the interactive figures of the page."""
    from axe_playwright_python.base import AXE_SCRIPT

    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_SCRIPT)
    # preload: axe would fetch every stylesheet itself, and resolve the theme's
    # @import "basic.css" against the site root (a 404); test_site.py does the same.
    # The page's formulas and code (none inside a figure) are out meanwhile.
    with pruned(page, FORMULAS_AND_CODE):
        return page.evaluate(AXE_RUN, {"resultTypes": ["violations"], "preload": False})


def views_of(data: dict) -> list[list[int]]:
    """The heads each choice of a heads figure shows (by default, each head alone)."""
    if "views" in data:
        return [view["heads"] for view in data["views"]]
    return [[r] for r in range(len(data["heads"]))]


def settings_of(host: dict) -> list[dict]:
    """The control settings to visit for one figure: its stored checks (or every row)."""
    data = host["data"]
    if host["kind"] == "heads":
        return [
            {"view": v, "heads": heads, "query": i}
            for v, heads in enumerate(views_of(data))
            for i in range(len(data["tokens"]))
        ]
    if host["kind"] == "classifier":
        return [{"index": index} for index in range(len(data["checks"]))]
    return data["checks"]


# --- one visit per page and viewport ---------------------------------------------------

_desktop: dict[str, dict] = {}
_phone: dict[str, dict] = {}
_no_script: dict[str, dict] = {}


def load(tab, page: str) -> None:
    tab.reset()
    tab.page.goto(tab.url(page), wait_until="load")
    tab.page.evaluate(SETTLE)


def keyboard_and_mouse(tab, index: int, host: dict, pressed: list) -> list[tuple[str, dict]]:
    """Operate one figure with real key presses, clicks and hovers; read it after each.

    Returns (action, what the figure shows after it), starting with ("start", ...).
    Appends to ``pressed`` whether the focused query button is the selected one.
    """
    page = tab.page
    root = page.locator(".sa-interactive").nth(index).locator(".sa-widget")
    widget = root.element_handle()  # read through one handle: no query per read

    def read():
        return widget.evaluate(READ)

    steps = [("start", read())]
    if host["kind"] == "softmax":
        slider = root.locator("input[type=range]")
        slider.focus()
        for key in ("ArrowRight", "ArrowRight", "Home", "End", "PageDown"):
            page.keyboard.press(key)
            steps.append((key, read()))
        if host["data"]["maskable"]:
            page.keyboard.press("Tab")  # to the first key's tick box
            page.keyboard.press("Space")
            steps.append(("Tab, Space", read()))
            root.locator("label.sa-option").nth(1).click()  # the mouse
            steps.append(("click", read()))
        else:
            box = slider.bounding_box()
            slider.click(position={"x": 0.25 * box["width"], "y": box["height"] / 2})
            steps.append(("click", read()))
    elif host["kind"] == "heads":
        buttons = root.locator("button.sa-token")
        buttons.nth(0).focus()
        steps.append(("focus", read()))
        for key in ("ArrowDown", "ArrowDown", "End", "ArrowUp", "Home"):
            page.keyboard.press(key)
            steps.append((key, read()))
        pressed.append(page.evaluate("document.activeElement.getAttribute('aria-pressed')"))
        buttons.nth(3).hover()
        steps.append(("hover", read()))
        root.locator(".sa-keys").hover()
        steps.append(("hover away", read()))
        radios = root.locator("input[type=radio]")
        if radios.count():
            radios.nth(0).focus()
            page.keyboard.press("ArrowRight")
            steps.append(("head ArrowRight", read()))
    elif host["kind"] == "masks":
        root.locator("input[type=radio][value=causal]").focus()
        page.keyboard.press("ArrowRight")  # the radio group moves to "padding"
        steps.append(("kind ArrowRight", read()))
        root.locator("input[type=range]:visible").first.focus()
        page.keyboard.press("ArrowLeft")
        steps.append(("length ArrowLeft", read()))
        root.locator("label.sa-option", has_text="cross-attention").click()
        steps.append(("click cross", read()))
        root.locator("label.sa-option", has_text="sliding window").click()
        steps.append(("click window", read()))
    elif host["kind"] == "classifier":
        root.locator("input[type=text]").focus()
        page.keyboard.press("Control+A")
        page.keyboard.type("A Jedi always pays his debts.")
        steps.append(("type", read()))
        page.keyboard.type(" hello")
        steps.append(("unknown word", read()))
        page.keyboard.press("Tab")  # to the list of lines
        page.keyboard.press("ArrowDown")
        steps.append(("pick ArrowDown", read()))
    return steps


def visit(tab, page: str) -> dict:
    """Load ``page`` once on the desktop tab and operate every figure on it.

    The page is loaded through test_site.py's visit, which records that module's
    facts (axe-core on the whole page among them) as it loads, so the run loads
    each page once for both modules. Then every figure is operated with the
    keyboard and the mouse from its first state, driven through every stored
    check, and axe-core runs on the figures in dark mode, in the state they were
    left in.
    """
    if page in _desktop:
        return _desktop[page]
    viewport = tab.page.viewport_size  # put back after the laptop-sized check
    if not (SITE / page).is_file():
        pytest.skip(f"{page} is not built")
    if site_visit is not None:
        site_visit(tab, page)
    if tab.path_of(tab.page.url) != page:  # test_site had loaded it before
        load(tab, page)
    facts: dict = {"hosts": tab.page.evaluate(HOSTS), "driven": [], "steps": [], "pressed": []}
    for index, host in enumerate(facts["hosts"]):
        if host["mounted"]:
            facts["steps"].append(keyboard_and_mouse(tab, index, host, facts["pressed"]))
            facts["driven"].append(tab.page.evaluate(DRIVE, [index, settings_of(host)]))
    facts.update(tab.page.evaluate(TEXTS))
    facts["targets"] = tab.page.evaluate(TARGETS)
    facts["marks"] = [
        tab.page.evaluate(MARKS, index) if host["kind"] == "heads" else None
        for index, host in enumerate(facts["hosts"])
    ]
    tab.page.set_viewport_size({"width": 1280, "height": 800})  # the review's laptop
    facts["fit"] = tab.page.evaluate(FIT)
    tab.page.set_viewport_size(viewport)
    tab.page.emulate_media(media="print")
    facts["print"] = tab.page.evaluate(PRINT)
    tab.page.emulate_media(media="screen")
    tab.page.evaluate("document.documentElement.dataset.theme = 'dark'")
    facts["axe_dark"] = axe(tab.page)
    facts["dark_text"] = tab.page.evaluate(
        "() => [...document.querySelectorAll('.sa-widget')].map((w) => getComputedStyle(w).color)"
    )
    tab.page.evaluate("document.documentElement.dataset.theme = 'light'")
    facts["console_errors"] = list(tab.console_errors)
    facts["foreign"] = list(tab.foreign)
    facts["failed"] = list(tab.failed)
    _desktop[page] = facts
    return facts


def phone_visit(phone, page: str) -> dict:
    """Load ``page`` once on the phone: a tap on each figure, and the widths before and after.

    The page is test_site.py's phone load of it (that module runs axe-core's
    layout rules on every page at this size), which ends with the menu open:
    it is closed and the page scrolled back to the top, where a reader starts.
    """
    if page in _phone:
        return _phone[page]
    if not (SITE / page).is_file():
        pytest.skip(f"{page} is not built")
    if site_phone_visit is not None:
        site_phone_visit(phone, page)
    if phone.path_of(phone.page.url) == page:
        phone.page.keyboard.press("Escape")  # the theme's menu is a modal dialog
        phone.page.wait_for_function("() => !document.querySelector('dialog[open]')")
        phone.page.evaluate("window.scrollTo({top: 0, behavior: 'instant'})")
    else:
        load(phone, page)
    facts = {"overflow": [phone.page.evaluate(OVERFLOW)], "taps": []}
    for index, host in enumerate(phone.page.evaluate(HOSTS)):
        root = phone.page.locator(".sa-interactive").nth(index).locator(".sa-widget")
        before = root.evaluate(READ)
        target = {
            "softmax": "input[type=range]",
            "heads": "button.sa-token >> nth=-1",
            "masks": "label.sa-option >> nth=1",
            "classifier": "input[type=text]",
        }[host["kind"]]
        control = root.locator(target).first
        control.scroll_into_view_if_needed()
        if host["kind"] == "softmax":
            box = control.bounding_box()
            phone.page.touchscreen.tap(box["x"] + 0.9 * box["width"], box["y"] + box["height"] / 2)
        else:
            control.tap()
        if host["kind"] == "classifier":
            phone.page.keyboard.type(" jedi")
        facts["taps"].append((host["kind"], before, root.evaluate(READ)))
    facts["overflow"].append(phone.page.evaluate(OVERFLOW))
    facts["targets"] = phone.page.evaluate(TARGETS)
    facts["fit"] = phone.page.evaluate(FIT)
    facts["covered"] = phone.page.evaluate(COVERED)
    facts["console_errors"] = list(phone.console_errors)
    _phone[page] = facts
    return facts


@pytest.fixture(scope="module")
def no_script(browser, server):
    """One tab with JavaScript off, for every page's no-script visit on this worker."""
    context = browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    yield context.new_page(), server
    context.close()


def no_script_visit(no_script, page: str) -> dict:
    """Load ``page`` with JavaScript off: what shows of each figure and its static twin."""
    if page in _no_script:
        return _no_script[page]
    if not (SITE / page).is_file():
        pytest.skip(f"{page} is not built")
    tab, origin = no_script
    tab.goto(f"{origin}/{page}", wait_until="load")
    facts = tab.evaluate(
        """() => [...document.querySelectorAll(".sa-interactive")].map((host) => {
          const figure = document.getElementById(host.dataset.figure);
          const img = figure && figure.querySelector("img");
          return {figure: host.dataset.figure, shown: host.checkVisibility(),
                  drawn: !!host.querySelector(".sa-widget"),
                  image: img ? {shown: img.checkVisibility(), alt: img.alt,
                                loaded: img.complete && img.naturalWidth > 0} : null,
                  caption: figure ? figure.querySelector("figcaption").innerText : ""};
        })"""
    )
    _no_script[page] = facts
    return facts


# --- the tests ------------------------------------------------------------------------


def test_script_and_stylesheet_fit_the_budget():
    files = sorted((ROOT / "_static").glob("interactive*"))
    assert {f.suffix for f in files} == {".js", ".css"}, files
    total = sum(f.stat().st_size for f in files)
    assert total <= BUDGET_BYTES, f"interactive JS + CSS is {total} bytes, over {BUDGET_BYTES}"


@pytest.mark.parametrize("page", PAGES)
def test_the_script_is_served_once_from_this_site(page, site):
    html = (site / page).read_text(encoding="utf-8")
    scripts = re.findall(r'<script[^>]*src="([^"]*interactive[^"]*)"', html)
    styles = re.findall(r'<link[^>]*href="([^"]*interactive[^"]*\.css[^"]*)"', html)
    assert len(scripts) == 1 and len(styles) == 1, (scripts, styles)
    assert scripts[0].startswith("../_static/interactive.js"), scripts
    # the same URL on every page, so the browser caches it
    other = (site / PAGES[0]).read_text(encoding="utf-8")
    assert scripts[0] in other


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_is_drawn_next_to_its_static_figure(page, tab):
    facts = visit(tab, page)
    found = {host["figure"]: host["kind"] for host in facts["hosts"]}
    assert found == FIGURES[page], f"{page}: interactive figures {found}"
    for host in facts["hosts"]:
        assert host["mounted"] and not host["hidden"], f"{page}: {host['figure']} not drawn"
        assert host["staticFigure"], f"{page}: no static figure {host['figure']}"
        assert host["width"] > 300


@pytest.mark.parametrize("page", PAGES)
def test_no_console_errors_and_nothing_from_another_host(page, tab):
    facts = visit(tab, page)
    assert not facts["console_errors"], facts["console_errors"]
    assert not facts["foreign"] and not facts["failed"], facts["foreign"] + facts["failed"]


def softmax_numbers(host, driven):
    """(check, weights shown, blend shown) of a softmax figure, for each stored check."""
    T = len(host["data"]["keys"])
    for check, seen in zip(host["data"]["checks"], driven, strict=True):
        yield check, seen["numbers"][:T], seen["numbers"][T:]


@pytest.mark.parametrize("page", PAGES)
def test_the_browser_shows_the_notebooks_numbers(page, tab):
    facts = visit(tab, page)
    for host, driven in zip(facts["hosts"], facts["driven"], strict=True):
        data = host["data"]
        if host["kind"] == "softmax":
            for check, weights, blend in softmax_numbers(host, driven):
                where = f"{page} at tau = {check['tau']}, keep = {check.get('keep')}"
                for j, (want, got) in enumerate(zip(check["weights"], weights, strict=True)):
                    assert abs(got["value"] - want) <= TOLERANCE, f"{where}: weight {j}"
                    masked = check.get("keep") is not None and not check["keep"][j]
                    shown = "0 (masked)" if masked else f"{want:.3f}"
                    assert got["text"] == shown, f"{where}: weight {j} shows {got['text']}"
                pairs = zip(check.get("blend", []), blend, strict=True)
                for axis, (want, got) in enumerate(pairs):
                    assert abs(got["value"] - want) <= TOLERANCE, f"{where}: blend {axis}"
                    assert got["text"] == f"{want:.2f}", f"{where}: blend {axis}"
                if check.get("keep") is not None and not any(check["keep"]):
                    assert "zeros, not NaN" in driven[-1]["status"]
        elif host["kind"] == "heads":
            for setting, seen in zip(settings_of(host), driven, strict=True):
                rows = [data["heads"][r][setting["query"]] for r in setting["heads"]]
                # per key j, one number for each head of the view
                want = [row[j] for j in range(len(data["tokens"])) for row in rows]
                assert seen["state"] == setting
                assert [n["value"] for n in seen["numbers"]] == want, f"{page}: {setting}"
                assert [n["text"] for n in seen["numbers"]] == [f"{w:.2f}" for w in want]
        elif host["kind"] == "classifier":
            assert len(data["checks"]) >= 20, f"{page}: only {len(data['checks'])} lines checked"
            for check, seen in zip(data["checks"], driven, strict=True):
                where = f"{page}: {' '.join(check['words'])!r}"
                want = check["probabilities"] + check["attention"]
                assert len(seen["numbers"]) == len(want), where
                for got, value in zip(seen["numbers"], want, strict=True):
                    assert abs(got["value"] - value) <= TOLERANCE, f"{where}: {got} != {value}"
                    assert got["text"] == f"{value:.3f}", f"{where}: shows {got['text']}"
        elif host["kind"] == "masks":
            for check, seen in zip(data["checks"], driven, strict=True):
                where = f"{page}: {check}"
                assert seen["state"]["kind"] == check["kind"], where
                assert seen["mask"] == check["mask"], where
                assert seen["cells"] == [str(x) for row in check["mask"] for x in row], where


@pytest.mark.parametrize("page", PAGES)
def test_every_control_changes_the_figure(page, tab):
    """Keys, clicks and hovers each change the state and what is shown and announced."""
    facts = visit(tab, page)
    for host, steps in zip(facts["hosts"], facts["steps"], strict=True):
        for (_, before), (action, after) in zip(steps, steps[1:], strict=False):
            assert after["state"] != before["state"], (
                f"{page} {host['kind']}: {action} did nothing"
            )
            assert after["status"] != before["status"], f"{page}: {action} was not announced"
            seen = (after["numbers"], after["mask"])
            assert seen != (before["numbers"], before["mask"]), (
                f"{page}: {action} showed nothing new"
            )


# One figure of each kind, step by step: what each key press selects. Each test
# is parametrized by its page, so that it runs where that page's visit is
# (conftest.scope_of).
SOFTMAX_PAGE = "chapters/02_search_analogy.html"
HEADS_PAGE = "chapters/09_multi_head_attention.html"
MASKS_PAGE = "chapters/10_masked_and_cross_attention.html"


@pytest.mark.parametrize("page", [SOFTMAX_PAGE])
def test_keyboard_moves_the_softmax_slider(page, tab):
    facts = visit(tab, page)
    softmax = dict(facts["steps"][0])
    taus = facts["hosts"][0]["data"]["taus"]
    start = facts["hosts"][0]["data"]["start"]
    assert softmax["ArrowRight"]["state"]["tau"] == taus[start + 2]
    assert softmax["Home"]["state"]["tau"] == taus[0]
    assert softmax["End"]["state"]["tau"] == taus[-1]


@pytest.mark.parametrize("page", [HEADS_PAGE])
def test_keyboard_moves_the_query_and_the_head(page, tab):
    facts = visit(tab, page)
    queries = [seen["state"]["query"] for _, seen in facts["steps"][0]]
    start = facts["hosts"][0]["data"]["start_query"]
    # focus query 0, Down, Down, End, Up, Home, hover query 3, hover away, next head
    assert queries == [start, 0, 1, 2, 5, 4, 0, 3, 0, 0], queries
    assert facts["pressed"] == ["true"], "the focused query button is not the selected one"
    assert facts["steps"][0][-1][1]["state"]["heads"] == [1]


@pytest.mark.parametrize("page", [MASKS_PAGE])
def test_keyboard_and_clicks_move_the_mask(page, tab):
    masks = dict(visit(tab, page)["steps"][0])
    assert masks["kind ArrowRight"]["state"]["kind"] == "padding"
    assert masks["length ArrowLeft"]["state"]["length"] == 2
    assert masks["click cross"]["state"]["kind"] == "cross"


@pytest.mark.parametrize("page", PAGES)
def test_accessible_in_dark_mode_after_use(page, tab):
    """axe-core on the figures in dark mode, in the states the tests left them in.

    (test_site.py runs axe-core on every page as it loads, light, at 1280px and 390px.)
    """
    facts = visit(tab, page)
    assert not facts["axe_dark"], f"{page} in dark mode: {facts['axe_dark']}"
    for color in facts["dark_text"]:
        channels = [float(x) for x in re.findall(r"[\d.]+", color)[:3]]
        assert min(channels) >= 150, f"{page}: the figure's text is {color} in dark mode"


@pytest.mark.parametrize("page", PAGES, ids=[f"phone:{page}" for page in PAGES])
def test_on_a_phone_it_fits_and_answers_a_tap(page, phone):
    facts = phone_visit(phone, page)
    for overflow in facts["overflow"]:  # before and after the taps
        assert overflow["scrollWidth"] <= overflow["width"], f"{page} pans sideways: {overflow}"
        for widget in overflow["widgets"]:
            assert widget["left"] >= 0 and widget["right"] <= overflow["width"], (page, widget)
            assert widget["scrollWidth"] <= widget["clientWidth"] + 1, (page, widget)
    for kind, before, after in facts["taps"]:
        assert after["state"] != before["state"], f"{page}: a tap on the {kind} figure did nothing"
    assert not facts["console_errors"], facts["console_errors"]


@pytest.mark.parametrize("page", PAGES)
def test_in_print_only_the_static_figure_shows(page, tab):
    """make pdf prints the pages with Chromium: the static figure, not the controls."""
    for figure in visit(tab, page)["print"]:
        assert not figure["widget"] and figure["image"], f"{page} in print: {figure}"


@pytest.mark.parametrize("page", PAGES, ids=[f"no-script:{page}" for page in PAGES])
def test_without_javascript_the_static_figure_shows(page, no_script):
    for figure in no_script_visit(no_script, page):
        assert not figure["shown"] and not figure["drawn"], f"{page}: {figure}"
        image = figure["image"]
        assert image and image["shown"] and image["loaded"], f"{page}: {figure}"
        assert len(image["alt"]) >= 30 and figure["caption"], f"{page}: {figure}"


def test_the_stored_data_is_what_the_notebooks_wrote():
    """The site shows the notebooks' stored outputs: each figure's JSON is in its chapter."""
    for page, figures in FIGURES.items():
        notebook = ROOT / page.replace(".html", ".ipynb")
        if not notebook.is_file():
            continue
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        stored = [
            "".join(output["data"]["text/html"])
            for cell in cells
            for output in cell.get("outputs", [])
            if "sa-interactive" in "".join(output.get("data", {}).get("text/html", ""))
        ]
        assert len(stored) == len(figures), f"{notebook.name}: {len(stored)} stored figures"
        for html, name in zip(stored, figures, strict=True):
            assert f'data-figure="{name}"' in html


CLASSIFIER = "chapters/11_training_attention.html"


@pytest.mark.parametrize("page", [CLASSIFIER])
def test_the_classifier_reads_what_the_reader_types(page, tab):
    """Typed text goes through the same tokenizer and model; an unknown word is named."""
    if page not in FIGURES:
        pytest.skip("chapter 11 has no interactive figure yet")
    facts = visit(tab, page)
    host = next(h for h in facts["hosts"] if h["kind"] == "classifier")
    steps = dict(facts["steps"][facts["hosts"].index(host)])
    typed = steps["type"]  # "A Jedi always pays his debts.": lower case, no full stop
    words = ["a", "jedi", "always", "pays", "his", "debts"]
    assert typed["state"]["words"] == words, typed["state"]
    check = next(c for c in host["data"]["checks"] if c["words"] == words)
    values = [n["value"] for n in typed["numbers"]]
    want = check["probabilities"] + check["attention"]
    assert max(abs(a - b) for a, b in zip(values, want, strict=True)) <= TOLERANCE
    unknown = steps["unknown word"]
    assert "hello" in unknown["state"]["error"] and unknown["invalid"], unknown
    assert not unknown["numbers"], "numbers still shown for a line the model cannot read"


INDUCTION = "chapters/15_induction_heads.html"
SMALLEST_TARGET = 24  # CSS px, WCAG 2.2 (2.5.8)


# Each check of a desktop visit and of a phone visit is a test of its own, with the
# id of its viewport, so it runs on the worker that holds that visit (conftest.py).
FITTING = [HEADS_PAGE, INDUCTION]


@pytest.mark.parametrize("page", FITTING)
def test_a_heads_figure_fits_the_viewport(page, tab):
    """At 1280x800 the whole figure is on screen at once. Chapter 15's was 912 px
    tall at 1280x800."""
    for host in visit(tab, page)["fit"]:
        assert host["height"] <= host["viewport"], f"{page} at 1280x800: {host}"


@pytest.mark.parametrize("page", FITTING, ids=[f"phone:{page}" for page in FITTING])
def test_a_heads_figure_fits_a_phone(page, phone):
    """At 390x844 its picker, every row of tokens and its status line are on screen
    at once (the title and help may scroll away). Chapter 15's was 1067 px tall."""
    for host in phone_visit(phone, page)["fit"]:
        assert host["span"] <= host["viewport"], f"{page} at 390x844: {host}"


@pytest.mark.parametrize("page", [INDUCTION])
def test_positions_and_the_two_occurrences_of_a_token_are_shown(page, tab):
    marks = visit(tab, page)["marks"][0]
    T = len(marks["positions"])
    assert marks["positions"] == marks["keyPositions"] == [str(i) for i in range(T)], marks
    # query 17 repeats the token at 9: both places are marked, on both sides
    assert marks["markedQueries"] == marks["markedKeys"] == [9, 17], marks
    assert "(also at 9)" in marks["status"], marks["status"]


@pytest.mark.parametrize("page", [HEADS_PAGE])
def test_all_heads_at_once_in_colour_and_each_on_its_own_scale(page, tab):
    facts = visit(tab, page)
    marks, data = facts["marks"][0], facts["hosts"][0]["data"]
    assert marks["markedKeys"] == [], "no token repeats in 'Hi, how are you?'"
    heads = len(data["heads"])
    assert views_of(data)[-1] == list(range(heads)), "the last view is all the heads"
    every = marks["views"][-1]
    assert len(every["strokes"]) == heads and len(every["dashes"]) == heads, every
    # the legend of head 0 states the range its line widths span
    weights = [w for row in data["heads"][0] for w in row]
    assert f"{min(weights):.2f} (thinnest) to {max(weights):.2f} (thickest)" in marks["legend"]


def assert_targets_are_24px(targets: list[dict], page: str, width: str) -> None:
    assert targets, f"{page}: no controls found"
    small = [
        t
        for t in targets
        if t["width"] < SMALLEST_TARGET - 0.01 or t["height"] < SMALLEST_TARGET - 0.01
    ]
    assert not small, f"{page} at {width} px: targets under 24x24 px: {small}"


@pytest.mark.parametrize("page", PAGES)
def test_every_control_is_a_24px_target(page, tab):
    assert_targets_are_24px(visit(tab, page)["targets"], page, "1280")


@pytest.mark.parametrize("page", PAGES, ids=[f"phone:{page}" for page in PAGES])
def test_every_control_is_a_24px_target_on_a_phone(page, phone):
    assert_targets_are_24px(phone_visit(phone, page)["targets"], page, "390")


@pytest.mark.parametrize("page", PAGES, ids=[f"phone:{page}" for page in PAGES])
def test_on_a_phone_nothing_covers_the_status_line(page, phone):
    """The theme's "Back to top" button (fixed at 90% of the height) covered it in 7 and 9."""
    for status in phone_visit(phone, page)["covered"]:
        assert not status["blockers"], f"{page}: the status line is covered: {status}"


@pytest.mark.parametrize("page", PAGES)
def test_titles_and_labels_read_as_text_and_math(page, tab):
    facts = visit(tab, page)
    for title in facts["titles"]:
        assert title.count("live") == 1, f"{page}: title {title!r}"
    for text in facts["texts"]:
        ascii_math = re.findall(r"\b[A-Za-z]_[A-Za-z0-9]\w*", text)
        assert not ascii_math, f"{page}: plain-text math in the figure: {ascii_math}"
    # the line JupyterLab shows stays hidden on the site
    assert len(facts["notes"]) == len(facts["hosts"]) and not any(facts["notes"]), facts["notes"]


def source_constant(path, name: str):
    """The literal that module `path` assigns to `name`, read from its source: the
    browser tests import nothing of the package (it would import torch)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            return ast.literal_eval(node.value)
    raise LookupError(f"{path.name} assigns no {name}")


def test_jupyterlab_shows_one_line_where_the_figure_is(browser):
    """Without the site's stylesheet and script (JupyterLab), the stored output shows
    the same line on every chapter: the live figure is on the website, and its title."""
    note = source_constant(ROOT / "src/selfattention/book/interactive.py", "NOTE")
    outputs = []  # (notebook, the output's HTML, its text/plain)
    for page in FIGURES:
        notebook = ROOT / page.replace(".html", ".ipynb")
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            for output in cell.get("outputs", []):
                html = "".join(output.get("data", {}).get("text/html", ""))
                if "sa-interactive" in html:
                    outputs.append((notebook.name, html, "".join(output["data"]["text/plain"])))
    assert len(outputs) == sum(len(figures) for figures in FIGURES.values())
    tab = browser.new_page()
    try:
        # every output in one document, each in its own box, as Lab shows them
        tab.set_content(
            "".join(f'<div class="output">{html}</div>' for _, html, _ in outputs),
            wait_until="load",
        )
        shown = tab.evaluate(
            """() => [...document.querySelectorAll("div.output")].map((box) => ({
              note: box.querySelector(".sa-elsewhere").checkVisibility(),
              text: box.innerText.trim(),
              host: box.querySelector(".sa-interactive").checkVisibility()}))"""
        )
    finally:
        tab.close()
    for (name, html, plain), seen in zip(outputs, shown, strict=True):
        assert seen["note"] and not seen["host"], f"{name}: {seen}"
        data = json.loads(html.split('<script type="application/json">')[1].split("</script>")[0])
        assert seen["text"].split() == f"{note} {data['title']}.".split(), seen
        assert plain.split() == seen["text"].split(), plain
