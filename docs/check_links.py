"""Check the internal links of the built site (offline; ``-b linkcheck`` needs the network).

    python docs/check_links.py docs/_build/html

Every ``href``/``src`` that is not an external URL must name a file of the build, and a
``#fragment`` must name an ``id`` in that file. Prints each broken link; exit code 1 if any.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)
            if name in ("id", "name") and value:
                self.ids.add(value)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(site: Path) -> list[str]:
    """``"page: link"`` for every internal link of ``site`` that does not resolve."""
    # _static/ holds the theme's assets, among them Jinja macro files named *.html: not pages
    pages = {p.resolve(): _parse(p) for p in site.rglob("*.html")
             if p.relative_to(site).parts[0] != "_static"}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urlsplit(link)
            if url.scheme or url.netloc or link.startswith(("mailto:", "data:", "javascript:")):
                continue
            target = page if not url.path else (page.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site.resolve())}: {link}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page.relative_to(site.resolve())}: {link} (no such anchor)")
    return broken


if __name__ == "__main__":
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_build/html")
    bad = broken_links(site)
    for line in bad:
        print("broken:", line)
    print(f"{len(bad)} broken internal links in {site}")
    sys.exit(1 if bad else 0)
