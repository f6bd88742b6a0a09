"""`m3 eval diarization` and `m3 eval asr`: score the speech stages on audio with ground truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from m3cli import context, options
from m3cli.stages.configs.diarize import ClusterConfig, DiarizeConfig
from m3cli.terminal import echo, safe

if TYPE_CHECKING:
    from m3cli.stages.eval.audio import EvalItem

DIAR_EPILOG = """\b
Examples:
  m3 eval diarization dev00.wav dev01.wav --rttm debug.development.rttm --uem debug.development.uem
  m3 eval diarization tests/data/fixture.mp4 --rttm tests/data/fixture.rttm --json
  m3 eval diarization meeting.wav --rttm meeting.rttm --speakers 4 --collar 0
  m3 eval diarization dev00.wav --rttm debug.development.rttm --diarizer cluster --speaker-backend resemblyzer
  m3 eval diarization dev00.wav dev01.wav --rttm debug.development.rttm --asr-model base
  m3 eval diarization --manifest tests/data/diarization_dev.manifest --media-root ../shared/media --turns-only
"""

ASR_EPILOG = """\b
Examples:
  m3 eval asr tests/data/jfk.wav --ref tests/data/jfk.ref.txt
  m3 eval asr ../shared/media/diarization/sample.wav --ref ../shared/media/diarization/sample.stm
  m3 eval asr talk.mp4 --ref talk.txt --asr-model base --json      # multilingual Whisper base
  m3 eval asr talk.mp4 --ref talk.txt --asr-model ~/models/whisper-small-ct2 --json
"""


VAD_HELP = "silero, faster-whisper or none."


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
        None,
        help="Audio or video files or folders; each is scored against the RTTM turns of its file stem.",
    ),
    rttm: Path | None = typer.Option(
        None,
        "--rttm",
        help="Reference RTTM for the media arguments (SPEAKER lines; file id = media file stem).",
    ),
    uem: Path | None = typer.Option(None, "--uem", help="UEM file: only these regions are scored."),
    group: str = typer.Option("all", "--group", help="Group name of the media arguments in the table."),
    manifest: Path | None = typer.Option(
        None,
        "--manifest",
        help="Recordings to score, one per line: `group media rttm [uem]` (see tests/data/*.manifest).",
    ),
    media_root: Path | None = typer.Option(
        None, "--media-root", help="Folder that a manifest's `{media}/` paths start from."
    ),
    turns_only: bool = typer.Option(
        False, "--turns-only", help="Score only speaker turns (no speech recognition: several times faster)."
    ),
    collar: float = typer.Option(
        0.25,
        "--collar",
        help="No-score collar (s) each side of reference boundaries (md-eval -c).",
    ),
    speakers: int | None = options.stage_option(
        DiarizeConfig, "num_speakers", help="Tell the diarizer the exact number of speakers."
    ),
    max_speakers: int | None = options.stage_option(
        DiarizeConfig, "max_speakers", help="Tell the diarizer the most speakers to find."
    ),
    cluster_threshold: float = options.stage_option(
        ClusterConfig, "threshold", help="Cosine distance at which clusters stop merging."
    ),
    vad: str = options.stage_option(DiarizeConfig, "vad", help=VAD_HELP),
    diarizer: str | None = options.stage_option(
        DiarizeConfig, "diarizer", help="overlap (default), cluster or pyannote, as in `m3 diarize`."
    ),
    speaker_backend: str = options.stage_option(DiarizeConfig, "speaker_backend"),
    model: str | None = options.stage_option(
        DiarizeConfig,
        "model",
        help="ASR model of the utterances: a CTranslate2 Whisper directory, base (multilingual Whisper "
        "base) or a cached name (default: bundled tiny.en).",
    ),
    language: str | None = options.stage_option(DiarizeConfig, "language", help="Spoken language code."),
    second_reading: str = options.stage_option(DiarizeConfig, "second_reading"),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Diarization error rate of `m3 diarize` (turns, and the final utterances) against RTTM, per file,
    per group and pooled over all files.

    Turns may overlap (two speakers at once), and overlapped reference speech is scored: a second
    speaker missed there counts as missed speech. ``ovl ref/flag`` gives the seconds of reference speech
    with two or more speakers and how much of it the turns also mark as overlap; ``spk ref/hyp`` the
    reference speakers with at least 3 s of speech and the speakers found."""
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.eval.audio import collect_items, read_manifest
    from m3cli.stages.eval.speech import score_diarization

    items: list[EvalItem] = []
    skipped: list[str] = []
    if manifest is not None:
        items, skipped = read_manifest(manifest, media_root)
    if media_files:
        if rttm is None:
            raise InputError("media files need --rttm (or list them in a --manifest)")
        items.extend(collect_items(media_files, rttm, uem, group))
    if not items:
        raise InputError("nothing to score: give media files with --rttm, or a --manifest")
    config = options.stage_config(DiarizeConfig, ctx.params, num_speakers="speakers")
    report = score_diarization(items, config, _run_context(ctx, device), collar, turns_only)
    report.skipped = skipped
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
        return
    rows = []
    for e in report.files:
        for src in report.sources:
            d = e[src]
            o = e["overlap"]
            rows.append(
                [
                    safe(e["uri"]),
                    safe(e["group"]),
                    src,
                    f"{100 * d['der']:.1f}%",
                    f"{d['missed']:.2f}",
                    f"{d['false_alarm']:.2f}",
                    f"{d['confusion']:.2f}",
                    f"{d['total']:.2f}",
                    f"{e['ref_speakers_3s']}/{d['hyp_speakers']}",
                    f"{o['reference']:.1f}/{o['both']:.1f}",
                    f"{e['untranscribed']:.2f}" if src == "utterances" else "",
                ]
            )
    for g in [*report.groups, "ALL"]:
        for src in report.sources:
            t = report.tallies[(g, src)]
            rows.append(
                [
                    "ALL" if g == "ALL" else f"[{safe(g)}]",
                    f"{t.files} files",
                    src,
                    f"{100 * t.der:.1f}%",
                    f"{t.missed:.2f}",
                    f"{t.false_alarm:.2f}",
                    f"{t.confusion:.2f}",
                    f"{t.total:.2f}",
                    "",
                    f"{t.overlap_ref:.1f}/{t.overlap_flagged:.1f}",
                    f"{report.lost.get(g, 0.0):.2f}" if src == "utterances" else "",
                ]
            )
    header = ["file", "group", "from", "DER", "missed", "false_al", "confusion", "speech", "spk ref/hyp"]
    echo(_table([*header, "ovl ref/flag", "untranscr"], rows))
    echo(
        f"(collar ±{collar} s; seconds of scored reference speech; speakers of >= 3 s; untranscr: seconds "
        "of reference speech the turns hold but no utterance does)"
    )
    for s in skipped:
        echo(f"skipped: {safe(s)}")


def asr(
    ctx: typer.Context,
    media_file: Path = typer.Argument(..., help="Audio or video file."),
    ref: Path = typer.Option(
        ..., "--ref", help="Reference transcript: plain text, or an STM file (its words in time order)."
    ),
    model: str | None = options.stage_option(
        DiarizeConfig,
        "model",
        help="ASR model: a CTranslate2 Whisper directory, base (multilingual Whisper base) or a cached name "
        "(default: bundled tiny.en).",
    ),
    language: str | None = options.stage_option(DiarizeConfig, "language", help="Spoken language code."),
    second_reading: str = options.stage_option(DiarizeConfig, "second_reading"),
    vad: str = options.stage_option(DiarizeConfig, "vad", help=VAD_HELP),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Word error rate of `m3 diarize`'s transcript (lowercased, punctuation stripped) against a reference."""
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.eval.speech import reference_text, score_asr

    try:
        reference = reference_text(ref, ref.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{ref}: cannot read the reference transcript: {exc}") from None
    config = options.stage_config(DiarizeConfig, ctx.params)
    report = score_asr(media_file, reference, config, _run_context(ctx, device))
    w, lost = report.wer, report.untranscribed
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
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


LANG_EPILOG = """\b
Examples:
  m3 eval languages ../shared/media/speech/languages/*.wav
  m3 eval languages talk.wav=pt interview.mp4=ru --json
  m3 eval languages ../shared/media/speech/languages/*.wav --second-reading off   # tiny.en alone
"""


def languages(
    ctx: typer.Context,
    files: list[str] = typer.Argument(
        ..., help="FILE=LANG, or files named <lang>_*.wav; FILE.txt beside one is its reference."
    ),
    model: str | None = options.stage_option(DiarizeConfig, "model"),
    second_reading: str = options.stage_option(DiarizeConfig, "second_reading"),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """Per recording of known language: turns (>= 3 s) heard in it, WER (CER for zh/ja), English
    utterances invented, and CPU seconds against plain faster-whisper base."""
    from m3cli.stages.eval.languages import score_languages

    config = options.stage_config(DiarizeConfig, ctx.params)
    rows = score_languages(files, config, _run_context(ctx, device).device)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row.as_dict(), ensure_ascii=False))
        return
    header = [
        "file",
        "lang",
        "turns>=3s right",
        "heard",
        "WER/CER",
        "utts",
        "invented",
        "CPU-s",
        "base CPU-s",
    ]
    table = [
        [
            safe(r.file),
            r.language,
            f"{r.turns_right}/{r.turns}",
            r.heard or "-",
            "-" if r.error is None else f"{r.metric} {100 * r.error:.1f}%",
            str(r.utterances),
            str(r.invented),
            f"{r.cpu:.2f}",
            f"{r.plain_cpu:.2f}",
        ]
        for r in rows
    ]
    echo(_table(header, table))


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("diarization", epilog=DIAR_EPILOG)(diarization)
    eval_app.command("asr", epilog=ASR_EPILOG)(asr)
    eval_app.command("languages", epilog=LANG_EPILOG)(languages)
