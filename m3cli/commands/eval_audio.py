"""`m3 eval diarization` and `m3 eval asr`: score the speech stages on audio with ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from m3cli import context
from m3cli.terminal import echo, safe

DIAR_EPILOG = """\b
Examples:
  m3 eval diarization dev00.wav dev01.wav --rttm debug.development.rttm --uem debug.development.uem
  m3 eval diarization tests/data/fixture.mp4 --rttm tests/data/fixture.rttm --json
  m3 eval diarization meeting.wav --rttm meeting.rttm --speakers 4 --collar 0
  m3 eval diarization dev00.wav --rttm debug.development.rttm --diarizer cluster --speaker-backend resemblyzer
"""

ASR_EPILOG = """\b
Examples:
  m3 eval asr tests/data/jfk.wav --ref tests/data/jfk.ref.txt
  m3 eval asr talk.mp4 --ref talk.txt --asr-model ~/models/whisper-small-ct2 --json
"""


def _run_context(ctx: typer.Context, device: str | None):

    settings = context.settings(ctx, device=device)
    return context.run_context(ctx, settings)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), *(line(r) for r in rows)])


def diarization(
    ctx: typer.Context,
    media_files: list[Path] = typer.Argument(
        ...,
        help="Audio or video files; each is scored against the RTTM turns of its file stem.",
    ),
    rttm: Path = typer.Option(
        ...,
        "--rttm",
        help="Reference RTTM (SPEAKER lines; file id = media file stem).",
    ),
    uem: Path | None = typer.Option(None, "--uem", help="UEM file: only these regions are scored."),
    collar: float = typer.Option(
        0.25,
        "--collar",
        help="No-score collar (s) each side of reference boundaries (md-eval -c).",
    ),
    speakers: int | None = typer.Option(
        None,
        "--speakers",
        help="Tell the diarizer the exact number of speakers.",
    ),
    max_speakers: int | None = typer.Option(
        None,
        "--max-speakers",
        help="Tell the diarizer the most speakers to find.",
    ),
    cluster_threshold: float = typer.Option(
        0.3,
        "--cluster-threshold",
        help="Cosine distance at which clusters stop merging.",
    ),
    vad: str = typer.Option("silero", "--vad", help="silero, faster-whisper or none."),
    diarizer: str | None = typer.Option(
        None, "--diarizer", help="overlap (default), cluster or pyannote, as in `m3 diarize`."
    ),
    speaker_backend: str = typer.Option(
        "resemblyzer", "--speaker-backend", help="Embedding for --diarizer cluster: resemblyzer or campplus."
    ),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Diarization error rate of `m3 diarize` (turns, and the final utterances) against RTTM.

    Turns may overlap (two speakers at once), and overlapped reference speech is scored: a second
    speaker missed there counts as missed speech. ``overlap`` in the JSON gives, per file, the seconds
    of reference speech with two or more speakers and how much of it the turns also mark as overlap."""
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.diarize import ClusterConfig, DiarizeConfig, diarize_file
    from m3cli.stages.eval.audio import (
        DerResult,
        diarization_error,
        overlap_agreement,
        read_rttm,
        read_uem,
        untranscribed,
    )

    refs = read_rttm(rttm)
    uems = read_uem(uem) if uem else {}
    config = DiarizeConfig(
        vad=vad,
        diarizer=diarizer,
        speaker_backend=speaker_backend,
        max_speakers=max_speakers,
        num_speakers=speakers,
        cluster=ClusterConfig(threshold=cluster_threshold),
    )
    run = _run_context(ctx, device)
    results = []
    sums: dict[str, list[float]] = {"turns": [0.0] * 4, "utterances": [0.0] * 4}
    lost = 0.0
    for path in run.progress(media_files, desc="eval diarization", total=len(media_files)):
        uri = path.stem
        if uri not in refs:
            raise InputError(f"{rttm}: no SPEAKER lines for file id {uri!r} (has: {', '.join(sorted(refs))})")
        res = diarize_file(path, config, run)
        hyps = {
            "turns": [(t.start, t.end, t.speaker) for t in res.turns],
            "utterances": [(u["start"], u["end"], u["speaker_local"]) for u in res.utterances],
        }
        entry = {
            "file": str(path),
            "uri": uri,
            "ref_speakers": len({t[2] for t in refs[uri]}),
            "overlap": overlap_agreement(refs[uri], hyps["turns"], uems.get(uri)),
            "untranscribed": untranscribed(hyps["turns"], hyps["utterances"], refs[uri], uems.get(uri)),
        }
        for source, hyp in hyps.items():
            d: DerResult = diarization_error(refs[uri], hyp, uems.get(uri), collar=collar)
            entry[source] = {**d.as_dict(), "hyp_speakers": len({h[2] for h in hyp})}
            for i, v in enumerate((d.missed, d.false_alarm, d.confusion, d.total)):
                sums[source][i] += v
        results.append(entry)
        lost += entry["untranscribed"]
    overall = {src: round(sum(v[:3]) / v[3], 6) if v[3] else 0.0 for src, v in sums.items()}
    if as_json:
        out = {"collar": collar, "files": results, "overall_der": overall, "untranscribed": round(lost, 3)}
        typer.echo(json.dumps(out, indent=2))
        return
    rows = []
    for e in results:
        for src in ("turns", "utterances"):
            d = e[src]
            rows.append(
                [
                    safe(e["uri"]),
                    src,
                    f"{100 * d['der']:.1f}%",
                    f"{d['missed']:.2f}",
                    f"{d['false_alarm']:.2f}",
                    f"{d['confusion']:.2f}",
                    f"{d['total']:.2f}",
                    f"{e['ref_speakers']}/{d['hyp_speakers']}",
                    f"{e['untranscribed']:.2f}" if src == "utterances" else "",
                ]
            )
    for src in ("turns", "utterances"):
        m, f, c, t = sums[src]
        cells = ["ALL", src, f"{100 * overall[src]:.1f}%", f"{m:.2f}", f"{f:.2f}", f"{c:.2f}", f"{t:.2f}", ""]
        rows.append([*cells, f"{lost:.2f}" if src == "utterances" else ""])
    header = ["file", "from", "DER", "missed", "false_al", "confusion", "speech", "spk ref/hyp", "untranscr"]
    echo(_table(header, rows))
    echo(
        f"(collar ±{collar} s; seconds of scored reference speech; untranscr: seconds of reference speech "
        "in turns but in no utterance)"
    )


def asr(
    ctx: typer.Context,
    media_file: Path = typer.Argument(..., help="Audio or video file."),
    ref: Path = typer.Option(..., "--ref", help="Reference transcript (plain text)."),
    model: str | None = typer.Option(
        None,
        "--model",
        "--asr-model",
        help="ASR model: a CTranslate2 Whisper directory or a cached name (default: bundled tiny.en).",
    ),
    language: str | None = typer.Option(None, "--language", help="Spoken language code."),
    vad: str = typer.Option("silero", "--vad", help="silero, faster-whisper or none."),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Word error rate of `m3 diarize`'s transcript (lowercased, punctuation stripped) against a reference."""
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.diarize import DiarizeConfig, diarize_file
    from m3cli.stages.eval.audio import untranscribed, word_error

    try:
        reference = ref.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{ref}: cannot read the reference transcript: {exc}") from None
    res = diarize_file(
        media_file, DiarizeConfig(model=model, language=language, vad=vad), _run_context(ctx, device)
    )
    hypothesis = " ".join(u["text"] for u in res.utterances)
    w = word_error(reference, hypothesis)
    lost = untranscribed(
        [(t.start, t.end, t.speaker) for t in res.turns],
        [(u["start"], u["end"], u["speaker_local"]) for u in res.utterances],
    )
    if as_json:
        typer.echo(json.dumps({"file": str(media_file), **w.as_dict(), "untranscribed": lost}, indent=2))
        return
    echo(
        _table(
            ["file", "WER", "sub", "del", "ins", "ref words", "untranscr"],
            [
                [
                    safe(media_file.name),
                    f"{100 * w.wer:.1f}%",
                    str(w.substitutions),
                    str(w.deletions),
                    str(w.insertions),
                    str(w.reference_words),
                    f"{lost:.2f}",
                ]
            ],
        )
    )
    echo(f"hypothesis: {safe(w.hypothesis)}")
    echo("(untranscr: seconds of speaker turns in no utterance)")


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("diarization", epilog=DIAR_EPILOG)(diarization)
    eval_app.command("asr", epilog=ASR_EPILOG)(asr)
