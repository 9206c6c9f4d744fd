// Search results: Sphinx cuts each result's snippet from the page's text, where a formula is its
// TeX source, and the snippet may cut a formula in two (and highlighting splits \sqrt into "\ sqrt").
// Give the snippet the formula in plain text instead: "\sqrt{d_k}" reads "√dₖ", as the page titles
// do (tex_to_text in docs/conf.py; the same rules). And the snippet is prose: the article's text,
// not the theme's menus.
(function () {
  "use strict";
  const SUB = {}, SUP = {};
  [..."0123456789aehijklmnoprstuvx+-=()"].forEach((c, i) => { SUB[c] = [..."₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ₊₋₌₍₎"][i]; });
  [..."0123456789+-=()inT"].forEach((c, i) => { SUP[c] = [..."⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿᵀ"][i]; });
  const SYMBOLS = {cdot: "·", top: "ᵀ", times: "×", ldots: "…", dots: "…", cdots: "⋯", le: "≤",
    leq: "≤", ge: "≥", geq: "≥", ne: "≠", approx: "≈", infty: "∞", sum: "Σ", in: "∈", to: "→",
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", theta: "θ", lambda: "λ", mu: "μ",
    pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Delta: "Δ", Sigma: "Σ", "mathbb{R}": "ℝ",
    quad: " ", ",": " ", ";": " ", "!": "", left: "", right: ""};
  function script(text, table, mark) {
    if (text === "\\top" || text === "T") return "ᵀ";
    if ([...text].every((c) => c in table)) return [...text].map((c) => table[c]).join("");
    return /^[A-Za-z0-9]+$/.test(text) ? mark + text : mark + "(" + text + ")";
  }
  function texToText(tex) {
    let s = tex.replace(/\\(?:mathrm|text|mathbf|mathit|operatorname|textrm)\{([^{}]*)\}/g, "{$1}");
    s = s.replace(/_\{([^{}]*)\}|_(\\?\w)/g, (m, a, b) => script(a || b, SUB, "_"));
    s = s.replace(/\^\{([^{}]*)\}|\^(\\top|\w)/g, (m, a, b) => script(a || b, SUP, "^"));
    s = s.replace(/\\sqrt\{([^{}]*)\}/g, (m, a) => "√" + (/^\w\W*$/u.test(a) || /^[A-Za-z][\u2080-\u209c\u1d62-\u1d6a]*$/.test(a) ? a : "(" + a + ")"));
    s = s.replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "$1/$2");
    s = s.replace(/\\(mathbb\{R\}|[A-Za-z]+|[,;!])/g, (m, a) => (a in SYMBOLS ? SYMBOLS[a] : a));
    return s.replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
  }
  function patch() {
    if (typeof Search === "undefined" || !Search.htmlToText) return;
    const htmlToText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      // The snippet is cut from [role="main"], which under this theme also holds the theme's
      // buttons and menus ("Settings Light Dark", "Contents"): cut it from the article alone.
      const article = doc.querySelector("article.bd-article");
      if (article) {
        doc.querySelectorAll('[role="main"]').forEach((el) => el.removeAttribute("role"));
        article.setAttribute("role", "main");
        article.querySelectorAll(".launch-note, .explorer-needs-js").forEach((el) => el.remove());
      }
      doc.querySelectorAll(".math").forEach((el) => {
        const tex = el.textContent.trim().replace(/^\\[(\[]|\\[)\]]$/g, "");
        el.textContent = " " + texToText(tex) + " ";
      });
      return htmlToText(doc.documentElement.outerHTML, anchor);
    };
  }
  window.attentionNpTexToText = texToText;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
