"""Lazy blocks: a part of the page kept as packed text until the page's script inserts it.

A block is gzipped, base64-encoded markup (escaped by construction like the rest); its searchable
items and element ids go into one packed index (:func:`search_index`) so the script can search and
follow links into blocks not yet inserted. It is its own module because the video, card and people
sections all write lazy blocks, and the packing must match what ``assets/report.js`` unpacks.
"""

from __future__ import annotations

import base64
import gzip
import html
import re

import orjson

from m3cli.stages.report.markup import Safe
from m3cli.stages.report.page import Page

#: Clips per section of a video's clip details. The first section of each of the first
#: :data:`EAGER_VIDEOS` videos is markup in the page; every other section (and every other video's
#: timeline and cards) is a *lazy block*: its markup, escaped by construction like the rest, stored as
#: JSON text in a ``<script type="application/json" class="lazy">`` element that the browser keeps as
#: one string (no elements, no layout) until the page's script inserts it, when something in it is
#: wanted (a clip selected, a link followed, a search hit opened, the section scrolled into view).
#: A 10-hour video's thousand clips then cost the first paint what its first 25 cost.
SECTION_CLIPS = 25
EAGER_VIDEOS = 3
_SEARCHABLE = re.compile(r'<(\w+)((?: [\w:-]+="[^"]*")*) data-s=""((?: [\w:-]+="[^"]*")*)>')
_CONTAINER = re.compile(
    r'<(?:section|article) id="([^"]+)" class="(clip-detail|card|person-card)"(?: [^>]*?data-clip="(\d+)")?'
)
_ID_ATTR = re.compile(r' id="([^"]+)"')
_BOX_ID = re.compile(r'<[a-z0-9]+\b[^>]* id="([^"]+)"')
_TAG = re.compile(r"<[^>]*>")


def lazy(page: Page, markup: Safe) -> Safe:
    """``markup`` as a lazy block (see :data:`SECTION_CLIPS`): gzip, base64 (no ``<``: nothing in it can
    end the element or open another), its searchable items and element ids indexed for the page. The
    script inflates and inserts exactly the markup this module wrote."""
    if not markup:
        return Safe("")
    number = page.blocks
    page.blocks += 1
    page.search += [[*item, number] for item in searchable(page, markup)]
    page.block_of.update((i, number) for i in _BOX_ID.findall(markup))
    packed = _packed(markup)
    return Safe(f'<script type="application/gzip" class="lazy" data-block="{number}">{packed}</script>')


def _packed(text: str) -> str:
    """gzip (mtime 0: the same page byte for byte) and base64: markup shrinks about tenfold."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 6, mtime=0)).decode("ascii")


def searchable(page: Page, markup: str) -> list[list[str]]:
    """[element id, where, text] of every ``data-s`` element in ``markup``: what the page's search would
    read from the element's textContent were it in the DOM. An element without an id is found by its
    clip or card (the container before it: neither nests)."""
    out = []
    containers = [(m.start(), m.group(1), m.group(2), m.group(3)) for m in _CONTAINER.finditer(markup)]
    at = 0
    for m in _SEARCHABLE.finditer(markup):
        tag = m.group(1)
        end = markup.find(f"</{tag}>", m.end())
        text = " ".join(html.unescape(_TAG.sub("", markup[m.end() : end if end >= 0 else None])).split())
        while at + 1 < len(containers) and containers[at + 1][0] < m.start():
            at += 1
        box = containers[at] if containers and containers[at][0] < m.start() else None
        own = _ID_ATTR.search(m.group(2) + m.group(3))
        target = own.group(1) if own else (box[1] if box else "")
        if not target:
            continue
        if box and box[2] == "clip-detail":
            where = f"clip {box[3]}"
        elif box:
            where = page.labels.get(box[1], "character")
        else:
            where = "video"
        out.append([target, where, text])
    return out


def search_index(page: Page) -> Safe | str:
    """What the script needs to find things in lazy blocks before inserting them, packed like them:
    ``{"ids": {element id: block}, "search": [[id, where, text, block], ...]}``."""
    if not page.blocks:
        return ""
    data = orjson.dumps({"ids": page.block_of, "search": page.search}, option=orjson.OPT_SORT_KEYS)
    return Safe(f'<script type="application/gzip" id="lazy-index">{_packed(data.decode("utf-8"))}</script>')
