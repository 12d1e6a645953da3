/* Interactive figures of "Attention, Step by Step".
 *
 * A chapter stores each interactive figure as one hidden notebook output, made
 * by selfattention.book.interactive.interactive_figure:
 *
 *   <div class="sa-interactive" hidden data-kind="softmax" data-figure="fig-...">
 *     <script type="application/json">{ the notebook's numbers }</script>
 *   </div>
 *
 * This script runs on every page (Jupyter Book loads every _static/*.js) and
 * does nothing where there is no such element. Where there is, it draws the
 * figure from the stored numbers inside the element, below the static figure it
 * belongs to, and un-hides it. Without JavaScript, in JupyterLab and in print,
 * the element stays hidden and the static figure is the whole story.
 *
 * Everything a reader can change is a native control (range, radio, checkbox,
 * button) with a label, so Tab, the arrow keys, Enter and Space work as they do
 * everywhere; each change is announced through a role="status" line. The
 * arithmetic is in window.SAInteractive, where the browser tests check it
 * against the numbers the notebooks computed with the Python package.
 */
(function () {
  "use strict";

  // --- the arithmetic, the same as the package's --------------------------------

  /** Softmax of `scores`; keys with keep[j] false get 0; nothing kept: all zeros.
   * As selfattention.softmax: the largest kept score is subtracted first. */
  function softmax(scores, keep) {
    const n = scores.length;
    const out = new Array(n).fill(0);
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      if ((!keep || keep[j]) && scores[j] > max) max = scores[j];
    }
    if (max === -Infinity) return out;
    let total = 0;
    for (let j = 0; j < n; j++) {
      if (!keep || keep[j]) {
        out[j] = Math.exp(scores[j] - max);
        total += out[j];
      }
    }
    for (let j = 0; j < n; j++) out[j] /= total;
    return out;
  }

  /** Row vector times matrix: (n,) @ (n, m) -> (m,). */
  function vecmat(vector, matrix) {
    const out = new Array(matrix[0].length).fill(0);
    for (let j = 0; j < vector.length; j++) {
      for (let l = 0; l < out.length; l++) out[l] += vector[j] * matrix[j][l];
    }
    return out;
  }

  /** As selfattention.causal_mask(tq, tk, align, window): query i sees key j
   * iff 0 <= p - j (< window), p = i, or i + tk - tq for "bottom-right". */
  function causalMask(tq, tk, align, window) {
    const offset = align === "bottom-right" ? tk - tq : 0;
    const rows = [];
    for (let i = 0; i < tq; i++) {
      const row = [];
      for (let j = 0; j < tk; j++) {
        const gap = i + offset - j;
        row.push(gap >= 0 && (window == null || gap < window));
      }
      rows.push(row);
    }
    return rows;
  }

  /** A key padding mask broadcast over tq queries: key j is real iff j < length. */
  function paddingMask(tq, tk, length) {
    return Array.from({ length: tq }, () => Array.from({ length: tk }, (_, j) => j < length));
  }

  const SA = { softmax, vecmat, causalMask, paddingMask, renderers: {} };
  window.SAInteractive = SA;

  // --- small DOM helpers --------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  let counter = 0;

  /** An element: h("p", {class: "x", text: "hi"}, child, ...). */
  function h(tag, props, ...children) {
    const node = tag.startsWith("svg:")
      ? document.createElementNS(SVG, tag.slice(4))
      : document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function fixed(x, digits) {
    return (Math.abs(x) < 0.5 * 10 ** -digits ? 0 : x).toFixed(digits);
  }

  /** A temperature as the reader sees it: three significant digits. */
  function tauText(tau) {
    return String(Number(tau.toPrecision(3)));
  }

  function argmax(values) {
    let best = 0;
    values.forEach((v, j) => {
      if (v > values[best]) best = j;
    });
    return best;
  }

  /** Text with inline math in $...$, as DOM nodes: in the math, each letter is a
   * <var> (italic, as the book's math), "_x" or "_{xy}" a subscript and a space
   * a thin space; outside it, plain text. So labels read "T<sub>q</sub>", not "T_q".
   * tex("soft answer $aV$") -> ["soft answer ", <var>a</var>, <var>V</var>] */
  function tex(text) {
    const nodes = [];
    String(text).split(/(\$[^$]+\$)/).forEach((part, index) => {
      if (index % 2 === 0) {
        if (part) nodes.push(part);
        return;
      }
      const math = part.slice(1, -1);
      const piece = (source) => {
        const out = [];
        for (const char of source) {
          if (/[A-Za-z]/.test(char)) out.push(h("var", { text: char }));
          else out.push(char === " " ? "\u2009" : char);
        }
        return out;
      };
      const pattern = /_(\{[^}]*\}|.)/g;
      let last = 0;
      for (const match of math.matchAll(pattern)) {
        nodes.push(...piece(math.slice(last, match.index)));
        const sub = match[1].startsWith("{") ? match[1].slice(1, -1) : match[1];
        nodes.push(h("sub", {}, piece(sub)));
        last = match.index + match[0].length;
      }
      nodes.push(...piece(math.slice(last)));
    });
    return nodes;
  }

  /** The same text as a screen reader should hear it: "$T_q$" -> "T q". */
  function plain(text) {
    return String(text).replace(/\$([^$]+)\$/g, (_, math) =>
      math.replace(/_\{([^}]*)\}|_(.)/g, (__, a, b) => ` ${a || b}`));
  }

  /** A labelled range input over the indices 0..count-1, with a visible readout. */
  function slider(ctx, label, count, start, describe) {
    const id = ctx.id("range");
    const input = h("input", {
      type: "range", id, min: 0, max: count - 1, step: 1, value: start, class: "sa-range",
    });
    const readout = h("output", { for: id, class: "sa-readout" });
    const wrap = h("div", { class: "sa-control" }, h("label", { for: id }, tex(label)), input, readout);
    const sync = () => {
      const text = describe(Number(input.value));
      input.setAttribute("aria-valuetext", plain(text));
      readout.replaceChildren(...tex(text));
    };
    input.addEventListener("input", sync);
    sync();
    return { wrap, input, sync, get value() { return Number(input.value); } };
  }

  /** A table in a box that scrolls if it must, named by a line of text above it
   * (a <caption> would be squeezed to the table's width). */
  function titled(ctx, text, table) {
    const id = ctx.id("caption");
    const caption = h("p", { class: "sa-caption", id }, tex(text));
    table.setAttribute("aria-labelledby", id);
    return { caption, wrap: h("div", {}, caption, h("div", { class: "sa-scroll" }, table)) };
  }

  /** A group of radio buttons in a fieldset with a legend. */
  function radios(ctx, legend, options, start) {
    const name = ctx.id("choice");
    const inputs = options.map(([value, text]) => {
      const id = ctx.id("option");
      const input = h("input", { type: "radio", name, id, value, checked: value === start });
      return { input, label: h("label", { class: "sa-option", for: id }, input, " " + text) };
    });
    const wrap = h("fieldset", { class: "sa-choice" }, h("legend", {}, tex(legend)),
      inputs.map((o) => o.label));
    return {
      wrap,
      inputs: inputs.map((o) => o.input),
      get value() { return inputs.find((o) => o.input.checked).input.value; },
    };
  }

  // --- softmax: a temperature slider, optional key toggles, weights as bars ---------
  //
  // data: query, keys[T], scores[T] (the scores before the temperature), taus[]
  // (the slider's temperatures), start (index into taus), maskable (key
  // toggles), optional values[T][d_v] and value_axes[d_v] (the soft answer a V),
  // title, help.
  SA.renderers.softmax = function (root, data, ctx) {
    const T = data.keys.length;
    const keep = new Array(T).fill(true);
    const tau = slider(ctx, "Temperature τ", data.taus.length, data.start,
      (index) => `τ = ${tauText(data.taus[index])}`);
    root.append(tau.wrap);

    let toggles = null;
    if (data.maskable) {
      toggles = data.keys.map((key, j) => {
        const id = ctx.id("key");
        const input = h("input", { type: "checkbox", id, checked: true, "data-key": j });
        input.addEventListener("change", () => {
          keep[j] = input.checked;
          update();
        });
        return h("label", { class: "sa-option", for: id }, input, " " + key);
      });
      root.append(h("fieldset", { class: "sa-choice" },
        h("legend", { text: "Keys the query may attend to (unticked = masked)" }), toggles));
    }

    const rows = data.keys.map((key) => {
      const number = h("td", { class: "sa-num" });
      const bar = h("span", { class: "sa-bar" });
      const uniform = h("span", { class: "sa-uniform" });
      const row = h("tr", {},
        h("th", { scope: "row", class: "sa-label", text: key }),
        number,
        h("td", { class: "sa-bar-cell", "aria-hidden": "true" },
          h("span", { class: "sa-track" }, bar, uniform)));
      return { row, number, bar, uniform };
    });
    const table = h("table", { class: "sa-table sa-bars" },
      h("thead", {}, h("tr", {},
        h("th", { scope: "col", text: "key" }),
        h("th", { scope: "col", class: "sa-num", text: "weight" }),
        h("th", { scope: "col", class: "sa-bar-cell" }, tex("bar (dashes: 1/$T$)")))),
      h("tbody", {}, rows.map((r) => r.row)));
    root.append(titled(ctx, `Weights of the query “${data.query}” over the ${T} keys`, table).wrap);

    let blendCells = null;
    if (data.values) {
      const axes = data.value_axes;
      const average = data.values[0].map((_, l) => data.values.reduce((s, v) => s + v[l], 0) / T);
      const hard = data.values[argmax(data.scores)];
      blendCells = axes.map(() => h("td", { class: "sa-num" }));
      const fixedRow = (name, numbers) => h("tr", {}, h("th", { scope: "row", text: name }),
        numbers.map((x) => h("td", { class: "sa-num", text: fixed(x, 2) })));
      const blend = h("table", { class: "sa-table sa-blend" },
        h("thead", {}, h("tr", {}, h("td", {}),
          axes.map((a) => h("th", { scope: "col", class: "sa-num", text: a })))),
        h("tbody", {},
          h("tr", { class: "sa-current" }, h("th", { scope: "row" }, tex("soft answer $a V$")), blendCells),
          fixedRow("hard lookup (τ → 0)", hard),
          fixedRow("plain average (τ → ∞)", average)));
      root.append(titled(ctx, "The soft answer $a V$, between the hard lookup and the plain average",
        blend).wrap);
    }

    const status = ctx.status();

    function update() {
      const t = data.taus[tau.value];
      const scaled = data.scores.map((s) => s / t);
      const weights = softmax(scaled, keep);
      const allowed = keep.filter(Boolean).length;
      rows.forEach((r, j) => {
        r.number.dataset.value = String(weights[j]);
        r.number.textContent = keep[j] ? fixed(weights[j], 3) : "0 (masked)";
        r.row.classList.toggle("sa-masked", !keep[j]);
        r.bar.style.width = `${100 * weights[j]}%`;
        r.uniform.style.left = `${allowed ? 100 / allowed : 0}%`;
        r.uniform.hidden = !keep[j];
      });
      let message = `τ = ${tauText(t)}`;
      if (data.maskable) message += `, ${allowed} of ${T} keys allowed`;
      if (!allowed) {
        message += ": no key is allowed, so every weight is 0 (zeros, not NaN).";
      } else {
        const best = argmax(weights);
        message += `: “${data.keys[best]}” gets the most weight, ${fixed(weights[best], 3)}.`;
      }
      if (blendCells) {
        const blend = vecmat(weights, data.values);
        blendCells.forEach((cell, l) => {
          cell.dataset.value = String(blend[l]);
          cell.textContent = fixed(blend[l], 2);
        });
        message += " Soft answer: " +
          blend.map((x, l) => `${fixed(x, 2)} ${data.value_axes[l]}`).join(", ") + ".";
      }
      status.textContent = message;
      root.dataset.state = JSON.stringify({ tau: t, keep });
    }

    tau.input.addEventListener("input", update);
    update();
  };

  // --- heads: pick a head, point at a query, see its weights over the keys ----------
  //
  // data: tokens[T], heads[h][T][T] (weights, rows = queries), head_names[h],
  // optional views [{name, heads: [r, ...]}] (what the head picker offers; by
  // default each head alone; a view of several heads draws them all, one colour
  // and dash pattern each, as bertviz does), start_view (or start_head),
  // start_query, title, help.
  //
  // Each head's lines are drawn on its own scale, from its smallest weight
  // (thinnest, faintest) to its largest: untrained heads, whose weights lie
  // close together, still show their differences; the numbers give the values.
  // A position column sits beside the tokens, and the places where the shown
  // query's token occurs are marked with a diamond on both sides.
  SA.renderers.heads = function (root, data, ctx) {
    const T = data.tokens.length;
    const views = data.views || data.head_names.map((name, r) => ({ name, heads: [r] }));
    const most = Math.max(...views.map((v) => v.heads.length));
    let view = data.start_view !== undefined ? data.start_view : data.start_head || 0;
    let selected = data.start_query || 0;
    let shown = selected;
    const ranges = data.heads.map((map) => {
      const flat = map.flat();
      return [Math.min(...flat), Math.max(...flat)];
    });

    // The picker, the legend and the status line in a panel beside the grid (below
    // each other on a phone), so that the picker and every row are on screen together.
    const panel = h("div", { class: "sa-panel" });
    if (views.length > 1) {
      const choice = radios(ctx, most > 1 ? "Heads" : "Head",
        views.map((v, index) => [String(index), v.name]), String(view));
      choice.inputs.forEach((input) => input.addEventListener("change", () => {
        view = Number(choice.value);
        draw();
      }));
      panel.append(choice.wrap);
    }

    const mark = () => h("span", { class: "sa-mark", "aria-hidden": "true", text: "◆" });
    const queries = data.tokens.map((token, i) => {
      const marker = mark();
      const button = h("button", {
        type: "button", class: "sa-token", "aria-pressed": "false", tabindex: i === selected ? 0 : -1,
        "aria-label": `query at position ${i}: ${token}`,
      }, marker, h("span", { text: token }));
      button.addEventListener("click", () => select(i));
      button.addEventListener("focus", () => select(i));
      button.addEventListener("mouseenter", () => preview(i));
      button.addEventListener("mouseleave", () => preview(selected));
      button.addEventListener("keydown", (event) => {
        const step = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 }[event.key];
        const jump = { Home: 0, End: T - 1 }[event.key];
        if (step === undefined && jump === undefined) return;
        event.preventDefault();
        const next = jump !== undefined ? jump : Math.min(T - 1, Math.max(0, i + step));
        queries[next].button.focus();
      });
      return { button, marker };
    });
    // One number and one bar per key for each head of the view (at most `most`).
    const keys = data.tokens.map((token, j) => {
      const numbers = [];
      const bars = [];
      for (let n = 0; n < most; n++) {
        numbers.push(h("span", { class: `sa-num sa-head-${n}` }));
        bars.push(h("span", { class: `sa-bar sa-head-${n}` }));
      }
      const marker = mark();
      const item = h("li", { class: "sa-key" },
        h("span", { class: "sa-pos", text: String(j) }),
        h("span", { class: "sa-key-token" }, marker, token),
        numbers, h("span", { class: "sa-track", "aria-hidden": "true" }, bars));
      return { item, numbers, bars, marker };
    });
    const svg = h("svg:svg", {
      class: "sa-lines", viewBox: `0 0 100 ${T}`, preserveAspectRatio: "none",
      "aria-hidden": "true", focusable: "false",
    });
    const lines = Array.from({ length: most }, (_, n) => data.tokens.map(() => {
      const line = h("svg:line", { x1: 2, x2: 98, "vector-effect": "non-scaling-stroke",
        class: `sa-head-${n}` });
      svg.append(line);
      return line;
    }));
    const queryHead = ctx.id("queries");
    const keyHead = ctx.id("keys");
    const legend = h("p", { class: "sa-help sa-legend" });
    const positions = h("div", { class: "sa-positions", "aria-hidden": "true" },
      data.tokens.map((_, i) => h("span", { class: "sa-pos", text: String(i) })));
    const grid = h("div", {
      class: `sa-heads${T > 12 ? " sa-long" : ""}`, style: `--sa-rows: ${T}; --sa-slots: ${most}`,
    },
      h("p", { class: "sa-col-head sa-pos", "aria-hidden": "true", text: "pos" }),
      h("p", { class: "sa-col-head", id: queryHead, text: "query" }),
      h("span", { class: "sa-col-head" }),
      h("p", { class: "sa-col-head", id: keyHead, text: most > 1 ? "keys: weights" : "keys: weight" }),
      positions,
      h("div", { class: "sa-queries", role: "group", "aria-labelledby": queryHead },
        queries.map((q) => q.button)),
      svg,
      h("ul", { class: "sa-keys", "aria-labelledby": keyHead }, keys.map((k) => k.item)));
    panel.append(legend);
    root.append(h("div", { class: "sa-heads-layout" }, panel, grid));
    const status = ctx.status();
    panel.append(status); // the status line reads next to the picker

    function select(i) {
      selected = i;
      queries.forEach((q, index) => {
        q.button.setAttribute("aria-pressed", String(index === i));
        q.button.tabIndex = index === i ? 0 : -1;
      });
      preview(i);
    }

    function preview(i) {
      shown = i;
      draw();
    }

    /** A small sample of head r's colour and of the n-th dash pattern, for the legend. */
    function swatch(r, n) {
      const sample = h("svg:svg", { class: "sa-swatch", viewBox: "0 0 24 8", "aria-hidden": "true",
        focusable: "false" });
      sample.append(h("svg:line", { x1: 1, x2: 23, y1: 4, y2: 4, class: `sa-head-${n}`,
        "data-head": String(r % 6) }));
      return sample;
    }

    function draw() {
      const heads = views[view].heads;
      const token = data.tokens[shown];
      const same = data.tokens.map((t) => t === token);
      const repeats = same.filter(Boolean).length > 1;
      queries.forEach((q, index) => {
        q.button.classList.toggle("sa-shown", index === shown);
        q.marker.hidden = !(repeats && same[index]);
      });
      keys.forEach((k, j) => {
        k.marker.hidden = !(repeats && same[j]);
        k.item.classList.toggle("sa-same", repeats && same[j]);
      });
      const scale = (r) => `${fixed(ranges[r][0], 2)} (thinnest) to ${fixed(ranges[r][1], 2)} (thickest)`;
      if (heads.length === 1) {
        legend.replaceChildren(swatch(heads[0], 0),
          ` Line width: ${data.head_names[heads[0]]}'s own scale, ${scale(heads[0])}.`);
      } else {
        legend.replaceChildren("Numbers in the order ",
          ...heads.flatMap((r, n) => [n ? ", " : "", swatch(r, n), ` ${data.head_names[r]}`]),
          "; lines on each head's own scale.");
      }
      grid.style.setProperty("--sa-slots", String(heads.length));
      grid.classList.toggle("sa-multi", heads.length > 1);
      grid.classList.toggle("sa-many", heads.length > 2);
      const said = [];
      for (let n = 0; n < most; n++) {
        const r = n < heads.length ? heads[n] : null;
        const weights = r !== null ? data.heads[r][shown] : null;
        const [lo, hi] = r !== null ? ranges[r] : [0, 1];
        keys.forEach((k, j) => {
          k.numbers[n].hidden = k.bars[n].hidden = !weights;
          lines[n][j].style.display = weights ? "" : "none";
          if (!weights) {
            delete k.numbers[n].dataset.value;
            return;
          }
          k.numbers[n].dataset.value = String(weights[j]);
          k.numbers[n].textContent = fixed(weights[j], 2);
          k.bars[n].style.width = `${100 * weights[j]}%`;
          k.bars[n].dataset.head = lines[n][j].dataset.head = String(r % 6);
          const line = lines[n][j];
          line.setAttribute("y1", shown + 0.5);
          line.setAttribute("y2", j + 0.5);
          // Width and opacity on the head's own scale, from its smallest weight to its largest.
          const share = hi > lo ? (weights[j] - lo) / (hi - lo) : 1;
          line.setAttribute("stroke-width", (0.5 + 5.5 * share).toFixed(2));
          line.setAttribute("stroke-opacity", (0.08 + 0.92 * share).toFixed(3));
        });
        if (weights) {
          const best = argmax(weights);
          said.push(`${data.head_names[r]} looks most at key ${best} “${data.tokens[best]}”, ` +
            fixed(weights[best], 2));
        }
      }
      const others = same.map((s, j) => (s && j !== shown ? j : null)).filter((j) => j !== null);
      const also = others.length ? ` (also at ${others.join(", ")})` : "";
      const message = `Query ${shown} “${token}”${also}: ${said.join("; ")}.`;
      status.textContent = message;
      root.dataset.state = JSON.stringify({ view, heads, query: shown });
    }

    select(selected);
  };

  // --- masks: causal, padding, sliding window or cross-attention --------------------
  //
  // data: t_k, question[t_k] and reply[] (the tokens of cross-attention: keys
  // and queries), start {kind, t_q, align, window, length}, title, help.
  SA.renderers.masks = function (root, data, ctx) {
    const tk = data.t_k;
    const start = data.start;
    const kinds = [["causal", "causal"], ["padding", "padding"],
      ["window", "sliding window"], ["cross", "cross-attention"]];
    const kind = radios(ctx, "Mask", kinds, start.kind);
    const tq = slider(ctx, "Queries $T_q$", tk, start.t_q - 1, (index) => `$T_q$ = ${index + 1}`);
    const align = radios(ctx, "Where the diagonal sits when $T_q < T_k$",
      [["top-left", "top-left"], ["bottom-right", "bottom-right"]], start.align);
    const win = slider(ctx, "Window $W$", tk, start.window - 1, (index) => `$W$ = ${index + 1}`);
    const length = slider(ctx, "Real tokens (the rest is padding)", tk, start.length - 1,
      (index) => `${index + 1} real, ${tk - index - 1} padding`);
    root.append(kind.wrap, tq.wrap, align.wrap, win.wrap, length.wrap);
    const table = h("table", { class: "sa-table sa-mask" });
    const named = titled(ctx, "", table);
    root.append(named.wrap);
    const status = ctx.status();

    /** The current settings: which mask, its shape, its labels and its rows. */
    function current() {
      const k = kind.value;
      if (k === "cross") {
        return { kind: k, rows: paddingMask(data.reply.length, tk, tk), queries: data.reply,
          keys: data.question };
      }
      if (k === "padding") {
        const n = length.value + 1;
        const keys = Array.from({ length: tk }, (_, j) => (j < n ? `${j}` : "pad"));
        return { kind: k, length: n, rows: paddingMask(tk, tk, n), keys,
          queries: keys.map((_, i) => (i < n ? `query ${i}` : `query ${i} (pad)`)) };
      }
      const q = tq.value + 1;
      const a = align.value;
      const w = k === "window" ? win.value + 1 : null;
      const offset = a === "bottom-right" ? tk - q : 0;
      return { kind: k, t_q: q, align: a, window: w, rows: causalMask(q, tk, a, w),
        keys: Array.from({ length: tk }, (_, j) => `${j}`),
        queries: Array.from({ length: q }, (_, i) =>
          offset ? `query ${i} (at ${i + offset})` : `query ${i}`) };
    }

    function update() {
      const c = current();
      tq.wrap.hidden = align.wrap.hidden = c.kind === "padding" || c.kind === "cross";
      win.wrap.hidden = c.kind !== "window";
      length.wrap.hidden = c.kind !== "padding";
      const allowed = c.rows.flat().filter(Boolean).length;
      const total = c.rows.length * tk;
      let name = { causal: "Causal mask", padding: "Padding mask", window: "Sliding-window mask",
        cross: "Cross-attention mask" }[c.kind];
      if (c.window) name += `, $W$ = ${c.window}`;
      if (c.t_q) name += `, ${c.align}`;
      named.caption.replaceChildren(...tex(`${name}: ${c.rows.length} queries (rows) by ${tk} keys; ` +
        "1 = may attend, 0 = blocked"));
      table.replaceChildren(
        h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "key →" }),
          c.keys.map((key) => h("th", { scope: "col", class: "sa-num", text: key })))),
        h("tbody", {}, c.rows.map((row, i) => h("tr", {},
          h("th", { scope: "row", text: c.queries[i] }),
          row.map((on) => h("td", { class: on ? "sa-num sa-on" : "sa-num sa-off", text: on ? "1" : "0" }))))));
      let message = `${name}: ${allowed} of ${total} query-key pairs may attend.`;
      if (c.kind === "causal" || c.kind === "window") {
        const last = c.rows[0].lastIndexOf(true);
        message += ` Query 0 sees keys ${c.rows[0].indexOf(true)} to ${last}.`;
        if (c.t_q === tk) message += " With $T_q = T_k$ both alignments give the same mask.";
      } else if (c.kind === "padding") {
        message += ` Every query, padding or not, sees keys 0 to ${c.length - 1} only.`;
      } else {
        message += " The reply's queries may read every key of the question.";
      }
      status.replaceChildren(...tex(message));
      root.dataset.state = JSON.stringify({ kind: c.kind, t_q: c.t_q || c.rows.length,
        align: c.align || null, window: c.window || null, length: c.length || null });
      table.dataset.mask = JSON.stringify(c.rows.map((row) => row.map(Number)));
    }

    [...kind.inputs, ...align.inputs].forEach((input) => input.addEventListener("change", update));
    [tq, win, length].forEach((s) => s.input.addEventListener("input", update));
    update();
  };

  // --- classifier: chapter 11's trained model, run in the browser ------------------
  //
  // data: selfattention.book.interactive.classifier_data (vocabulary, classes,
  // d_model, num_heads, positional, max_len, weights, checks), plus start (the
  // line shown first), title, help.

  /** nn.Linear: x (T, in) -> x W^T + b, with W stored (out, in). */
  function linear(x, weight, bias) {
    return x.map((row) => weight.map((w, o) => {
      let sum = bias[o];
      for (let l = 0; l < row.length; l++) sum += row[l] * w[l];
      return sum;
    }));
  }

  /** The words of `text` as the package's Vocabulary.tokenize finds them. */
  function tokenize(text) {
    return text.toLowerCase().match(/[a-z]+/g) || [];
  }

  /** AttentionClassifier.forward on one line (no padding), from exported weights.
   * Returns the class probabilities and the pooled attention a_j (the mean over
   * heads and queries of A_ij), or {error} for a line the model cannot read. */
  function classify(model, words) {
    if (!words.length) return { error: "Type at least one word." };
    const ids = [];
    for (const word of words) {
      const id = model.vocabulary.indexOf(word);
      if (id < 1) return { error: `“${word}” is not a word the model knows (see the list below).` };
      ids.push(id);
    }
    if (ids.length > model.max_len) {
      return { error: `The model reads at most ${model.max_len} words; this line has ${ids.length}.` };
    }
    const w = model.weights;
    const T = ids.length;
    const d = model.d_model;
    const h = model.num_heads;
    const dk = d / h;
    // X = E[ids] + PE[:T]   (T, d_model)
    const X = ids.map((id, t) => w.embedding[id].map((e, l) => (model.positional ? e + w.positions[t][l] : e)));
    const Q = linear(X, w.q_weight, w.q_bias); // (T, d_model): head r holds features r dk .. (r+1) dk - 1
    const K = linear(X, w.k_weight, w.k_bias);
    const V = linear(X, w.v_weight, w.v_bias);
    const context = X.map(() => new Array(d).fill(0)); // (T, h d_k), the heads side by side
    const pooled = new Array(T).fill(0); // a_j
    for (let r = 0; r < h; r++) {
      const lo = r * dk;
      for (let i = 0; i < T; i++) {
        const scores = [];
        for (let j = 0; j < T; j++) {
          let s = 0;
          for (let l = lo; l < lo + dk; l++) s += Q[i][l] * K[j][l];
          scores.push(s / Math.sqrt(dk));
        }
        const a = softmax(scores); // a line has no padding: nothing to mask
        for (let j = 0; j < T; j++) {
          pooled[j] += a[j] / (h * T);
          for (let l = lo; l < lo + dk; l++) context[i][l] += a[j] * V[j][l];
        }
      }
    }
    const Y = linear(context, w.o_weight, w.o_bias); // (T, d_model)
    const mean = new Array(d).fill(0); // masked mean pooling over the real tokens
    Y.forEach((row) => row.forEach((y, l) => { mean[l] += y / T; }));
    const logits = linear([mean], w.classifier_weight, w.classifier_bias)[0];
    return { ids, probabilities: softmax(logits), attention: pooled };
  }

  SA.classify = classify;
  SA.tokenize = tokenize;

  SA.renderers.classifier = function (root, data, ctx) {
    const textId = ctx.id("line");
    const pickId = ctx.id("pick");
    const errorId = ctx.id("error");
    const input = h("input", {
      type: "text", id: textId, class: "sa-text", value: data.start, autocomplete: "off",
      spellcheck: "false", autocapitalize: "none",
    });
    const pick = h("select", { id: pickId, class: "sa-select" },
      h("option", { value: "", text: "(your own line)" }),
      data.checks.map((check, index) => h("option", {
        value: String(index),
        text: check.words.join(" ") + (check.label === null ? "" : ` (${data.classes[check.label]})`),
      })));
    root.append(
      h("div", { class: "sa-control" }, h("label", { for: textId, text: "Type a line" }), input),
      h("div", { class: "sa-control" }, h("label", { for: pickId, text: "or pick one" }), pick));
    const error = h("p", { class: "sa-error", id: errorId, hidden: true });
    root.append(error);

    const probabilityRows = data.classes.map((name) => {
      const number = h("td", { class: "sa-num" });
      const bar = h("span", { class: "sa-bar" });
      const row = h("tr", {}, h("th", { scope: "row", class: "sa-label", text: name }), number,
        h("td", { class: "sa-bar-cell", "aria-hidden": "true" }, h("span", { class: "sa-track" }, bar)));
      return { row, number, bar };
    });
    const probabilities = h("table", { class: "sa-table sa-bars sa-probabilities" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "series" }),
        h("th", { scope: "col", class: "sa-num", text: "probability" }),
        h("th", { scope: "col", class: "sa-bar-cell", text: "bar" }))),
      h("tbody", {}, probabilityRows.map((r) => r.row)));
    root.append(titled(ctx, "What the model predicts", probabilities).wrap);
    const attentionBody = h("tbody", {});
    const attention = h("table", { class: "sa-table sa-bars sa-attention" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "word" }),
        h("th", { scope: "col", class: "sa-num" }, tex("$a_j$")),
        h("th", { scope: "col", class: "sa-bar-cell", text: "bar" }))),
      attentionBody);
    root.append(titled(ctx, "Where it looks: each word's share $a_j$ of the pooled vector", attention).wrap);
    const words = [...data.vocabulary.slice(1)].sort().join(", ");
    root.append(h("details", { class: "sa-words" },
      h("summary", { text: `The ${data.vocabulary.length - 1} words the model knows` }),
      h("p", { text: words })));
    const status = ctx.status();

    function update() {
      const line = tokenize(input.value);
      const result = classify(data, line);
      const failed = Boolean(result.error);
      input.setAttribute("aria-invalid", String(failed));
      if (failed) input.setAttribute("aria-describedby", errorId);
      else input.removeAttribute("aria-describedby");
      error.hidden = !failed;
      error.textContent = failed ? result.error : "";
      probabilities.classList.toggle("sa-stale", failed);
      if (failed) {
        status.textContent = result.error;
        attentionBody.replaceChildren();
        probabilityRows.forEach((r) => {
          r.number.textContent = "–";
          delete r.number.dataset.value;
          r.bar.style.width = "0%";
        });
        root.dataset.state = JSON.stringify({ words: line, error: result.error });
        return;
      }
      probabilityRows.forEach((r, c) => {
        r.number.dataset.value = String(result.probabilities[c]);
        r.number.textContent = fixed(result.probabilities[c], 3);
        r.bar.style.width = `${100 * result.probabilities[c]}%`;
      });
      attentionBody.replaceChildren(...line.map((word, j) => {
        const number = h("td", { class: "sa-num", "data-value": String(result.attention[j]),
          text: fixed(result.attention[j], 3) });
        const bar = h("span", { class: "sa-bar" });
        bar.style.width = `${100 * result.attention[j] / Math.max(...result.attention)}%`;
        return h("tr", {}, h("th", { scope: "row", class: "sa-label", text: word }), number,
          h("td", { class: "sa-bar-cell", "aria-hidden": "true" }, h("span", { class: "sa-track" }, bar)));
      }));
      const best = argmax(result.probabilities);
      const top = argmax(result.attention);
      status.textContent = `Predicted: ${data.classes[best]}, probability ` +
        `${fixed(result.probabilities[best], 3)}. The most attention, ${fixed(result.attention[top], 3)}, ` +
        `goes to “${line[top]}”.`;
      root.dataset.state = JSON.stringify({ words: line, predicted: best });
    }

    input.addEventListener("input", () => {
      const index = data.checks.findIndex((c) => c.words.join(" ") === tokenize(input.value).join(" "));
      pick.value = index < 0 ? "" : String(index);
      update();
    });
    pick.addEventListener("change", () => {
      if (pick.value !== "") input.value = data.checks[Number(pick.value)].words.join(" ");
      update();
    });
    const first = data.checks.findIndex((c) => c.words.join(" ") === tokenize(data.start).join(" "));
    pick.value = first < 0 ? "" : String(first);
    update();
  };

  // --- mounting -------------------------------------------------------------------

  /** Draw one stored figure: read its JSON, build its widget, show it. */
  function mount(host) {
    if (host.dataset.mounted) return;
    const render = SA.renderers[host.dataset.kind];
    const source = host.querySelector('script[type="application/json"]');
    if (!render || !source) return;
    const data = JSON.parse(source.textContent);
    const n = ++counter;
    const ctx = {
      id: (name) => `sa-${n}-${name}-${++counter}`,
      status() {
        const line = h("p", { class: "sa-status", role: "status" });
        root.append(line);
        return line;
      },
    };
    const figure = document.getElementById(host.dataset.figure);
    const number = figure && figure.querySelector(".caption-number");
    const of = number ? number.textContent.trim().replace(/\s+/g, " ") : "the figure above";
    const titleId = `sa-${n}-title`;
    const root = h("div", { class: "sa-widget", role: "group", "aria-labelledby": titleId },
      h("p", { class: "sa-title", id: titleId }, h("span", { class: "sa-badge", text: "Interactive" }),
        " ", tex(data.title), ` (${of}, live)`),
      data.help ? h("p", { class: "sa-help" }, tex([].concat(data.help).join(" "))) : null);
    render(root, data, ctx);
    host.append(root);
    host.dataset.mounted = "true";
    host.hidden = false;
  }

  function mountAll() {
    document.querySelectorAll(".sa-interactive").forEach((host) => {
      try {
        mount(host);
      } catch (error) {
        // A figure that cannot be drawn stays hidden; the static one remains.
        host.hidden = true;
        console.error("interactive figure:", error);
      }
    });
    watchScreen();
  }

  /** Mark the page while any figure is on screen, so that interactive.css can keep
   * the theme's fixed "Back to top" button from covering a status line. */
  function watchScreen() {
    if (!("IntersectionObserver" in window)) return;
    const onScreen = new Set();
    const observer = new IntersectionObserver((entries) => {
      entries.forEach((entry) => {
        if (entry.isIntersecting) onScreen.add(entry.target);
        else onScreen.delete(entry.target);
      });
      document.documentElement.classList.toggle("sa-figure-on-screen", onScreen.size > 0);
    });
    document.querySelectorAll(".sa-widget").forEach((widget) => observer.observe(widget));
  }

  SA.mountAll = mountAll;
  SA.tex = tex;
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mountAll);
  } else {
    mountAll();
  }
})();
