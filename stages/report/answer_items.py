"""The Answers section: each `m3 ask` answer with its evidence (clips, characters, quotes, lines) and
every round of the loop that found it.

One job: rendering answer records. Reading them from the file is :mod:`.answers`; this module only
turns a read record into markup linked into the timeline and cards.
"""

from __future__ import annotations

from typing import Any

from m3cli.stages.report.markup import Safe, clock, el
from m3cli.stages.report.page import (
    Page,
    avatar,
    char_anchor,
    clip_anchor,
    link,
    rich_text,
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
