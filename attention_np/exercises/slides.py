"""A slide deck per lesson (reveal.js), generated from the syllabus and the lesson's notebook.

Each deck: the lesson's title, paper sections and time; its objectives; what it assumes; then
the lesson's sections in order (its ``##`` headings), each with the figures its cells drew (the
committed outputs, as PNG files beside the deck) and, where a predict question names a cell of
the section (:mod:`.handout`), the question on a slide and the cell's output as the next
fragment (reveal it after the class has voted); then the other questions and the exercise or
project. Nothing is typed twice: change the syllabus or the lesson and rebuild.

The scripts and styles are reveal.js from npm (``docs/site/package.json``, installed by
``docs/build.sh`` into ``docs/_build/npm/``), never a CDN: the site serves them from
``_static/reveal/``, the kit copies them next to the decks. Without them a deck is one HTML page
whose slides follow one another. Standard library only.
"""

from __future__ import annotations

import base64
import html
import json
import os
import pathlib
import re
import shutil

from attention_np.exercises.handout import output_text, predict_questions
from attention_np.exercises.syllabus import HEADER_TAG, KINDS, LESSONS, PAPER, QUESTIONS_TAG, Lesson

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: the files of reveal.js's dist/ a deck loads (and its licence)
REVEAL_FILES = ("reveal.js", "reveal.css", "reset.css", "theme/white.css")
STYLE = """.reveal h1, .reveal h2 { text-transform: none; }
.reveal h1 { font-size: 1.6em; } .reveal h2 { font-size: 1.15em; }
.reveal section { font-size: 0.62em; text-align: left; }
.reveal ul { display: block; } .reveal li { margin: 0.2em 0; }
.reveal img.figure { height: 560px; width: auto; max-width: 100%; object-fit: contain;
  margin: 0 auto; display: block; }
.reveal pre.output { font-size: 0.62em; width: 100%; max-height: 420px; overflow: auto;
  box-shadow: none; background: #f4f4f4; padding: 0.4em; }
.reveal .kind { color: #8a3b12; font-weight: bold; }
.reveal .small { font-size: 0.8em; color: #555; }"""

TEX = ((r"\sqrt", "√"), (r"\cdot", "·"), (r"\times", "×"), (r"\top", "ᵀ"), (r"\odot", "⊙"),
       (r"\ell", "ℓ"), (r"\partial", "∂"), (r"\sum", "Σ"), (r"\infty", "∞"), (r"\approx", "≈"),
       (r"\le", "≤"), (r"\ge", "≥"), (r"\mathrm", ""), (r"\text", ""), (r"\,", " "), ("{", ""), ("}", ""))


def plain(text: str) -> str:
    """Markdown heading text as plain text: inline TeX and Markdown marks made readable."""
    def tex(match):
        s = match.group(1)
        for a, b in TEX:
            s = s.replace(a, b)
        return s.replace("\\", "").replace("^ᵀ", "ᵀ")
    text = re.sub(r"\$([^$]+)\$", tex, text)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)          # links: their text
    return text.replace("**", "").replace("`", "")


def _list(items) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(plain(i))}</li>" for i in items) + "</ul>"


def _section(title: str, body: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<section{attr}>\n<h2>{html.escape(title)}</h2>\n{body}\n</section>"


def _images(cell: dict) -> list:
    found = []
    for out in cell.get("outputs", []):
        png = out.get("data", {}).get("image/png")
        if png:
            found.append(base64.b64decode("".join(png) if isinstance(png, list) else png))
    return found


def deck(les: Lesson, nb: dict, assets: str) -> tuple:
    """(HTML, {image file name: PNG bytes}) of lesson ``les``'s deck; ``assets``: where reveal.js is."""
    predicts = {cell: (number, q) for number, q, cell in predict_questions(les)}
    minutes = f"about {les.minutes} min in class, {les.homework_minutes} min of homework"
    slides = [f'<section>\n<h1>Lesson {les.number}: {html.escape(plain(les.title))}</h1>\n'
              f'<p>{html.escape("; ".join(les.paper))} of <a href="{PAPER}">the paper</a></p>\n'
              f'<p class="small">{minutes}; the lesson: <code>notebooks/{les.stem}.ipynb</code></p>\n'
              '</section>',
              _section("What you will be able to do", _list(les.objectives)),
              _section("What it assumes", _list(les.prerequisites))]
    images, heading = {}, plain(les.title)
    for cell in nb["cells"]:
        source = "".join(cell.get("source", []))
        if cell["cell_type"] == "markdown":
            if {HEADER_TAG, QUESTIONS_TAG} & set(cell.get("metadata", {}).get("tags", [])):
                continue                     # the syllabus's own cells: their slides are made above and below
            for line in source.splitlines():
                if line.startswith("## "):
                    heading = plain(line[3:].strip())
                    slides.append(_section(heading, "", "heading"))
            continue
        if cell.get("id") in predicts:
            number, q = predicts[cell["id"]]
            question = f'<p><span class="kind">{KINDS[q.kind]}</span> {html.escape(plain(q.text))}</p>'
            answer = f'<pre class="output fragment">{html.escape(output_text(cell).rstrip())}</pre>'
            slides.append(_section(f"Question {number}: predict, then run", question + "\n" + answer))
        for k, png in enumerate(_images(cell), 1):
            name = f"{les.stem}-{cell.get('id', 'cell')}-{k}.png"
            images[name] = png
            alt = f"a figure of {html.escape(heading)}"
            slides.append(_section(heading, f'<img class="figure" src="img/{name}" alt="{alt}">'))
    others = [f"{i}. {KINDS[q.kind]} {q.text}" for i, q in enumerate(les.questions, 1) if q.kind != "predict"]
    if others:
        slides.append(_section("Questions", _list(others)))
    if les.exercise_notebook:
        work = f"exercise <code>exercises/{les.exercise_notebook}.ipynb</code>: " + ", ".join(
            f"<code>{n}</code>" for n in les.exercises)
    elif les.project:
        work = "the project: " + html.escape(plain(les.project))
    else:
        work = "the questions above"
    slides.append(_section("Homework", f"<p>{work}</p>"))
    page = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Lesson {les.number}: {html.escape(plain(les.title))} (slides)</title>
<link rel="stylesheet" href="{assets}/reset.css">
<link rel="stylesheet" href="{assets}/reveal.css">
<link rel="stylesheet" href="{assets}/theme/white.css">
<style>
{STYLE}
</style>
</head>
<body>
<!-- generated by attention_np/exercises/slides.py from the syllabus and notebooks/{les.stem}.ipynb -->
<div class="reveal"><div class="slides">
{chr(10).join(slides)}
</div></div>
<script src="{assets}/reveal.js"></script>
<script>
if (window.Reveal) Reveal.initialize({{hash: true, slideNumber: "c/t", center: false,
                                      width: 1280, height: 720}});
</script>
</body>
</html>
"""
    return page, images


def reveal_dist(root=ROOT):
    """reveal.js's dist/ folder: $ATTENTION_NP_REVEAL, else docs/_build/npm's (docs/build.sh), else None."""
    for candidate in (os.environ.get("ATTENTION_NP_REVEAL"),
                      pathlib.Path(root) / "docs" / "_build" / "npm" / "node_modules" / "reveal.js" / "dist"):
        if candidate and (pathlib.Path(candidate) / "reveal.js").is_file():
            return pathlib.Path(candidate)
    return None


def copy_reveal(dist: pathlib.Path, dest: pathlib.Path) -> None:
    """Copy the files a deck loads from reveal.js's ``dist`` into ``dest`` (and the licence)."""
    for rel in REVEAL_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dist / rel, dest / rel)
    licence = dist.parent / "LICENSE"
    if licence.is_file():
        shutil.copyfile(licence, dest / "LICENSE")


def write_decks(dest, root=ROOT, assets: str = "reveal", copy_assets: bool = True) -> list:
    """Write a deck per lesson (``NN_stem.html``), their figures (``img/``) and, with
    ``copy_assets``, reveal.js (``reveal/``) into ``dest``; the paths of the decks."""
    dest, root = pathlib.Path(dest), pathlib.Path(root)
    (dest / "img").mkdir(parents=True, exist_ok=True)
    paths = []
    for les in LESSONS:
        nb = json.loads((root / "notebooks" / f"{les.stem}.ipynb").read_text(encoding="utf-8"))
        page, images = deck(les, nb, assets)
        for name, data in images.items():
            (dest / "img" / name).write_bytes(data)
        path = dest / f"{les.stem}.html"
        path.write_text(page, encoding="utf-8")
        paths.append(path)
    dist = reveal_dist(root)
    if copy_assets and dist is not None:
        copy_reveal(dist, dest / assets)
    note = ("reveal.js is in `reveal/` (from npm, MIT licence): open a deck in a browser, press F for "
            "full screen, S for the speaker view's timer, arrows to move; a predict question's output "
            "appears at the next press." if dist is not None or not copy_assets else
            "reveal.js was not found (run `bash docs/build.sh` once, which installs it from npm into "
            "docs/_build/npm/, or set ATTENTION_NP_REVEAL to a reveal.js dist/ folder, then build "
            "again): without it each deck opens as one page, its slides one after another.")
    (dest / "README.md").write_text(
        "# Slides: a deck per lesson\n\nGenerated from the syllabus and the lessons' notebooks "
        "(attention_np/exercises/slides.py).\n\n" + "\n".join(
            f"- [`{p.name}`]({p.name}): lesson {les.number}, {plain(les.title)}"
            for p, les in zip(paths, LESSONS, strict=True))
        + f"\n\n{note}\n", encoding="utf-8")
    return paths
