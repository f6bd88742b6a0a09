"""The page: gathered :class:`~m3cli.stages.report.records.ReportData` -> one self-contained HTML string.

Sections: a timeline per video (clips along time, a row per character with visible and speaking spans;
each clip opens its memory and utterances), character cards, answers with their evidence and every
round, and a search box. All markup comes from :mod:`~m3cli.stages.report.markup` (escaping by
construction); the page shell, CSS and JS are package data in ``assets/``. A link is only written when
its target is on the page, so every in-page link resolves.

One job: the page shell (header, navigation, notes, sections in order, footer, assets). Each section
has its own module (:mod:`.timeline`, :mod:`.cards`, :mod:`.people_cards`, :mod:`.answer_items`), on
the shared :mod:`.page` and :mod:`.lazy`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from string import Template

from m3cli.stages.report.answer_items import answer_item
from m3cli.stages.report.cards import card
from m3cli.stages.report.lazy import EAGER_VIDEOS, lazy, search_index
from m3cli.stages.report.markup import Safe, anchor, el, esc, join
from m3cli.stages.report.page import (
    Page,
)
from m3cli.stages.report.people_cards import people_section
from m3cli.stages.report.records import ReportData
from m3cli.stages.report.timeline import video_section, videos_index


def _asset(name: str) -> str:
    assets = resources.files("m3cli.stages.report").joinpath("assets")
    return assets.joinpath(name).read_text(encoding="utf-8")


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
