"""`m3 run VIDEO... -o MEMORY`: the whole pipeline in one process (m3cli.stages.pipeline)."""

from __future__ import annotations

import logging

import typer

from m3cli import context, options
from m3cli.pipeline_options import SET_HELP, pipeline_from_flags, print_options
from m3cli.stages.core.redact import mask_credentials
from m3cli.terminal import safe

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 run talk.mp4 -o mem.lance                      # = segment | diarize | ... | index -o mem.lance
  m3 run a.mp4 b.mkv -o mem.lance --faces-fps 2 --speakers 2
  m3 run talk.mp4 --until faces -o perceived.jsonl  # stop after faces, write the records
  m3 run talk.mp4 --until faces | m3 memorize | m3 link | m3 abstract | m3 index -o mem.lance
  m3 run talk.mp4 -o mem.lance --set faces.min_sharpness=0.2 --set diarize.cluster.threshold=0.4
  m3 run --options                                  # every STAGE.OPTION that --set accepts

\b
Stage options: --set STAGE.OPTION=VALUE (repeatable), or [pipeline.STAGE] tables in m3.toml,
e.g. [pipeline.faces] fps = 2. Records and caches are the same as the shell pipe's.
"""


def run(
    ctx: typer.Context,
    videos: list[str] = typer.Argument(None, help="Video files.", show_default=False),
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        help="The memory (directory or s3:// URI); with --until before index, a JSONL file (default stdout).",
    ),
    until: str = typer.Option(
        "index",
        "--until",
        "-u",
        help="Last stage to run: segment, diarize, voices, faces, memorize, link, abstract or index.",
    ),
    sets: list[str] = typer.Option(None, "--set", "-s", help=SET_HELP),
    clip_seconds: float | None = typer.Option(None, "--clip-seconds", "-l", help="segment.clip_seconds"),
    faces_fps: float | None = typer.Option(None, "--faces-fps", help="faces.fps (frames per second)."),
    faces_backend: str | None = typer.Option(None, "--faces-backend", help="faces.backend"),
    speakers: int | None = typer.Option(None, "--speakers", help="diarize.num_speakers, when known."),
    recorded_at: str | None = typer.Option(
        None,
        "--recorded-at",
        help="segment.recorded_at: when the recording began (ISO 8601), for videos whose metadata "
        "does not say.",
    ),
    recorded_from_file_time: bool = typer.Option(
        False,
        "--recorded-from-file-time",
        help="segment.recorded_from_file_time: else guess the start from the file's modification time.",
    ),
    asr_model: str | None = typer.Option(None, "--asr-model", help="diarize.model"),
    no_llm: bool = options.no_llm_option(
        "Never call an LLM (memorize and abstract), even if one is configured."
    ),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(None, "--llm-model", help="Chat model (env M3_LLM_MODEL)."),
    llm_api_key: str | None = typer.Option(None, "--llm-api-key", help="API key (env M3_LLM_API_KEY)."),
    embed_backend: str | None = typer.Option(
        None, "--embed-backend", help="local (bundled MiniLM, onnxruntime), torch or openai."
    ),
    keep_going: bool = typer.Option(
        False, "--keep-going", "-k", help="Report a failing video, go on with the others (exit 1 at the end)."
    ),
    sequential: bool = typer.Option(
        False,
        "--sequential",
        help="Run faces and sight after voices instead of in a second thread beside diarize and voices "
        "(same records).",
    ),
    list_options: bool = typer.Option(False, "--options", help="List every STAGE.OPTION and exit."),
) -> None:
    """Run the whole pipeline in one process: models load once, each video is finished before the next."""
    from pathlib import Path

    from m3cli import stream
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.pipeline import Models, run_videos

    if list_options:
        print_options()
        return
    if not videos:
        raise InputError("no videos: give one or more video files (m3 run talk.mp4 -o mem.lance)")
    settings = context.settings(
        ctx,
        **{
            "llm.base_url": llm_base_url,
            "llm.model": llm_model,
            "llm.api_key": llm_api_key,
            "embed.backend": embed_backend,
        },
    )
    config = pipeline_from_flags(
        settings,
        sets,
        until,
        no_llm,
        {
            "segment.clip_seconds": clip_seconds,
            "faces.fps": faces_fps,
            "faces.backend": faces_backend,
            "diarize.num_speakers": speakers,
            "diarize.model": asr_model,
            "segment.recorded_at": recorded_at,
            "segment.recorded_from_file_time": recorded_from_file_time or None,
        },
        parallel=not sequential,
    )
    if config.until == "index" and not output:
        raise InputError("-o MEMORY is required (or stop earlier with --until STAGE to write records)")
    # before the models load (their weights are checked and exported once, which can take seconds)
    context.stop_at_once_on_interrupt(
        "m3: interrupted: videos finished so far are kept"
        + (f" in {safe(mask_credentials(str(output)))}" if output and config.until == "index" else "")
        + ", and the finished clips' work is in the cache; run the same command again to resume"
    )
    models = Models(config, settings)
    from m3cli.progress import PipelineProgress, shown

    bar = PipelineProgress(
        "m3 run",
        videos,
        config.stages,
        llm=not config.offline and settings.llm.configured,
        enabled=shown(context.state(ctx).quiet),
    )
    run_ctx = context.run_context(ctx, settings, bar=bar.progress)
    finished = []  # each video's records, held as JSON (stages/core/held_clips.py)
    failures = 0
    outcomes = run_videos(
        [Path(v) for v in videos], models, run_ctx, output, keep_going, bar.video, bar.stage_done
    )
    try:
        for outcome, recs in outcomes:
            bar.video_done()
            if outcome.error:
                failures += 1
                bar.write(f"m3: error: {safe(outcome.error)}")
            if recs:
                finished.append(recs)
    finally:
        bar.close()
    from itertools import chain

    if config.until != "index":
        stream.write_records(chain.from_iterable(finished), output)
    from m3cli.stages.core.sizes import count
    from m3cli.stages.core.summary import characters_in

    done, clips = len(finished), sum(len(recs) for recs in finished)
    if config.until == "index":
        what = context.memory_counts(done, clips, characters_in(chain.from_iterable(finished)))
        context.wrote(ctx, what, output, memory=True)
    else:
        what = f"{count(clips, 'clip record')} of {count(done, 'video')}, after {config.until}"
        context.wrote(ctx, what, output)
    if failures:
        log.warning("%d of %d videos failed", failures, len(videos))
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(run)
