"""Site-wide build steps of "Attention, Step by Step" (a local Sphinx extension).

Loaded by _config.yml (``sphinx.local_extensions``). Four jobs, each small:

1. Punctuation keeps its word. Inline code (an inline block, see book.css)
   and inline math are boxes the browser may break a line after, so a
   closing ``.``, ``,``, ``:``, ``;`` or ``)`` right after one could start
   the next line. A post-transform wraps such a node, the punctuation after
   it and an opening bracket or quote right before it in
   ``<span class="book-nowrap">`` (``white-space: nowrap`` in book.css).
   tests/browser/test_reading.py checks that no line starts with punctuation.
2. No icon font in JavaScript. The theme loads Font Awesome's 1.5 MB script
   to turn about a dozen ``<i class="fa-...">`` tags into SVG icons. After the
   build, the same SVGs are written into the pages (their paths read from
   that script at build time, so they are the theme's own icons), the script
   tag is dropped and the script deleted. The icons stay decorative
   (``aria-hidden``): every button carries its own label.
3. Lighter figures. The stored PNGs are re-encoded after the build: a figure
   with at most 256 colours gets an exact palette; a richer one is
   quantised to 256 colours (no dithering), kept only where it is smaller.
   The notebooks and their stored outputs are untouched.
4. A changed stylesheet reaches the site. Sphinx re-reads a page when its
   source or the configuration changes; when none is out of date it stops
   before copying ``_static``. A file of SITE_INPUTS newer than the last
   build marks every page out of date, whatever builds the site.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# --- 1. punctuation keeps its word ----------------------------------------------

#: Closing punctuation that must not start a line.
CLOSING = re.compile(r"^[.,:;)\]!?%\u2019\u201d'\"]+")
#: An opening bracket or quote glued to the box that follows it.
OPENING = re.compile(r"[(\[\u2018\u201c'\"]+$")
#: The longest last word of inline code kept whole before its punctuation: 26
#: characters of the code font take about 220 px, within the narrowest column of a
#: 390 px phone (an API entry's, about 270 px).
#: A longer name may be wider than its line, so it must be able to break: then the
#: whole span is one inline block in which the name breaks where it must and the
#: punctuation follows its last piece (book-glue in book.css).
KEEP_WORD = 26
#: Inline elements a box may sit at the end of (a link around inline code).
WRAPPERS = (nodes.reference, nodes.emphasis, nodes.strong, nodes.inline)


class KeepPunctuationWithItsBox(SphinxPostTransform):
    """Wrap inline code or math and the punctuation touching it in a nowrap span."""

    default_priority = 900  # after the references are resolved

    def run(self, **kwargs) -> None:  # noqa: ARG002 - Sphinx's signature
        for box in list(
            self.document.findall(lambda n: isinstance(n, (nodes.literal, nodes.math)))
        ):
            self.wrap(box)

    @staticmethod
    def wrap(box: nodes.Node) -> None:
        # Climb out of a link or emphasis the box ends (or starts) alone.
        outer = box
        while (
            isinstance(outer.parent, WRAPPERS)
            and len(outer.parent.children) == 1
            and outer.parent.parent is not None
        ):
            outer = outer.parent
        parent = outer.parent
        if parent is None or isinstance(parent, nodes.FixedTextElement):
            return
        index = parent.index(outer)
        after = parent[index + 1] if index + 1 < len(parent) else None
        before = parent[index - 1] if index > 0 else None
        tail = CLOSING.match(after.astext()) if isinstance(after, nodes.Text) else None
        head = OPENING.search(before.astext()) if isinstance(before, nodes.Text) else None
        if not tail and not head:
            return
        span = nodes.inline(classes=["book-nowrap"])
        words = box.astext().split() if isinstance(box, nodes.literal) else []
        if words and (len(words[-1]) <= KEEP_WORD or re.search(r"[-/\u2010-\u2014]", words[-1])):
            span["classes"].append("book-keep-word")  # fits a phone's line: never breaks
        elif words and tail:
            span["classes"].append("book-glue")  # may not fit: breaks, its punctuation with it
        if head:
            text = before.astext()
            parent.replace(before, nodes.Text(text[: head.start()]))
            span += nodes.Text(head.group(0))
        parent.replace(outer, span)
        span += outer
        if tail:
            text = after.astext()
            span += nodes.Text(tail.group(0))
            parent.replace(after, nodes.Text(text[tail.end() :]))


# --- 2. icons without Font Awesome's script --------------------------------------

FONTAWESOME_TAG = re.compile(
    r'<script[^>]*src="[^"]*_static/scripts/fontawesome\.js[^"]*"[^>]*>\s*</script>\s*'
)
ICON_TAG = re.compile(r'<i\s+class="([^"]*\bfa-[^"]*)"([^>]*)>\s*</i>')
STYLE_PREFIXES = {"fa-solid", "fas", "fa-regular", "far", "fa-brands", "fab"}
SIZES = {"fa-xs", "fa-sm", "fa-lg", "fa-xl", "fa-2xl", "fa-fw"}


def solid_icons(script: str) -> dict[str, tuple[int, int, str]]:
    """Name -> (width, height, SVG path) of Font Awesome's solid set, read from its script."""
    start = script.find('("far"')
    end = script.find('("fas"', start)
    body = script[start:end] if start >= 0 and end > start else script
    icons = {}
    pattern = r'(?:"([a-z0-9-]+)"|\b([a-z0-9]+)):\[(\d+),(\d+),\[[^\]]*\],"[0-9a-f]+","([^"]+)"\]'
    for match in re.finditer(pattern, body):
        icons[match.group(1) or match.group(2)] = (
            int(match.group(3)),
            int(match.group(4)),
            match.group(5),
        )
    return icons


def svg_of(classes: str, attributes: str, icons: dict) -> str | None:
    names = classes.split()
    icon = next(
        (n[3:] for n in names if n.startswith("fa-") and n not in STYLE_PREFIXES | SIZES), None
    )
    if icon not in icons:
        return None
    width, height, path = icons[icon]
    kept = " ".join(n for n in names if n not in STYLE_PREFIXES)
    title = re.search(r'\stitle="([^"]*)"', attributes)
    inner = f"<title>{title.group(1)}</title>" if title else ""
    return (
        f'<svg class="svg-inline--fa {html.escape(kept)}"{attributes} aria-hidden="true" '
        f'focusable="false" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
        f'{inner}<path fill="currentColor" d="{path}"></path></svg>'
    )


def inline_icons(outdir: Path) -> None:
    script = outdir / "_static" / "scripts" / "fontawesome.js"
    if not script.is_file():
        return  # already done by an earlier (incremental) build
    icons = solid_icons(script.read_text(encoding="utf-8"))
    missing: set[str] = set()
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if "fontawesome.js" not in text and "fa-" not in text:
            continue

        def replace(match: re.Match) -> str:
            svg = svg_of(match.group(1), match.group(2), icons)
            if svg is None:
                missing.add(match.group(1))
                return match.group(0)
            return svg

        new = ICON_TAG.sub(replace, FONTAWESOME_TAG.sub("", text))
        if new != text:
            page.write_text(new, encoding="utf-8")
    if missing:
        raise RuntimeError(f"book_build: no SVG for the icons {sorted(missing)}")
    for leftover in script.parent.glob("fontawesome.js*"):
        leftover.unlink()


FONT_FACE = re.compile(
    r"url\((\.\./vendor/fontawesome/webfonts/fa-solid-900)\.woff2\) format\(\"woff2\"\)"
)


def subset_icon_font(outdir: Path) -> None:
    """Cut Font Awesome's solid webfont (156 KB) down to the glyphs the theme's CSS draws.

    With the icons inlined as SVG, the font is left only for the CSS-drawn
    icons (admonition titles, external links, breadcrumbs): the ``--pst-icon-*``
    characters of the theme's stylesheet and the ``content: "\\fxxx"`` rules of
    the other stylesheets. fontTools (a matplotlib dependency) writes the
    subset as WOFF (zlib; WOFF2 would need brotli), and the @font-face rule
    lists it first.
    """
    static = outdir / "_static"
    theme = static / "styles" / "pydata-sphinx-theme.css"
    ttf = static / "vendor" / "fontawesome" / "webfonts" / "fa-solid-900.ttf"
    if not theme.is_file() or not ttf.is_file():
        return
    css = theme.read_text(encoding="utf-8")
    if not FONT_FACE.search(css):
        return  # done by an earlier build
    try:
        from fontTools import subset
    except ImportError:  # pragma: no cover - matplotlib always brings fontTools
        return
    codepoints = {ord(c) for c in re.findall(r'--pst-[a-z-]+:"([\ue000-\uf8ff])"', css)}
    for sheet in [*static.glob("*.css"), *(static / "styles").glob("*.css")]:
        if sheet != theme:
            text = sheet.read_text(encoding="utf-8")
            codepoints |= {
                int(h, 16) for h in re.findall(r'content:\s*"\\([ef][0-9a-f]{3})"', text)
            }
    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    font = subset.load_font(str(ttf), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(codepoints))
    subsetter.subset(font)
    subset.save_font(font, str(ttf.with_name("fa-solid-900.subset.woff")), options)
    css = FONT_FACE.sub(r'url(\1.subset.woff) format("woff")', css)
    theme.write_text(css, encoding="utf-8")


# --- 3. lighter figures ----------------------------------------------------------


def lighten_pngs(outdir: Path) -> None:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - matplotlib always brings Pillow
        return
    for png in (outdir / "_images").glob("*.png"):
        with Image.open(png) as image:
            image.load()
            if image.mode == "P":  # a palette already (an earlier build)
                continue
            rgba = image.convert("RGBA")
            dpi = image.info.get("dpi")
        before = png.stat().st_size
        colours = rgba.getcolors(256)  # None: more than 256, quantised to 256
        count = 256 if colours is None else len(colours)
        palette = rgba.quantize(count, method=Image.Quantize.FASTOCTREE, dither=0)
        out = png.with_suffix(".tmp.png")
        options = {"optimize": True}
        if dpi:
            options["dpi"] = dpi
        palette.save(out, **options)
        if out.stat().st_size < before:
            out.replace(png)
        else:
            out.unlink()


def build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    inline_icons(outdir)
    subset_icon_font(outdir)
    lighten_pngs(outdir)


# --- 4. a changed stylesheet reaches the site -------------------------------------

#: What every page is made with besides its source: the stylesheets and scripts,
#: the templates, and this extension.
SITE_INPUTS = ("_static", "_templates", "_ext")


def pages_outdated_by_site_inputs(app, env, added, changed, removed) -> list[str]:  # noqa: ARG001 - Sphinx's signature
    """Every page, when a file of SITE_INPUTS is newer than the last build's environment."""
    last_build = Path(app.doctreedir) / "environment.pickle"
    if not last_build.is_file():  # a first build reads every page anyway
        return []
    built = last_build.stat().st_mtime
    for folder in SITE_INPUTS:
        for path in (Path(app.srcdir) / folder).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.stat().st_mtime > built:
                return sorted(env.found_docs)
    return []


def setup(app):
    app.add_post_transform(KeepPunctuationWithItsBox)
    app.connect("env-get-outdated", pages_outdated_by_site_inputs)
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
