"""`m3 link`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | m3 faces | m3 memorize | m3 link | jq -c .characters
  m3 link --p 0.7 memorized.jsonl -o linked.jsonl
  cat linked.jsonl new_clips.jsonl | m3 link > relinked.jsonl
  m3 link --method meta memorized.jsonl      # M3-Agent's meta-clips (ablation)
  m3 link --llm-only memorized.jsonl | jq -c '.link.edges'
  m3 link --no-split-voices memorized.jsonl   # keep the diarizer's voices as they are

\b
Evidence (--method seen, the default): seconds in which a face's mouth moves while a voice is
active, from the mouth openings and shot changes `m3 faces` records; a voice's time is cut at clip
ends and shot changes. --method meta: one vote per <= --window s window holding exactly one face
and one voice (M3-Agent's Algorithm 2; weight-1 edges dropped by default).
"""


def link(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    method: str = typer.Option(
        "seen", "--method", help="Face-voice evidence: seen (who is seen speaking) or meta (meta-clips)."
    ),
    p: float = typer.Option(0.5, "--p", help="Share of a node's votes its top edge needs (Algorithm 2)."),
    min_weight: float | None = typer.Option(
        None,
        "--min-weight",
        help="Edges lighter than this are noise [seen: 1 s of evidence; meta: 2 windows].",
        show_default=False,
    ),
    window: float = typer.Option(5.0, "--window", help="meta: longest meta-clip window, seconds."),
    min_overlap: float = typer.Option(
        0.5, "--min-overlap", help="meta: seconds a face/voice must be present in a window to count."
    ),
    moving: float = typer.Option(
        0.02, "--moving", help="seen: mouth-opening spread (eye distances) that counts as moving lips."
    ),
    llm_weight: float = typer.Option(
        1.0, "--llm-weight", help="Weight of one LLM 'Equivalence' line (seconds under seen; 0 ignores them)."
    ),
    llm_only: bool = typer.Option(
        False, "--llm-only", "--no-meta", help="Only LLM equivalences vote (no perception evidence)."
    ),
    split_voices: bool = typer.Option(
        True,
        "--split-voices/--no-split-voices",
        help="seen: split a voice that two faces are each seen speaking alone (see the README).",
    ),
    recompute: bool = typer.Option(
        False, "--recompute", help="Recompute every clip's votes instead of reusing link.votes."
    ),
) -> None:
    """Link faces and voices into <character_k> ids by voting over the whole video."""
    from m3cli.stages.link import LinkConfig, link_records

    context.settings(ctx)
    config = LinkConfig(
        method=method,
        p=p,
        min_weight=min_weight,
        window=window,
        min_overlap=min_overlap,
        moving=moving,
        llm_weight=llm_weight,
        perception=not llm_only,
        split_voices=split_voices,
    )
    records = stream.read_records(inputs or ["-"])
    stream.write_records(link_records(records, config, reuse=not recompute), output)


RANK = 60


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(link)
