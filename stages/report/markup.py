"""A tiny HTML builder that escapes by construction.

Memory text is untrusted (a transcript can hold ``<script>`` or ``javascript:``), so the page is never
built by pasting strings: :func:`el` escapes every text child and attribute value, and only :class:`Safe`
values (made by this module) pass through unescaped. Links may only point inside the page (``#...``) or
at embedded media (``data:image/...``, ``data:audio/...``), so no memory text can become a URL.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator

VOID = {"img", "br", "hr", "input", "meta", "source", "link"}
URL_ATTRS = {"href", "src", "xlink:href"}
SAFE_URL = re.compile(r"^(#[\w\-.:]*|data:(image/(jpeg|png)|audio/ogg);base64,[A-Za-z0-9+/=]+)$")
ATTR_NAME = re.compile(r"^[a-zA-Z_:][\w:.\-]*$")


class Safe(str):
    """Markup this module produced; inserted as is."""


def esc(text: object) -> Safe:
    return text if isinstance(text, Safe) else Safe(html.escape(str(text), quote=True))


def join(parts: Iterable[object]) -> Safe:
    return Safe("".join(esc(p) for p in parts if p is not None and p is not False))


def el(tag: str, *children: object, **attrs: object) -> Safe:
    """``<tag attrs>children</tag>``; attribute names use ``_`` for ``-`` and a trailing ``_`` for keywords
    (``class_="x"``, ``data_clip="3"``); ``None``/``False`` attributes are left out, ``True`` ones bare."""
    out = [f"<{tag}"]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-") if key != "xlink_href" else "xlink:href"
        if not ATTR_NAME.match(name) or name.lower().startswith("on"):
            raise ValueError(f"attribute {name!r} is not allowed")
        if value is True:
            out.append(f" {name}")
            continue
        text = str(value)
        if name in URL_ATTRS and not SAFE_URL.match(text):
            raise ValueError(f"{name}={text[:40]!r}: only in-page anchors and embedded media are linked")
        out.append(f' {name}="{html.escape(text, quote=True)}"')
    out.append(">")
    if tag in VOID:
        return Safe("".join(out))
    out.append(join(_flatten(children)))
    out.append(f"</{tag}>")
    return Safe("".join(out))


def _flatten(children: Iterable[object]) -> Iterable[object]:
    for c in children:
        if isinstance(c, (list, tuple, Iterator)):  # generators too; a str is not an Iterator
            yield from _flatten(c)
        else:
            yield c


def anchor(*parts: object) -> str:
    """A stable element id from any text (node ids hold ':' and '<', which CSS selectors dislike)."""
    raw = "-".join(str(p) for p in parts)
    return re.sub(r"[^A-Za-z0-9_\-]+", "_", raw).strip("_")


def clock(seconds: float | None) -> str:
    """0:07 / 1:02:03 for a time in seconds."""
    if seconds is None:
        return "?"
    s = int(round(float(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
