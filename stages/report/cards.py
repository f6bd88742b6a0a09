"""A video's character cards: faces, voice sample, names and where each was stated, joined face and
voice ids, attributes, relationships, the character's graph and the clips they are in.

One job: the Characters section's cards. It is separate from the timeline (which links to the cards)
and from the people section (a person across videos, not a character of one video).
"""

from __future__ import annotations

from m3cli.stages.report.graph import Satellite, draw
from m3cli.stages.report.markup import Safe, clock, el
from m3cli.stages.report.page import (
    Page,
    avatar,
    char_anchor,
    clip_anchor,
    link,
    rich_text,
)
from m3cli.stages.report.records import Character, Line, Video

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
