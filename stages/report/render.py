"""The page: gathered :class:`~m3cli.stages.report.gather.ReportData` -> one self-contained HTML string.

Sections: a timeline per video (clips along time, a row per character with visible and speaking spans;
each clip opens its memory and utterances), character cards, answers with their evidence and every
round, and a search box. All markup comes from :mod:`~m3cli.stages.report.markup` (escaping by
construction); the page shell, CSS and JS are package data in ``assets/``. A link is only written when
its target is on the page, so every in-page link resolves.
"""

from __future__ import annotations

import base64
import gzip
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import orjson

from m3cli.stages.core.entity_ids import ID_RE
from m3cli.stages.report.gather import Character, Clip, Line, ReportData, Video
from m3cli.stages.report.graph import Satellite, draw
from m3cli.stages.report.markup import SAFE_URL, Safe, anchor, clock, el, esc, join

KIND_LABEL = {
    "episodic": "episodic",
    "semantic": "semantic",
    "clip": "clip summary",
    "character": "character",
    "relationship": "relationship",
    "conflict": "conflict",
    "global": "video",
}


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


def clip_anchor(video: str, clip: int) -> str:
    return anchor("clip", video, clip)


def char_anchor(video: str, character: str) -> str:
    return anchor("char", video, character)


def node_anchor(node_id: str) -> str:
    return anchor("n", node_id)


def _asset(name: str) -> str:
    assets = resources.files("m3cli.stages.report").joinpath("assets")
    return assets.joinpath(name).read_text(encoding="utf-8")


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


# ============================================================================== timeline


def _pct(t: float, v0: float, span: float) -> str:
    return f"{100.0 * (t - v0) / span:.3f}%"


def _spans(spans: list[tuple[float, float]], cls: str, v0: float, span: float, what: str) -> list[Safe]:
    return [
        el(
            "span",
            class_=f"span {cls}",
            style=f"left:{_pct(s, v0, span)};width:max(2px,{_pct(v0 + e - s, v0, span)})",
            title=f"{what} {clock(s)}–{clock(e)}",
        )
        for s, e in spans
    ]


def timeline(page: Page, v: Video) -> Safe:
    if not v.clips:
        return el("p", "No clips of this video are in the chosen range.", class_="empty")
    v0 = min(c.start for c in v.clips)
    v1 = max(c.end for c in v.clips)
    span = max(v1 - v0, 1e-6)
    ticks = []
    step = _tick_step(span)
    t = (v0 // step + 1) * step if v0 % step else v0
    while t <= v1 + 1e-6:
        ticks.append(el("span", clock(t), class_="tick", style=f"left:{_pct(t, v0, span)}"))
        t += step
    blocks = [
        el(
            "a",
            el("span", str(c.index), class_="clip-no"),
            href=f"#{clip_anchor(v.id, c.index)}",
            class_="clip-block",
            data_clip=str(c.index),
            data_video=v.id,
            style=f"left:{_pct(c.start, v0, span)};width:{_pct(v0 + c.end - c.start, v0, span)}",
            title=f"clip {c.index} · {clock(c.start)}–{clock(c.end)}: {c.summary[:200]}",
        )
        for c in v.clips
    ]
    rows = [
        el(
            "div",
            el("div", "Clips", class_="row-label"),
            el("div", blocks, class_="track clips-track"),
            class_="tl-row",
        )
    ]
    for ch in v.characters:
        track = (
            _spans(ch.present, "present", v0, span, "in clip")
            + _spans(ch.visible, "visible", v0, span, "visible")
            + _spans(ch.speaking, "speaking", v0, span, "speaking")
        )
        rows.append(
            el(
                "div",
                el("div", person(page, v.id, ch.id), class_="row-label"),
                el("div", track, class_="track"),
                class_="tl-row",
                data_character=ch.id,
            )
        )
    legend = el(
        "div",
        el("span", el("i", class_="key visible"), "visible"),
        el("span", el("i", class_="key speaking"), "speaking"),
        el("span", el("i", class_="key present"), "in clip (no finer spans)"),
        class_="legend",
    )
    return el(
        "div",
        el("div", el("div", "", class_="row-label"), el("div", ticks, class_="axis"), class_="tl-row"),
        rows,
        legend,
        class_="timeline",
    )


def _tick_step(span: float) -> float:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= 12:
            return float(step)
    return 14400.0


def line_item(page: Page, v: Video, x: Line) -> Safe:
    meta = [el("span", KIND_LABEL.get(x.kind, x.kind), class_=f"chip k-{x.kind}")]
    if x.subkind and x.subkind != x.kind:
        meta.append(el("span", x.subkind, class_="chip sub"))
    if x.t_start is not None:
        meta.append(el("span", f"{clock(x.t_start)}–{clock(x.t_end)}", class_="time"))
    if x.weight > 1:
        meta.append(el("span", f"×{x.weight:g}", class_="weight", title="repeated this many times (weight)"))
    if x.superseded:
        meta.append(el("span", "superseded", class_="chip bad", title="the losing side of a contradiction"))
    evidence = []
    for e in x.evidence[:12]:
        href = page.node_href(v.id, e)
        evidence.append(link(e.removeprefix(f"{v.id}:"), href, class_="ev"))
    body = [el("span", meta, class_="meta"), el("span", rich_text(page, v.id, x.text), class_="txt")]
    if evidence:
        body.append(el("span", "evidence: ", evidence, class_="evs"))
    return el(
        "li", body, id=node_anchor(x.id), class_="line" + (" superseded" if x.superseded else ""), data_s=""
    )


def clip_detail(page: Page, v: Video, c: Clip) -> Safe:
    said = {u.node for u in c.utterances}
    episodic = [x for x in c.lines if x.kind == "episodic" and x.id not in said]
    semantic = [x for x in c.lines if x.kind == "semantic"]
    other = [x for x in c.lines if x.kind not in ("episodic", "semantic")]
    parts: list[object] = [
        el("h3", f"Clip {c.index}", el("span", f" {clock(c.start)}–{clock(c.end)}", class_="time")),
        el("p", rich_text(page, v.id, c.summary), class_="summary", data_s="") if c.summary else "",
    ]
    if c.keyframes:
        parts.append(keyframes(page, v, c))
    if c.utterances:
        rows = [
            el(
                "tr",
                el("td", f"{clock(u.start)}–{clock(u.end)}", class_="time"),
                el("td", person(page, v.id, u.speaker)),
                el("td", u.text, class_="utt"),
                id=node_anchor(u.node),  # the speech line's anchor: evidence and search land here
                data_s="",
            )
            for u in c.utterances
        ]
        parts.append(el("h4", f"Utterances ({len(c.utterances)})"))
        parts.append(el("table", el("tbody", rows), class_="utterances"))
    for title, xs in (("Episodic memory", episodic), ("Semantic memory", semantic), ("Abstractions", other)):
        if xs:
            count = (
                f"{len(xs)} + the {len(said)} utterances above"
                if title == "Episodic memory" and said
                else len(xs)
            )
            parts.append(el("h4", f"{title} ({count})"))
            parts.append(el("ul", [line_item(page, v, x) for x in xs], class_="lines"))
    if c.lines_total > len(c.lines):
        parts.append(
            el("p", f"{c.lines_total - len(c.lines)} more lines of this clip are not shown.", class_="note")
        )
    if not c.lines:
        parts.append(el("p", "No memory lines in this clip.", class_="empty"))
    return el(
        "section",
        parts,
        id=clip_anchor(v.id, c.index),
        class_="clip-detail",
        data_video=v.id,
        data_clip=str(c.index),
    )


def keyframes(page: Page, v: Video, c: Clip) -> Safe:
    """The clip's keyframes (`m3 sight`), each with the time it stands for, the text read on it and its
    tags; a keyframe whose image is not in the memory shows its text and tags alone."""
    figures = []
    for i, k in enumerate(c.keyframes):
        uri = page.frames.get((v.id, c.index, i))
        img = (
            el("img", src=uri, alt=f"keyframe at {clock(k.t)}", class_="kf-img")
            if uri and SAFE_URL.match(uri)
            else el("div", "no image", class_="kf-img kf-none")
        )
        caption = [el("span", f"{clock(k.start)}–{clock(k.end)}", class_="time")]
        if k.text:
            caption.append(el("span", " / ".join(k.text), class_="kf-text", title="on-screen text"))
        if k.tags:
            caption.append(el("span", ", ".join(k.tags), class_="kf-tags", title="seen (tags)"))
        figures.append(el("figure", img, el("figcaption", caption), class_="kf", data_s=""))
    more = c.keyframes_total - len(c.keyframes)
    title = f"Keyframes ({len(c.keyframes)}" + (
        f" of {c.keyframes_total}, spread over the clip)" if more else ")"
    )
    return join([el("h4", title), el("div", figures, class_="keyframes")])


def video_section(page: Page, v: Video, eager: bool = True) -> Safe:
    """A video: heading, summary and timeline, and its clip details in sections of
    :data:`SECTION_CLIPS` clips, the first one in the page when ``eager``, every other one lazy."""
    name = Path(v.path).name if v.path else v.id
    head = el(
        "h2",
        name,
        el(
            "span",
            f" · video {v.id} · {clock(v.start)}–{clock(v.end)} · {v.clips_total} clips · "
            f"{len(v.characters)} characters",
            class_="sub",
        ),
    )
    top = join(
        [
            el("p", rich_text(page, v.id, v.global_summary), class_="summary", data_s="")
            if v.global_summary
            else "",
            timeline(page, v),
        ]
    )
    sections = [v.clips[i : i + SECTION_CLIPS] for i in range(0, len(v.clips), SECTION_CLIPS)]
    details = [
        join(clip_detail(page, v, c) for c in chunk)
        if eager and i == 0
        else lazy(page, join(clip_detail(page, v, c) for c in chunk))
        for i, chunk in enumerate(sections)
    ]
    hint = "Select a clip on the timeline to see its memory and utterances."
    if len(sections) > 1:
        hint += f" (Its {len(v.clips)} clips are written in {len(sections)} sections, loaded when opened.)"
    return el(
        "section",
        head,
        top if eager else lazy(page, top),
        el("div", el("p", hint, class_="hint"), details, class_="clip-details"),
        class_="video" + ("" if eager else " lazy-video"),
        id=anchor("video", v.id),
        data_video=v.id,
    )


def search_index(page: Page) -> Safe | str:
    """What the script needs to find things in lazy blocks before inserting them, packed like them:
    ``{"ids": {element id: block}, "search": [[id, where, text, block], ...]}``."""
    if not page.blocks:
        return ""
    data = orjson.dumps({"ids": page.block_of, "search": page.search}, option=orjson.OPT_SORT_KEYS)
    return Safe(f'<script type="application/gzip" id="lazy-index">{_packed(data.decode("utf-8"))}</script>')


def videos_index(page: Page) -> Safe | str:
    """Every video on the page in one table (file, length, clips, characters): the way into a memory of
    many videos, whose sections load when opened."""
    videos = page.data.videos
    if len(videos) < 2:
        return ""
    rows = [
        el(
            "tr",
            el("td", el("a", Path(v.path).name if v.path else v.id, href=f"#{anchor('video', v.id)}")),
            el("td", v.id, class_="mono"),
            el("td", page.recorded.get(v.id) or "", class_="time"),
            el("td", clock(v.end - v.start), class_="time"),
            el("td", str(v.clips_total)),
            el("td", str(len(v.characters))),
        )
        for v in videos
    ]
    return el(
        "details",
        el("summary", f"Videos on this page ({len(videos)})"),
        el(
            "table",
            el(
                "thead",
                el(
                    "tr",
                    el("th", "file"),
                    el("th", "video"),
                    el("th", "recorded"),
                    el("th", "length"),
                    el("th", "clips"),
                    el("th", "characters"),
                ),
            ),
            el("tbody", rows),
            class_="others",
        ),
        class_="videos-index",
        open=len(videos) <= 20,
    )


# ============================================================================== character cards


def card(page: Page, v: Video, ch: Character) -> Safe:
    key = (v.id, ch.id)
    thumbs = page.thumbs.get(key) or []
    faces = [el("img", src=t, alt=f"face of {ch.label}", class_="crop") for t in thumbs] or [
        avatar(page, v.id, ch, "l")
    ]
    members = [el("span", m, class_="chip member") for m in ch.members]
    voice = page.voices.get(key)
    parts: list[object] = [
        el(
            "div",
            el("div", faces, class_="crops"),
            el(
                "div",
                el("h3", ch.name or ch.id),
                el("div", ch.id if ch.name else "", class_="sub"),
                el("div", members, class_="members"),
                el("div", f"first seen {clock(ch.first_seen)} · in {len(ch.clips)} clips", class_="sub"),
            ),
            class_="card-head",
        ),
    ]
    if voice:
        parts.append(
            el(
                "div",
                el("span", "voice ", class_="lbl"),
                el("audio", controls=True, preload="metadata", src=voice, class_="voice"),
                class_="voice-row",
            )
        )
    elif ch.voice_sample is not None:
        name = ch.voice_sample[0].name
        parts.append(
            el("div", f"no voice sample: the video file {name} is not readable from here", class_="sub")
        )
    elif ch.voice_note:
        parts.append(el("div", ch.voice_note, class_="sub"))
    if ch.names:
        items = [
            el(
                "li",
                el("b", n.name),
                " — stated in ",
                link(
                    f"clip {n.clip}" + (f" at {clock(n.t)}" if n.t is not None else ""),
                    page.node_href(v.id, n.node, n.clip),
                ),
                ": ",
                el("q", n.text),
                data_s="",
            )
            for n in ch.names
        ]
        parts += [el("h4", "Names"), el("ul", items, class_="facts")]
    if ch.joins:
        rows = [el("tr", el("td", j.face), el("td", j.voice), el("td", f"{j.weight:g}")) for j in ch.joins]
        parts += [
            el("h4", "Joined face and voice ids"),
            el(
                "table",
                el("thead", el("tr", el("th", "face"), el("th", "voice"), el("th", "link weight"))),
                el("tbody", rows),
                class_="joins",
            ),
        ]
    elif len(ch.members) > 1:
        parts += [el("h4", "Members"), el("p", ", ".join(ch.members), class_="sub")]
    for title, xs in (("Attributes", ch.facts), ("Relationships", ch.relations)):
        if xs:
            parts += [el("h4", title), el("ul", [fact_item(page, v, x) for x in xs], class_="facts")]
    if ch.facts_total > len(ch.facts):
        parts.append(el("p", f"{ch.facts_total - len(ch.facts)} more attributes not shown.", class_="note"))
    around = satellites(page, v, ch)
    if around:
        parts.append(draw(ch.label, f"#{char_anchor(v.id, ch.id)}", around, ch.name or ch.id))
    shown = [k for k in ch.clips if page.href(clip_anchor(v.id, k))]
    if shown:
        parts.append(
            el(
                "div",
                "clips: ",
                [el("a", str(k), href=f"#{clip_anchor(v.id, k)}", class_="cl") for k in shown[:60]],
                f" … {len(shown) - 60} more" if len(shown) > 60 else "",
                class_="clip-links",
            )
        )
    return el("article", parts, id=char_anchor(v.id, ch.id), class_="card")


def fact_item(page: Page, v: Video, x: Line) -> Safe:
    refs = [link(f"clip {x.clip}", page.node_href(v.id, x.id, x.clip), class_="ev")]
    for e in x.evidence[:8]:
        href = page.node_href(v.id, e)
        if href:
            refs.append(link(e.removeprefix(f"{v.id}:"), href, class_="ev"))
    extra = [el("span", f" ×{x.weight:g}", class_="weight")] if x.weight > 1 else []
    return el("li", rich_text(page, v.id, x.text), extra, el("span", " — ", refs, class_="evs"), data_s="")


def _about(ch: Character, text: str) -> str:
    """A fact's text without its subject (the graph's centre), e.g. "speaks calmly" for "Ann (<character_1>)
    speaks calmly"."""
    for own in (f"{ch.name} ({ch.id})" if ch.name else None, ch.id, ch.name):
        if own and text.startswith(own):
            return text[len(own) :].strip(" :,") or text
    return text


def satellites(page: Page, v: Video, ch: Character) -> list[Satellite]:
    """What the character's graph shows: related people, then names and attributes, then joined ids."""
    related: dict[str, float] = {}
    for x in ch.relations:
        for e in x.entities + x.characters:
            other = page.character_of(v.id, e)
            if other is not None and other.id != ch.id:
                related[other.id] = related.get(other.id, 0.0) + x.weight
    out = []
    for oid in sorted(
        set(related) | set(ch.together), key=lambda k: (-related.get(k, 0.0), -ch.together.get(k, 0.0))
    ):
        other = page.characters.get((v.id, oid))
        if other is None:
            continue
        why = []
        if related.get(oid):
            why.append(f"{related[oid]:g} relationship lines")
        if ch.together.get(oid):
            why.append(f"together in {ch.together[oid]:g} lines")
        out.append(
            Satellite(
                other.label,
                f"{other.label}: {', '.join(why)}",
                page.href(char_anchor(v.id, oid)),
                related.get(oid, 0.0) + ch.together.get(oid, 0.0),
                "person",
            )
        )
    out += [
        Satellite(f"name: {n.name}", n.text, page.node_href(v.id, n.node, n.clip), 1.0, "fact")
        for n in ch.names
    ]
    out += [
        Satellite(_about(ch, x.text), x.text, page.node_href(v.id, x.id, x.clip), x.weight, "fact")
        for x in ch.facts
    ]
    out += [
        Satellite(
            f"{j.face} + {j.voice} ({j.weight:g})",
            f"{j.face} and {j.voice} joined with link weight {j.weight:g}",
            None,
            j.weight,
            "id",
        )
        for j in ch.joins
    ]
    if not ch.joins:
        out += [Satellite(m, f"{m}: perceived id of {ch.label}", None, 1.0, "id") for m in ch.members]
    return out


# ============================================================================== people across videos

#: People written into the page's DOM; the others are lazy blocks of this many.
PEOPLE_SECTION = 50
#: Per person and video: clip links and quoted lines listed (the rest are counted).
PERSON_CLIPS = 40
PERSON_LINES = 8
#: Videos listed per person (the rest are counted; each is in the videos index and the timeline).
PERSON_VIDEOS = 30


def person_anchor(pid: str) -> str:
    return anchor(pid.strip("<>"))  # <person_3> -> person_3


def person_section(page: Page, p: Any) -> Safe:
    """One person of the memory's people table across its videos: name, face and voice (from one of
    their appearances on the page), first and last seen, and per video its recording date, the
    character they are there, their clips and their lines, each linked into that video."""
    first, last = p.seen()
    # the face and voice of their first appearance that has one, shown without a second copy of the
    # bytes: the face is the card's CSS rule, the voice the card's sample, which the script lends to
    # this player when the person comes into view (its card may be in a lazy block)
    face_of = next(
        ((r["video"], r["character"]) for r in p.rows if page.thumbs.get((r["video"], r["character"]))), None
    )
    voice_of = next(
        ((r["video"], r["character"]) for r in p.rows if page.voices.get((r["video"], r["character"]))), None
    )
    label = f"{p.name} ({p.id})" if p.name else p.id
    if face_of:
        css = page.avatar_class(face_of[0], face_of[1], page.thumbs[face_of][0])
        face = el(
            "span", class_=f"av av-l av-img {css} person-face", role="img", aria_label=f"face of {label}"
        )
    else:
        face = el("span", re.sub(r"\D", "", p.id)[:3] or "?", class_="av av-l av-none", aria_hidden="true")
    parts: list[object] = [
        el(
            "div",
            face,
            el(
                "div",
                el("h3", p.name or p.id),
                el("div", p.id if p.name else "", class_="sub"),
                el("div", f"also named {', '.join(p.names[1:])}", class_="sub") if len(p.names) > 1 else "",
                el(
                    "div",
                    f"{len(p.videos)} video{'s' if len(p.videos) != 1 else ''}"
                    + (f" · first seen {_when(first)} · last seen {_when(last)}" if first else "")
                    + ("" if first else " · recording time unknown"),
                    class_="sub",
                ),
            ),
            class_="card-head",
        )
    ]
    if voice_of:
        parts.append(
            el(
                "div",
                el("span", "voice ", class_="lbl"),
                el(
                    "audio",
                    controls=True,
                    preload="none",
                    class_="person-voice",
                    data_voice_of=char_anchor(*voice_of),
                ),
                el(
                    "span",
                    f" (as {voice_of[1]} in ",
                    link(_video_name(page, voice_of[0]), page.href(char_anchor(*voice_of))),
                    ")",
                    class_="sub",
                ),
                class_="voice-row",
            )
        )
    rows = []
    on_page = {v.id: v for v in page.data.videos}
    for r in p.rows[:PERSON_VIDEOS]:
        vid, cid = r["video"], r["character"]
        v = on_page.get(vid)
        name = Path(r["path"]).name if r.get("path") else vid
        when = str(r["recorded"])[:19].replace("T", " ") if r.get("recorded") else "recording time unknown"
        head = [
            link(name, page.href(anchor("video", vid)) if v else None, class_="pv-video"),
            el("span", f" · {when} · as ", class_="sub"),
            link(cid, page.href(char_anchor(vid, cid)), class_="ent"),
        ]
        spans = r.get("spans") or []
        seconds = sum(max(0.0, float(e) - float(s)) for s, e in spans)
        head.append(el("span", f" · {len(spans)} spans, {seconds:.0f} s seen or heard", class_="sub"))
        clips = sorted(set(r.get("clips") or []))
        links = [
            el("a", str(k), href=f"#{clip_anchor(vid, k)}", class_="cl")
            for k in clips[:PERSON_CLIPS]
            if page.href(clip_anchor(vid, k))
        ]
        body: list[object] = [el("div", head)]
        if links:
            body.append(
                el(
                    "div",
                    "clips: ",
                    links,
                    f" … {len(clips) - PERSON_CLIPS} more" if len(clips) > PERSON_CLIPS else "",
                    class_="clip-links",
                )
            )
        elif v is None:
            body.append(el("div", "this video is not on this page", class_="sub"))
        said = [(c, u) for c in v.clips for u in c.utterances if u.character == cid and u.text] if v else []
        if said:
            body.append(
                el(
                    "ul",
                    [
                        el(
                            "li",
                            link(f"clip {c.index} {clock(u.start)}", _node_href(page, u.node), class_="ev"),
                            " ",
                            el("q", u.text),
                            data_s="",
                        )
                        for c, u in said[:PERSON_LINES]
                    ],
                    class_="facts",
                )
            )
            if len(said) > PERSON_LINES:
                body.append(el("p", f"{len(said) - PERSON_LINES} more lines in this video", class_="note"))
        rows.append(el("li", body, class_="pv"))
    parts += [el("h4", f"Videos ({len(p.videos)})"), el("ul", rows, class_="person-videos")]
    if len(p.rows) > PERSON_VIDEOS:
        rest = sorted({Path(r["path"]).name if r.get("path") else r["video"] for r in p.rows[PERSON_VIDEOS:]})
        parts.append(
            el(
                "p",
                f"… and {len(p.rows) - PERSON_VIDEOS} more appearances, in: {', '.join(rest[:20])}"
                + (f" and {len(rest) - 20} more files" if len(rest) > 20 else ""),
                class_="note",
            )
        )
    others = page.data.with_whom.get(p.id) or {}
    if others:
        parts.append(el("h4", "With"))
        parts.append(
            el(
                "div",
                [
                    el(
                        "span",
                        link(page.person_labels.get(o, o), page.href(person_anchor(o)), class_="who"),
                        el("span", f" ({len(ps)} video{'s' if len(ps) != 1 else ''}) ", class_="sub"),
                    )
                    for o, ps in sorted(others.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                ],
                class_="members",
            )
        )
    return el("article", parts, id=person_anchor(p.id), class_="person-card")


def _video_name(page: Page, vid: str) -> str:
    v = next((v for v in page.data.videos if v.id == vid), None)
    return Path(v.path).name if v and v.path else vid


def _node_href(page: Page, node: str) -> str | None:
    return page.href(node_anchor(node))


def _when(t: Any) -> str:
    return t.isoformat(sep=" ")[:19] if t is not None else "?"


def people_section(page: Page) -> Safe | str:
    """The memory's people across videos; nothing at all for a memory without a people table."""
    people = page.data.people
    if not people:
        return ""
    blocks = []
    for i in range(0, len(people), PEOPLE_SECTION):
        markup = el("div", [person_section(page, p) for p in people[i : i + PEOPLE_SECTION]], class_="cards")
        blocks.append(markup if i == 0 else lazy(page, markup))
    videos = len({r["video"] for r in page.data.people_rows})
    return el(
        "section",
        el("h2", "People", class_="section-title"),
        el(
            "p",
            f"{len(people)} people across {videos} videos "
            "(the memory's people table, as `m3 people` lists it).",
            class_="sub",
        ),
        blocks,
        id="people",
    )


# ============================================================================== answers


def answer_item(page: Page, i: int, rec: dict[str, Any]) -> Safe:
    video_ids = {v.id for v in page.data.videos}
    ev_items = []
    for ev in rec.get("evidence") or []:
        vid = str(ev.get("video") or "")
        clip = ev.get("clip")
        where = f"clip {clip}" + (
            f" {clock(ev.get('start'))}–{clock(ev.get('end'))}" if ev.get("start") is not None else ""
        )
        if vid not in video_ids:
            where += f" of video {vid} (not in this report)"
        chars = []
        for c in ev.get("characters") or []:
            ch = page.character_of(vid, c.get("id"))
            label = f"{c.get('name')} ({c.get('id')})" if c.get("name") else str(c.get("id"))
            chars.append(
                link(
                    el("span", avatar(page, vid, ch), label) if ch else label,
                    page.href(char_anchor(vid, ch.id)) if ch else None,
                    class_="who",
                )
            )
        nodes = [
            link(str(n).removeprefix(f"{vid}:"), page.node_href(vid, str(n), clip), class_="ev")
            for n in (ev.get("node_ids") or [])[:12]
        ]
        ev_items.append(
            el(
                "li",
                link(
                    where,
                    page.href(clip_anchor(vid, int(clip))) if isinstance(clip, int) else None,
                    class_="ev-clip",
                ),
                " ",
                chars,
                el("div", el("q", rich_text(page, vid, str(ev.get("quote") or ""))), class_="quote"),
                el("div", "lines: ", nodes, class_="evs") if nodes else "",
                data_s="",
            )
        )
    rounds = []
    for step in rec.get("trajectory") or []:
        results = []
        for r in (step.get("results") or [])[:20]:
            vid = next(
                (v for v in video_ids if str(r.get("id", "")).startswith(f"{v}:")), rec.get("video") or ""
            )
            results.append(
                el(
                    "li",
                    link(
                        str(r.get("alias") or r.get("id")),
                        page.node_href(vid, str(r.get("id")), r.get("clip")),
                        class_="ev",
                    ),
                    " ",
                    str(r.get("text") or ""),
                )
            )
        head = f"Round {step.get('round')}: {step.get('action') or step.get('tool') or 'no action'}"
        body = [
            el("div", el("b", "reasoning "), str(step["reasoning"])) if step.get("reasoning") else "",
            el("div", el("b", "query "), str(step["query"])) if step.get("query") else "",
            el("div", el("b", "saw "), str(step["observation"])) if step.get("observation") else "",
            el("div", el("b", "rejected "), str(step["error"]), class_="bad") if step.get("error") else "",
            el("ul", results, class_="results") if results else "",
        ]
        rounds.append(
            el(
                "details",
                el("summary", head, el("span", f" {step.get('query') or ''}", class_="sub")),
                body,
                class_="round",
            )
        )
    failed = rec.get("error")
    answer_video = next(
        (str(ev.get("video")) for ev in rec.get("evidence") or [] if str(ev.get("video")) in video_ids),
        str(rec.get("video") or ""),
    )
    answer = rec.get("answer")
    return el(
        "article",
        el("h3", el("span", "Q ", class_="lbl"), rec.get("question") or ""),
        el(
            "p",
            el("span", "A ", class_="lbl"),
            rich_text(page, answer_video, str(answer)) if answer is not None else "(no answer)",
            class_="answer-text",
        ),
        el("p", f"error: {failed}", class_="bad") if failed else "",
        el(
            "div",
            f"{rec.get('mode', '')} · {rec.get('rounds', 0)} rounds · "
            f"{float(rec.get('latency_s') or 0):.2f} s" + (f" · {rec['model']}" if rec.get("model") else ""),
            class_="sub",
        ),
        el("h4", f"Evidence ({len(ev_items)})") if ev_items else "",
        el("ol", ev_items, class_="evidence") if ev_items else "",
        el("h4", f"Rounds ({len(rounds)})") if rounds else "",
        rounds,
        id=f"answer-{i}",
        class_="answer",
        data_s="",
    )


# ============================================================================== page


def others_list(data: ReportData) -> Safe | str:
    """The videos not on this page, each with the command that writes its page."""
    if not data.others:
        return ""
    rows = [
        el(
            "tr",
            el("td", o.id, class_="mono"),
            el("td", Path(o.path).name if o.path else ""),
            el("td", str(o.clips)),
            el("td", el("code", f"m3 report {data.memory} --video {o.id} -o {o.id}.html")),
        )
        for o in data.others
    ]
    more = data.others_total - len(data.others)
    return el(
        "details",
        el("summary", f"Videos not on this page ({data.others_total})"),
        el(
            "table",
            el(
                "thead",
                el("tr", el("th", "video"), el("th", "file"), el("th", "clips"), el("th", "its page")),
            ),
            el("tbody", rows),
            class_="others",
        ),
        el("p", f"… and {more} more", class_="sub") if more > 0 else "",
        data_s="",
    )


def render(
    data: ReportData,
    thumbs: dict[tuple[str, str], list[str]],
    voices: dict[tuple[str, str], str],
    answers_total: int = 0,
    progress: Callable[[str], None] | None = None,
    frames: dict[tuple[str, int, int], str] | None = None,
) -> str:
    page = Page(data, thumbs, voices, frames or {})
    page.recorded = {
        r["video"]: str(r["recorded"])[:19].replace("T", " ") for r in data.people_rows if r.get("recorded")
    }
    videos = [video_section(page, v, i < EAGER_VIDEOS) for i, v in enumerate(data.videos)]
    cards = []
    for i, v in enumerate(data.videos):
        body = (
            el("div", [card(page, v, ch) for ch in v.characters], class_="cards")
            if v.characters
            else el("p", "No characters in this video.", class_="empty")
        )
        cards.append(
            el(
                "section",
                el(
                    "h2",
                    Path(v.path).name if v.path else v.id,
                    el("span", f" · {len(v.characters)} characters", class_="sub"),
                ),
                body if i < EAGER_VIDEOS else lazy(page, body),
                class_="video-cards" + ("" if i < EAGER_VIDEOS else " lazy-video"),
                id=anchor("cards", v.id),
            )
        )
    people = people_section(page)
    answers = [answer_item(page, i, rec) for i, rec in enumerate(data.answers)]
    notes = list(data.notes)
    if answers_total > len(data.answers):
        notes.append(f"{answers_total} answers in the file; the first {len(data.answers)} are shown.")
    counts = data.counts
    nav = el(
        "nav",
        el("a", "Timeline", href="#timeline"),
        el("a", f"People ({len(data.people)})", href="#people") if data.people else "",
        el("a", "Characters", href="#characters"),
        el("a", f"Answers ({len(data.answers)})", href="#answers") if data.answers else "",
        el(
            "input",
            type="search",
            id="search",
            placeholder="Search memory text…",
            autocomplete="off",
            aria_label="search memory text",
        ),
        el("span", "", id="search-count", class_="sub"),
    )
    header = el(
        "header",
        el("h1", "m3 memory report"),
        el(
            "div",
            data.memory,
            " · ",
            f"{counts.get('nodes', 0)} nodes · {counts.get('clips', 0)} clips · "
            f"{counts.get('entities', 0)} entities"
            f" · {data.videos_total} videos · embedder {data.meta.get('embed_model', '?')}",
            class_="sub",
        ),
        nav,
    )
    body = join(
        [
            header,
            el("div", [el("p", n) for n in notes], others_list(data), class_="notes") if notes else "",
            el(
                "div",
                el("h2", "Search results"),
                el("ol", "", id="results"),
                id="search-results",
                hidden=True,
            ),
            el(
                "main",
                el(
                    "section",
                    el("h2", "Timeline", class_="section-title"),
                    videos_index(page),
                    videos,
                    id="timeline",
                ),
                people,
                el("section", el("h2", "Characters", class_="section-title"), cards, id="characters"),
                el("section", el("h2", "Answers", class_="section-title"), answers, id="answers")
                if answers
                else "",
            ),
            el(
                "footer",
                f"written by m3 {data.meta.get('m3_version', '')} · "
                f"memory schema {data.meta.get('schema', '')}",
            ),
            search_index(page),
        ]
    )
    return Template(_asset("report.html")).substitute(
        title=esc(f"m3 report · {Path(data.memory).name}"),
        css=_asset("report.css") + "\n" + page.avatar_css(),
        js=_asset("report.js"),
        body=body,
    )
