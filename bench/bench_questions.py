"""What people ask, and what the offline answerer does with it: M3-Bench's questions by form.

Reads the M3-Bench annotations (robot and web: 4,490 questions with their types; no videos needed) and
routes every question the way `m3 ask` does without an LLM (:func:`m3cli.stages.ask.route.route`).
Per M3-Bench type it reports the share routed to a handler that answers from the memory's structure,
the share answered by quoting the line of speech the answer lies in (the reader takes it from there),
the share declined with a stated reason ("needs an LLM: ...", "needs what people and things look
like"), and the rest, answered by the nearest lines only. Then the most common forms and reasons.

    python -m bench.bench_questions ../shared/media/m3bench            # markdown tables
    python -m bench.bench_questions ../shared/media/m3bench --json     # the same as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from m3cli.stages.ask.route import route

#: forms whose handler answers from the memory's structure (who spoke, when, how many, what was seen…)
STRUCTURAL = {
    "count_people", "count_times", "count_turns", "count_said", "order", "who_times", "when",
    "what_said", "who_said", "at_time", "cross", "seen", "who_visible", "text", "summary", "who_in",
    "who_speaks", "said_all", "language", "duration", "with_whom", "who_is",
}  # fmt: skip


def load(folder: Path) -> list[tuple[str, str, list[str]]]:
    """(split, question, types) for every question of robot.json and web.json."""
    out = []
    for split in ("robot", "web"):
        data = json.loads((folder / f"{split}.json").read_text("utf-8"))
        for video in data.values():
            for qa in video["qa_list"]:
                types = qa.get("type") or []
                out.append((split, qa["question"], [types] if isinstance(types, str) else list(types)))
    return out


def outcome(question: str) -> tuple[str, str]:
    """("routed", form) | ("quoted", "quote") | ("declined", reason) | ("nearest lines", "")."""
    form = route(question)
    if form.kind in STRUCTURAL:
        return "routed", form.kind
    if form.kind == "quote":
        return "quoted", form.kind
    if form.kind == "decline":
        return "declined", form.detail
    return "nearest lines", ""


def table(rows: list[tuple[str, str, list[str]]]) -> dict:
    per_type: dict[str, Counter] = defaultdict(Counter)
    forms: Counter = Counter()
    reasons: Counter = Counter()
    for split, q, types in rows:
        what, detail = outcome(q)
        for t in [*types, "ALL"]:
            per_type[t][what] += 1
            per_type[f"{t} ({split})"][what] += 1
        if what == "routed":
            forms[detail] += 1
        elif what == "declined":
            reasons[detail] += 1
    return {"types": per_type, "forms": forms, "reasons": reasons, "n": len(rows)}


def markdown(res: dict) -> str:
    lines = [
        f"M3-Bench questions (robot + web): {res['n']}",
        "",
        "| M3-Bench type | n | routed to a structural handler | the line said, quoted | declined with a stated reason "  # noqa: E501
        "| nearest lines only |",
        "|---|---|---|---|---|---|",
    ]
    types = res["types"]
    order = ["ALL"] + sorted(t for t in types if "(" not in t and t != "ALL")
    for t in order:
        c = types[t]
        n = sum(c.values())
        cells = [f"{c[k]} ({100 * c[k] / n:.1f}%)" for k in ("routed", "quoted", "declined", "nearest lines")]
        lines.append(f"| {t} | {n} | " + " | ".join(cells) + " |")
    lines += ["", "| routed form | questions |", "|---|---|"]
    lines += [f"| {f} | {n} |" for f, n in res["forms"].most_common()]
    lines += ["", "| stated reason | questions |", "|---|---|"]
    lines += [f"| {r} | {n} |" for r, n in res["reasons"].most_common()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="folder holding robot.json and web.json")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = table(load(args.folder))
    if args.json:
        out = {
            "n": res["n"],
            "types": {t: dict(c) for t, c in res["types"].items()},
            "forms": dict(res["forms"]),
            "reasons": dict(res["reasons"]),
        }
        print(json.dumps(out, indent=1))
    else:
        print(markdown(res))


if __name__ == "__main__":
    main()
