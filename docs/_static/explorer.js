// The explorer (explorer.html): draws the states attention_np computed at build time
// (window.EXPLORER_DATA, from attention_np/viz/explorer.py). Nothing here computes attention: every
// number shown is read from the data, weights as ten-thousandths (shown with four decimals).
(function () {
  "use strict";
  const DATA = window.EXPLORER_DATA;
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }
  // ten-thousandths -> "0.1234", by integer arithmetic (no rounding in the browser)
  function fmt4(n) {
    const s = String(Math.abs(n)).padStart(5, "0");
    return (n < 0 ? "-" : "") + s.slice(0, -4) + "." + s.slice(-4);
  }
  // a weight in [0, 1] as a colour: white to dark blue (the text turns white on dark cells)
  function shade(w) {
    const t = Math.max(0, Math.min(1, w));
    const mix = (a, b) => Math.round(a + (b - a) * t);
    return `rgb(${mix(247, 8)}, ${mix(251, 48)}, ${mix(255, 107)})`;
  }
  function ink(w) { return w > 0.5 ? "#fff" : "#111"; }
  function $(id) { return document.getElementById(id); }

  // ---- Eq. (1) live ---------------------------------------------------------------------------
  function eq1() {
    const root = $("eq1-view");
    if (!root) return;
    const E = DATA.eq1;
    const dk = $("eq1-dk"), dkOut = $("eq1-dk-value"), scaled = $("eq1-scaled"), axis = $("eq1-axis");
    dk.max = String(E.d_ks.length - 1);
    function draw() {
      const d = E.d_ks[Number(dk.value)];
      dkOut.textContent = String(d);
      const st = E.states[`${d}-${scaled.checked ? "scaled" : "unscaled"}`];
      root.dataset.state = `${d}-${scaled.checked ? "scaled" : "unscaled"}`;
      // histogram
      const fit = axis.value === "fit";
      const counts = fit ? st.fit.counts : st.hist;
      const limit = fit ? Number(st.fit.limit) : E.hist_limit;
      const W = 360, H = 150, top = Math.max(...counts);
      const hist = $("eq1-hist");
      hist.replaceChildren();
      hist.setAttribute("viewBox", `0 0 ${W} ${H + 34}`);
      const bw = W / counts.length;
      counts.forEach((c, i) => {
        const h = top ? (c / top) * H : 0;
        hist.append(svg("rect", {x: (i * bw).toFixed(2), y: (H - h).toFixed(2), width: Math.max(bw - 0.6, 0.4).toFixed(2),
                                  height: h.toFixed(2), class: "ex-bar"}));
      });
      hist.append(svg("line", {x1: 0, y1: H, x2: W, y2: H, class: "ex-axis"}));
      for (const [x, label, anchor] of [[0, `−${fit ? st.fit.limit : limit}`, "start"], [W / 2, "0", "middle"],
                                        [W, fit ? st.fit.limit : String(limit), "end"]]) {
        const t = svg("text", {x, y: H + 16, "text-anchor": anchor, class: "ex-tick"});
        t.textContent = label;
        hist.append(t);
      }
      const cap = svg("text", {x: W / 2, y: H + 32, "text-anchor": "middle", class: "ex-tick"});
      cap.textContent = "score q·kᵀ·scale";
      hist.append(cap);
      $("eq1-hist-caption").textContent =
        `The ${E.n_queries * E.n_keys} scores of ${E.n_queries} queries × ${E.n_keys} keys (d_k = ${d}, ` +
        `scale = ${st.scale}): standard deviation ${st.score_std}.` +
        (!fit && st.outside ? ` ${st.outside} scores lie beyond ±${limit} and are counted in the end bins.` : "");
      // query 0's weights: bars and numbers
      const bars = $("eq1-bars");
      bars.replaceChildren();
      const n = st.weights.length, BH = 110, step = W / n;
      bars.setAttribute("viewBox", `0 0 ${W} ${BH + 18}`);
      st.weights.forEach((w, j) => {
        const h = (w / 10000) * BH;
        bars.append(svg("rect", {x: (j * step + 2).toFixed(2), y: (BH - h).toFixed(2), width: (step - 4).toFixed(2),
                                  height: Math.max(h, 0).toFixed(2), class: "ex-bar"}));
        const t = svg("text", {x: (j * step + step / 2).toFixed(2), y: BH + 14, "text-anchor": "middle", class: "ex-tick"});
        t.textContent = String(j);
        bars.append(t);
      });
      const list = $("eq1-weights");
      list.replaceChildren(...st.weights.map((w, j) =>
        el("li", {"data-key": String(j)}, el("span", {class: "ex-key", text: `key ${j}`}), " ",
           el("span", {class: "ex-num", text: fmt4(w)}))));
      for (const [id, value] of [["row-entropy", st.row.entropy], ["row-max", st.row.max_weight],
                                 ["row-dscores", st.row.dscores], ["row-dq", st.row.dq],
                                 ["mean-entropy", st.mean.entropy], ["mean-max", st.mean.max_weight],
                                 ["mean-dscores-rms", st.mean.dscores_rms],
                                 ["mean-dscores-median", st.mean.dscores_median], ["mean-dq-rms", st.mean.dq_rms]]) {
        $(`eq1-${id}`).textContent = value;
      }
    }
    for (const c of [dk, scaled, axis]) c.addEventListener("input", draw);
    draw();
  }

  // ---- Masks ----------------------------------------------------------------------------------
  function masks() {
    const root = $("masks-view");
    if (!root) return;
    const M = DATA.masks;
    const align = $("masks-align"), causal = $("masks-causal"), length = $("masks-length"),
      lengthOut = $("masks-length-value"), windowSel = $("masks-window"), alibi = $("masks-alibi");
    length.max = String(M.S);
    if (!length.value || Number(length.value) > M.S) length.value = String(M.S);
    for (const w of M.windows) {
      windowSel.append(el("option", {value: w === null ? "-" : String(w), text: w === null ? "off" : `±${w} positions`}));
    }
    alibi.append(el("option", {value: "-", text: "off"}));
    for (const a of M.alibi) {
      alibi.append(el("option", {value: String(a.head), text: `head ${a.head + 1} of 8: slope m = ${a.slope}`}));
    }
    function key() {
      return [align.value, causal.checked ? "1" : "0", length.value, windowSel.value, alibi.value].join("|");
    }
    function draw() {
      lengthOut.textContent = length.value;
      const k = key(), st = M.states[k];
      root.dataset.state = k;
      const maskSvg = $("masks-mask");
      maskSvg.replaceChildren();
      const c = 24, pad = 18;
      maskSvg.setAttribute("viewBox", `0 0 ${pad + M.S * c + 2} ${pad + M.L * c + 2}`);
      for (let j = 0; j < M.S; j++) {
        const t = svg("text", {x: pad + j * c + c / 2, y: 12, "text-anchor": "middle", class: "ex-tick"});
        t.textContent = String(j);
        maskSvg.append(t);
      }
      for (let i = 0; i < M.L; i++) {
        const t = svg("text", {x: 8, y: pad + i * c + c / 2 + 4, "text-anchor": "middle", class: "ex-tick"});
        t.textContent = String(i);
        maskSvg.append(t);
        for (let j = 0; j < M.S; j++) {
          const on = st.mask[i * M.S + j] === "1";
          maskSvg.append(svg("rect", {x: pad + j * c + 1, y: pad + i * c + 1, width: c - 2, height: c - 2,
                                      class: on ? "ex-attend" : "ex-blocked"}));
        }
      }
      const table = $("masks-weights");
      const head = el("tr", {}, el("th", {scope: "col", text: "q\\k"}),
                      ...Array.from({length: M.S}, (_, j) => el("th", {scope: "col", text: String(j)})));
      const rows = [];
      for (let i = 0; i < M.L; i++) {
        const cells = [];
        for (let j = 0; j < M.S; j++) {
          const w = st.weights[i * M.S + j], on = st.mask[i * M.S + j] === "1";
          // ".2656" for 0.2656: eight columns of four decimals fit a phone's width
          const td = el("td", {class: on ? "" : "ex-masked", "data-q": String(i), "data-k": String(j),
                               style: `background:${on ? shade(w / 10000) : ""};color:${on ? ink(w / 10000) : ""}`,
                               text: fmt4(w).replace(/^0\./, ".")});
          cells.push(td);
        }
        rows.push(el("tr", {}, el("th", {scope: "row", text: String(i)}), ...cells));
      }
      table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
      const empty = [];
      for (let i = 0; i < M.L; i++) {
        if (!st.mask.slice(i * M.S, (i + 1) * M.S).includes("1")) empty.push(i);
      }
      $("masks-note").textContent = empty.length
        ? `Query ${empty.join(", ")} may attend no key: its weights are all 0 (the library's rule, never NaN).`
        : "Every query may attend at least one key: each row of weights sums to 1.";
    }
    for (const c of [align, causal, length, windowSel, alibi]) c.addEventListener("input", draw);
    draw();
  }

  // ---- Heads of trained models ---------------------------------------------------------------
  function heads() {
    const root = $("heads-view");
    if (!root) return;
    const views = DATA.heads.views;
    const viewSel = $("heads-input"), layerSel = $("heads-layer"), headSel = $("heads-head");
    for (const v of views) viewSel.append(el("option", {value: v.id, text: v.label}));
    let query = 0;
    function current() { return views.find((v) => v.id === viewSel.value); }
    function fillNumbers(sel, n, name) {
      const keep = Math.min(Number(sel.value || 0), n - 1);
      sel.replaceChildren(...Array.from({length: n}, (_, i) => el("option", {value: String(i), text: `${name} ${i}`})));
      sel.value = String(keep);
    }
    function weightsOf(v) {
      const l = Number(layerSel.value), h = Number(headSel.value), nq = v.queries.length, nk = v.keys.length;
      const base = (l * v.heads + h) * nq * nk;
      return (i, j) => v.weights[base + i * nk + j];
    }
    function draw() {
      const v = current(), w = weightsOf(v), nq = v.queries.length, nk = v.keys.length;
      if (query >= nq) query = 0;
      root.dataset.state = `${v.id}|${layerSel.value}|${headSel.value}|${query}`;
      // two token columns and the lines between them
      const rowH = 24, H = Math.max(nq, nk) * rowH;
      const lines = $("heads-lines");
      lines.style.height = `${H}px`;
      const left = lines.querySelector(".ex-col-q"), right = lines.querySelector(".ex-col-k"),
        pic = lines.querySelector("svg");
      left.replaceChildren(...v.queries.map((t, i) => {
        const b = el("button", {type: "button", class: "ex-token", "data-index": String(i),
                                "aria-pressed": String(i === query), "aria-label": `query ${i}: ${t}`, text: t});
        b.style.top = `${((i + 0.5) * H) / nq - 11}px`;
        b.addEventListener("focus", () => select(i));
        // a pointer that moves over a token (not one resting where a redrawn token appears)
        b.addEventListener("pointermove", (e) => { if (e.movementX || e.movementY) select(i); });
        b.addEventListener("click", () => select(i));
        b.addEventListener("keydown", (e) => {
          const next = e.key === "ArrowDown" ? i + 1 : e.key === "ArrowUp" ? i - 1 : null;
          if (next !== null && next >= 0 && next < nq) { e.preventDefault(); left.children[next].focus(); }
        });
        return b;
      }));
      right.replaceChildren(...v.keys.map((t, j) => {
        const s = el("span", {class: "ex-token ex-key-token", "data-index": String(j), text: t});
        s.style.top = `${((j + 0.5) * H) / nk - 11}px`;
        return s;
      }));
      pic.replaceChildren();
      pic.setAttribute("viewBox", `0 0 100 ${H}`);
      for (let i = 0; i < nq; i++) {
        for (let j = 0; j < nk; j++) {
          const a = w(i, j) / 10000;
          if (a < 0.005) continue;
          pic.append(svg("line", {x1: 0, y1: ((i + 0.5) * H) / nq, x2: 100, y2: ((j + 0.5) * H) / nk,
                                  class: i === query ? "ex-line ex-line-on" : "ex-line",
                                  "stroke-opacity": (i === query ? a : a * 0.25).toFixed(3),
                                  "stroke-width": i === query ? 3 : 1.5}));
        }
      }
      // the heat map: queries down, keys across
      const heat = $("heads-heat"), c = 16, lab = 58;       // lab: room for the token labels
      heat.replaceChildren();
      heat.setAttribute("viewBox", `0 0 ${lab + nk * c + 2} ${lab + nq * c + 2}`);
      const label = (text, attrs) => {
        const t = svg("text", {...attrs, class: "ex-tick ex-heat-label"});
        t.textContent = text.length > 9 ? text.slice(0, 8) + "…" : text;
        heat.append(t);
      };
      v.queries.forEach((t, i) => label(t, {x: lab - 3, y: lab + i * c + c * 0.72, "text-anchor": "end"}));
      v.keys.forEach((t, j) => label(t, {x: 0, y: 0, "text-anchor": "start",
                                         transform: `translate(${lab + j * c + c * 0.7}, ${lab - 3}) rotate(-90)`}));
      for (let i = 0; i < nq; i++) {
        for (let j = 0; j < nk; j++) {
          heat.append(svg("rect", {x: lab + j * c, y: lab + i * c, width: c, height: c, fill: shade(w(i, j) / 10000)}));
        }
      }
      heat.append(svg("rect", {x: lab, y: lab + query * c, width: nk * c, height: c, class: "ex-heat-row"}));
      // the selected query's weights, with four decimals
      $("heads-query").textContent = `query ${query}, “${v.queries[query]}”`;
      $("heads-readout").replaceChildren(...v.keys.map((t, j) =>
        el("li", {"data-key": String(j)}, el("span", {class: "ex-key", text: `key ${j} “${t}”`}), " ",
           el("span", {class: "ex-num", text: fmt4(w(query, j))}))));
    }
    function select(i) {
      if (i === query) return;
      const focused = document.activeElement && document.activeElement.classList.contains("ex-token");
      query = i;
      draw();
      if (focused) $("heads-lines").querySelector(`.ex-col-q [data-index="${i}"]`).focus({preventScroll: true});
    }
    function reset() {
      const v = current();
      fillNumbers(layerSel, v.layers, "layer");
      fillNumbers(headSel, v.heads, "head");
      draw();
    }
    viewSel.addEventListener("input", () => { query = 0; reset(); });
    for (const c of [layerSel, headSel]) c.addEventListener("input", draw);
    reset();
  }

  function start() {
    if (!DATA) return;
    eq1();
    masks();
    heads();
    document.querySelectorAll(".explorer-needs-js").forEach((n) => n.remove());
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
