"""What the renderer knows while writing, and the small pieces of markup every section uses.

:class:`Page` holds which anchors exist (a link is only written when its target is on the page, so
every in-page link resolves), the media made so far and the lazy blocks' index; beside it the anchors'
names, links, memory text with its entity ids linked, and a character's face or initials. It is its own
module because every section renderer (:mod:`.timeline`, :mod:`.cards`, :mod:`.people_cards`,
:mod:`.answer_items`) reads it, and none of them should depend on another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from m3cli.stages.core.entity_ids import ID_RE
from m3cli.stages.report.markup import SAFE_URL, Safe, anchor, el, join
from m3cli.stages.report.records import Character, ReportData


def clip_anchor(video: str, clip: int) -> str:
    return anchor("clip", video, clip)


def char_anchor(video: str, character: str) -> str:
    return anchor("char", video, character)


def node_anchor(node_id: str) -> str:
    return anchor("n", node_id)


def person_anchor(pid: str) -> str:
    return anchor(pid.strip("<>"))  # <person_3> -> person_3


@dataclass
class Page:
    """What the renderer knows while writing: which anchors exist, and the media made so far."""

    data: ReportData
    thumbs: dict[tuple[str, str], list[str]]  # (video, character) -> thumbnail data URIs
    voices: dict[tuple[str, str], str]  # (video, character) -> audio data URI
    frames: dict[tuple[str, int, int], str] = field(default_factory=dict)  # (video, clip, k) -> data URI
    anchors: set[str] = field(default_factory=set)
    characters: dict[tuple[str, str], Character] = field(default_factory=dict)
    member_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (video, face/voice id) -> character
    avatars: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # -> (class, data URI)
    avatar_of: dict[str, str] = field(default_factory=dict)  # data URI -> its class
    recorded: dict[str, str] = field(default_factory=dict)  # video -> recording start, when known
    search: list[list[Any]] = field(default_factory=list)  # [id, where, text, block] of lazy items
    block_of: dict[str, int] = field(default_factory=dict)  # element id in a lazy block -> block
    blocks: int = 0
    labels: dict[str, str] = field(default_factory=dict)  # card anchor -> the character's label
    person_labels: dict[str, str] = field(default_factory=dict)  # person id -> name (id)

    def __post_init__(self) -> None:
        for v in self.data.videos:
            self.anchors.add(anchor("video", v.id))
            for c in v.clips:
                self.anchors.add(clip_anchor(v.id, c.index))
                self.anchors.update(node_anchor(x.id) for x in c.lines)
                self.anchors.update(node_anchor(u.node) for u in c.utterances)
            for ch in v.characters:
                self.anchors.add(char_anchor(v.id, ch.id))
                self.characters[(v.id, ch.id)] = ch
                self.labels[char_anchor(v.id, ch.id)] = ch.name or ch.id
                for m in ch.members:
                    self.member_of[(v.id, m)] = ch.id

        for p in self.data.people:
            self.anchors.add(person_anchor(p.id))
            self.person_labels[p.id] = f"{p.name} ({p.id})" if p.name else p.id
            self.labels[person_anchor(p.id)] = self.person_labels[p.id]

    def avatar_class(self, video: str, character: str, uri: str) -> str:
        """One CSS class per distinct face image (characters that share a crop share the rule)."""
        key = (video, character)
        if key not in self.avatars:
            if not SAFE_URL.match(uri):
                raise ValueError("a thumbnail is not an embedded image")
            known = self.avatar_of.setdefault(uri, f"av-{len(self.avatar_of)}")
            self.avatars[key] = (known, uri)
        return self.avatars[key][0]

    def avatar_css(self) -> str:
        rules = (f'.{cls} {{ background-image: url("{uri}"); }}' for uri, cls in self.avatar_of.items())
        return "\n".join(rules)

    def href(self, target: str) -> str | None:
        return f"#{target}" if target in self.anchors else None

    def character_of(self, video: str, entity: str | None) -> Character | None:
        if not entity:
            return None
        cid = self.member_of.get((video, entity), entity)
        return self.characters.get((video, cid))

    def node_href(self, video: str, node_id: str, clip: int | None = None) -> str | None:
        """The node's line if shown, else its clip if shown, else nothing."""
        found = self.href(node_anchor(node_id))
        if found:
            return found
        if clip is None:
            m = re.match(rf"{re.escape(video)}:(\d+):", node_id)
            clip = int(m.group(1)) if m else None
        return self.href(clip_anchor(video, clip)) if clip is not None else None


def link(text: object, href: str | None, **attrs: Any) -> Safe:
    return el("a", text, href=href, **attrs) if href else el("span", text, **attrs)


def rich_text(page: Page, video: str, text: str) -> Safe:
    """Memory text with ``<character_k>``/``<face_i>``/``<voice_j>`` turned into links to the card."""
    parts: list[object] = []
    pos = 0
    for m in ID_RE.finditer(text):
        parts.append(text[pos : m.start()])
        ch = page.character_of(video, m.group(0))
        href = page.href(char_anchor(video, ch.id)) if ch else None
        parts.append(link(m.group(0), href, class_="ent"))
        pos = m.end()
    parts.append(text[pos:])
    return join(parts)


def avatar(page: Page, video: str, ch: Character | None, size: str = "s") -> Safe:
    """A character's face (or initials) beside its name. The face is one CSS rule per character, not an
    image per use: an hour of utterances names the speaker thousands of times."""
    thumbs = page.thumbs.get((video, ch.id)) if ch else None
    if thumbs and ch is not None:
        css_class = page.avatar_class(video, ch.id, thumbs[0])
        return el("span", class_=f"av av-{size} av-img {css_class}", role="img", aria_label=ch.label)
    initials = "?"
    if ch is not None:
        initials = "".join(w[0] for w in (ch.name or "").split()[:2]).upper() or re.sub(r"\D", "", ch.id)[:3]
    return el("span", initials or "?", class_=f"av av-{size} av-none", aria_hidden="true")


def person(page: Page, video: str, entity: str | None, with_avatar: bool = True) -> Safe:
    ch = page.character_of(video, entity)
    if ch is None:
        return el("span", entity or "unidentified voice", class_="who")
    return el(
        "a",
        avatar(page, video, ch) if with_avatar else "",
        el("span", ch.label),
        href=page.href(char_anchor(video, ch.id)),
        class_="who",
    )
