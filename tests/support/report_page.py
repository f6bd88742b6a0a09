"""The structure of a written report page, read with the standard library's HTML parser.

What the tests check without a browser: which element ids exist, where every link and media source
points, which tags and attributes occur (so a smuggled ``<script>``, an ``on*`` handler or a
``javascript:`` URL would show up as markup rather than as text), and the page's visible text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path


@dataclass
class Page:
    ids: set[str] = field(default_factory=set)
    hrefs: list[str] = field(default_factory=list)
    srcs: list[str] = field(default_factory=list)
    tags: dict[str, int] = field(default_factory=dict)
    attributes: set[str] = field(default_factory=set)
    classes: dict[str, int] = field(default_factory=dict)
    text: str = ""

    def count(self, css_class: str) -> int:
        return self.classes.get(css_class, 0)

    def dangling(self) -> list[str]:
        """In-page links whose target is not on the page."""
        return [h for h in self.hrefs if h.startswith("#") and h[1:] not in self.ids]


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.chunks: list[str] = []
        self.skip = 0  # inside <script>/<style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        p = self.page
        p.tags[tag] = p.tags.get(tag, 0) + 1
        if tag in ("script", "style"):
            self.skip += 1
        for name, value in attrs:
            p.attributes.add(name)
            value = value or ""
            if name == "id":
                p.ids.add(value)
            elif name in ("href", "xlink:href"):
                p.hrefs.append(value)
            elif name == "src":
                p.srcs.append(value)
            elif name == "class":
                for c in value.split():
                    p.classes[c] = p.classes.get(c, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.chunks.append(data)


def read_page(path: Path) -> Page:
    reader = _Reader()
    reader.feed(path.read_text(encoding="utf-8"))
    reader.close()
    reader.page.text = " ".join(" ".join(reader.chunks).split())
    return reader.page
