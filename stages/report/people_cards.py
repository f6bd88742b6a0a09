"""The People section: each person of the memory's people table across its videos (face, voice, first
and last seen, and per video the character they are there, their clips and their lines).

One job: the people-across-videos section. It is separate from :mod:`.cards` because a person spans
videos while a card is one video's character; it borrows the cards' face and voice instead of copying them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from m3cli.stages.report.lazy import lazy
from m3cli.stages.report.markup import Safe, anchor, clock, el
from m3cli.stages.report.page import (
    Page,
    char_anchor,
    clip_anchor,
    link,
    node_anchor,
    person_anchor,
)

# ============================================================================== people across videos

#: People written into the page's DOM; the others are lazy blocks of this many.
PEOPLE_SECTION = 50
#: Per person and video: clip links and quoted lines listed (the rest are counted).
PERSON_CLIPS = 40
PERSON_LINES = 8
#: Videos listed per person (the rest are counted; each is in the videos index and the timeline).
PERSON_VIDEOS = 30


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
    profile = page.data.profiles.get(p.id)
    if profile:  # written by an LLM from their lines (`m3 people summarize`), so labelled as such
        parts.append(
            el(
                "p",
                el("span", "profile ", class_="lbl"),
                profile["text"],
                el(
                    "span",
                    f" (written by {profile['model']} from {len(profile['evidence'])} cited lines)",
                    class_="sub",
                ),
                class_="person-profile",
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
