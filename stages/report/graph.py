"""A character's facts and relations as a small SVG graph, laid out and drawn here (no library, no network).

The character sits in the middle; the people it relates to sit on the right half of a ring and its
facts on the left, each joined to the centre by a line as thick as the link's weight. Every satellite
is a link to what it rests on (the fact's line in its clip, the other character's card), and carries its
full text as a tooltip, since labels are shortened to fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from m3cli.stages.report.markup import Safe, el

WIDTH, HEIGHT = 520, 300
LABEL_CHARS = 30


@dataclass
class Satellite:
    label: str
    title: str
    href: str | None
    weight: float
    kind: str  # "fact" or "person"


def _short(text: str, n: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _positions(count: int, side: int) -> list[tuple[float, float]]:
    """Points on a half ring (side=-1 left, +1 right) around the centre, spread evenly top to bottom."""
    cx, cy = WIDTH / 2, HEIGHT / 2
    rx, ry = WIDTH / 2 - 110, HEIGHT / 2 - 30
    out = []
    for i in range(count):
        a = math.pi * (i + 1) / (count + 1)  # 0..pi from top to bottom
        out.append((cx + side * rx * math.sin(a), cy - ry * math.cos(a)))
    return out


def draw(center: str, center_href: str, satellites: list[Satellite]) -> Safe:
    """The SVG element for one character."""
    facts = [s for s in satellites if s.kind == "fact"][:8]
    people = [s for s in satellites if s.kind == "person"][:8]
    cx, cy = WIDTH / 2, HEIGHT / 2
    edges, nodes = [], []
    for group, side in ((facts, -1), (people, 1)):
        for s, (x, y) in zip(group, _positions(len(group), side), strict=True):
            width = 1.0 + 2.5 * min(1.0, max(0.0, s.weight) / 5.0)
            edges.append(
                el(
                    "line",
                    x1=f"{cx:.1f}",
                    y1=f"{cy:.1f}",
                    x2=f"{x:.1f}",
                    y2=f"{y:.1f}",
                    class_=f"g-edge g-{s.kind}",
                    stroke_width=f"{width:.1f}",
                )
            )
            anchor_side = "end" if side < 0 else "start"
            dx = -8 if side < 0 else 8
            body = [
                el("title", s.title),
                el("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r="6", class_=f"g-node g-{s.kind}"),
                el("text", _short(s.label), x=f"{x + dx:.1f}", y=f"{y + 4:.1f}", text_anchor=anchor_side),
            ]
            nodes.append(el("a", body, href=s.href, class_="g-link") if s.href else el("g", body))
    centre = el(
        "a",
        el("circle", cx=f"{cx:.1f}", cy=f"{cy:.1f}", r="22", class_="g-center"),
        el(
            "text",
            _short(center, 18),
            x=f"{cx:.1f}",
            y=f"{cy + 40:.1f}",
            text_anchor="middle",
            class_="g-center-label",
        ),
        href=center_href,
    )
    if not facts and not people:
        nodes.append(
            el(
                "text",
                "no facts or relations yet",
                x=f"{cx:.1f}",
                y=f"{cy - 34:.1f}",
                text_anchor="middle",
                class_="g-empty",
            )
        )
    return el(
        "svg",
        el("g", edges),
        centre,
        el("g", nodes),
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        class_="graph",
        role="img",
        aria_label=f"facts and relations of {center}",
    )
