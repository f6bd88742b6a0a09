"""A character's facts and relations as a small SVG graph, laid out and drawn here (no library, no network).

The character sits on the left; the people it relates to, its facts and its face and voice ids sit in a
column on the right, each joined to the character by a line as thick as the link's weight (relations
first, then facts, then ids). A column rather than a ring because the graph lives in a narrow card: its
labels must stay readable when the SVG is scaled to the card's width. Every satellite is a link to what
it rests on (the other character's card, the fact's line in its clip) and carries its full text as a
tooltip, since labels are shortened to fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.report.markup import Safe, el

WIDTH = 360
ROW = 24
TOP = 18
CENTRE_X = 56
COLUMN_X = 150
LABEL_CHARS = 32
MAX_SATELLITES = {"person": 6, "fact": 8, "id": 4}
ORDER = ("person", "fact", "id")


@dataclass
class Satellite:
    label: str
    title: str
    href: str | None
    weight: float
    kind: str  # "person", "fact" or "id" (a face or voice id joined into the character)


def _short(text: str, n: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _stroke(weight: float) -> str:
    return f"{1.0 + 3.0 * min(1.0, max(0.0, weight) / 5.0):.1f}"


def draw(center: str, center_href: str, satellites: list[Satellite], short: str | None = None) -> Safe:
    """The SVG element for one character (``center`` is its label, ``short`` the few words drawn under
    it, ``center_href`` its card)."""
    shown = [s for kind in ORDER for s in [x for x in satellites if x.kind == kind][: MAX_SATELLITES[kind]]]
    height = max(2 * TOP + ROW * max(len(shown) - 1, 0), 90)
    cy = height / 2
    edges, nodes = [], []
    for i, s in enumerate(shown):
        y = TOP + i * ROW if len(shown) > 1 else cy
        edges.append(
            el(
                "path",
                d=f"M{CENTRE_X},{cy:.1f} C{(CENTRE_X + COLUMN_X) / 2:.1f},{cy:.1f} "
                f"{(CENTRE_X + COLUMN_X) / 2:.1f},{y:.1f} {COLUMN_X},{y:.1f}",
                class_=f"g-edge g-{s.kind}",
                stroke_width=_stroke(s.weight),
                fill="none",
            )
        )
        body = [
            el("title", s.title),
            el("circle", cx=str(COLUMN_X), cy=f"{y:.1f}", r="5", class_=f"g-node g-{s.kind}"),
            el("text", _short(s.label), x=str(COLUMN_X + 9), y=f"{y + 4:.1f}"),
        ]
        nodes.append(el("a", body, href=s.href, class_="g-link") if s.href else el("g", body))
    centre = el(
        "a",
        el("title", center),
        el("circle", cx=str(CENTRE_X), cy=f"{cy:.1f}", r="16", class_="g-center"),
        el(
            "text",
            _short(short or center, 16),
            x=str(CENTRE_X),
            y=f"{cy + 30:.1f}",
            text_anchor="middle",
            class_="g-center-label",
        ),
        href=center_href,
    )
    if not shown:
        nodes.append(
            el("text", "no facts or relations yet", x=str(COLUMN_X), y=f"{cy + 4:.1f}", class_="g-empty")
        )
    return el(
        "svg",
        el("g", edges),
        centre,
        el("g", nodes),
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {height:.0f}",
        class_="graph",
        role="img",
        aria_label=f"facts and relations of {center}",
    )
