"""A video's section: heading, summary, timeline (clips along time, a row per character with visible
and speaking spans), and each clip's details (memory lines, utterances, keyframes); and the index of
every video on the page.

One job: the timeline section of the page. It is separate from the cards, people and answers sections,
which link into it but share none of its markup.
"""

from __future__ import annotations

from pathlib import Path

from m3cli.stages.report.lazy import SECTION_CLIPS, lazy
from m3cli.stages.report.markup import SAFE_URL, Safe, anchor, clock, el, join
from m3cli.stages.report.page import (
    Page,
    clip_anchor,
    link,
    node_anchor,
    person,
    rich_text,
)
from m3cli.stages.report.records import Clip, Line, Video

KIND_LABEL = {
    "episodic": "episodic",
    "semantic": "semantic",
    "clip": "clip summary",
    "character": "character",
    "relationship": "relationship",
    "conflict": "conflict",
    "global": "video",
}


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
