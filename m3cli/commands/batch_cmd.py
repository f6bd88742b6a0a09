"""`m3 batch INPUT... -o MEMORY`: many videos into one memory (m3cli.stages.batch.stage)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from m3cli import context, options
from m3cli.pipeline_options import SET_HELP, pipeline_from_flags
from m3cli.stages.core.sizes import count
from m3cli.terminal import safe

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 batch videos/ -o mem.lance --jobs 2                 # every video under videos/, 2 workers
  m3 batch a.mp4 b.mkv list.txt -o mem.lance --report report.jsonl
  m3 batch /data/inbox -o s3://my-bucket/mem.lance       # AWS_* variables give the credentials
  m3 batch manifest.jsonl -o mem.lance --engine ray --address 10.0.0.5:6379 --gpus-per-task 0.5
  m3 batch videos/ -o mem.lance --set faces.fps=2 --no-llm
  m3 batch days.jsonl -o mem.lance    # {"path": "mon.mp4", "recorded": "2026-11-09T09:00:00+01:00"}

\b
Rerunning the same command after a crash or kill -9 does only the videos that are not in the
memory yet (the journal, keyed by video content, says which are). Exit status 1 if any video failed.
"""


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def batch(
    ctx: typer.Context,
    inputs: list[str] = typer.Argument(
        ...,
        help="Videos, folders (searched recursively) and manifests (.txt/.list: a path per line; "
        '.jsonl: {"path": ..., "recorded": "<ISO 8601>"} per line).',
        show_default=False,
    ),
    output: str = typer.Option(..., "--output", "-o", help="The memory: a directory or s3:// URI."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Worker processes (local engine) or concurrent tasks."),
    engine: str = typer.Option("local", "--engine", help="local (processes on this machine) or ray."),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray instance)."
    ),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray: CPUs each video task asks for."),
    gpus_per_task: float = typer.Option(
        0.0, "--gpus-per-task", help="Ray: GPUs each video task asks for (GPU backends of faces/diarize)."
    ),
    retries: int = typer.Option(1, "--retries", help="Retries of a video whose worker died."),
    journal_path: Path | None = typer.Option(
        None, "--journal", help="Journal file (default: inside a local memory; in the cache for s3://)."
    ),
    report: Path | None = typer.Option(None, "--report", help="Write one JSON line per video here."),
    sets: list[str] = typer.Option(None, "--set", "-s", help=SET_HELP),
    clip_seconds: float | None = typer.Option(None, "--clip-seconds", "-l", help="segment.clip_seconds"),
    faces_fps: float | None = typer.Option(None, "--faces-fps", help="faces.fps (frames per second)."),
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
    no_llm: bool = options.no_llm_option("Never call an LLM, even if one is configured."),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(None, "--llm-model", help="Chat model (env M3_LLM_MODEL)."),
    embed_backend: str | None = typer.Option(None, "--embed-backend", help="local, torch or openai."),
) -> None:
    """Index many videos into one memory: parallel workers, one writer, resumable, failures reported."""
    from m3cli.stages.batch.stage import (
        Journal,
        LocalEngine,
        Progress,
        check_memory_target,
        default_journal,
        expand_inputs,
        manifest_times,
        run_batch,
        write_report,
    )
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.pipeline import Models

    settings = context.settings(
        ctx, **{"llm.base_url": llm_base_url, "llm.model": llm_model, "embed.backend": embed_backend}
    )
    config = pipeline_from_flags(
        settings,
        sets,
        "index",
        no_llm,
        {
            "segment.clip_seconds": clip_seconds,
            "faces.fps": faces_fps,
            "diarize.num_speakers": speakers,
            "segment.recorded_at": recorded_at,
            "segment.recorded_from_file_time": recorded_from_file_time or None,
        },
    )
    check_memory_target(output)
    from m3cli.stages.core.outputs import check_writable

    if report is not None:  # said now, not after every video's work
        check_writable(report, "the batch report", "give a writable --report path")
    if journal_path is not None:
        check_writable(journal_path, "the batch journal", "give a writable --journal path")
    paths = expand_inputs(inputs)
    if not paths:
        raise InputError(f"no videos found in {' '.join(inputs)}")
    st = context.state(ctx)
    worker_log = logging.ERROR if st.quiet else logging.WARNING
    from m3cli.progress import BatchProgress, shown

    bar = BatchProgress(paths, config.stages, not config.offline and settings.llm.configured, shown(st.quiet))
    events = None
    if bar.line.enabled and engine == "local":  # the workers tell the line their stage and clip
        import multiprocessing

        events = multiprocessing.get_context("spawn").Queue()
    runner: LocalEngine | RayEngine
    if engine == "local":
        runner = LocalEngine(
            config, settings, jobs=jobs, retries=retries, log_level=worker_log, events=events
        )
    elif engine == "ray":
        from m3cli.stages.batch.ray import RayEngine

        runner = RayEngine(
            config,
            settings,
            address=address,
            jobs=jobs,
            cpus_per_task=cpus_per_task,
            gpus_per_task=gpus_per_task,
            retries=retries,
            log_level=worker_log,
        )
    else:
        raise InputError(f"--engine must be local or ray, got {engine!r}")
    journal = Journal(journal_path or default_journal(output, settings.cache_dir))
    lines = not st.quiet and (bar.line.enabled or st.verbose > 0)  # a line per video

    def progress(p: Progress) -> None:
        r = p.report
        what = {
            "indexed": f"indexed {count(r.clips, 'clip')} in {r.seconds:.1f} s",
            "done": "already in the memory",
            "duplicate": f"skipped ({_own_words(r)})",
            "failed": f"FAILED: {_own_words(r)}",
        }[r.status]
        bar.video_done(r.path, r.status, worked=r.seconds > 0)
        if bar.line.enabled:  # the bar below says the totals and the ETA
            bar.write(f"m3: batch [{p.done}/{p.total}] {safe(r.path)}: {what}")
        elif lines:
            typer.echo(
                f"m3: batch [{p.done}/{p.total}] {safe(r.path)}: {what} | {count(p.clips, 'clip')} | "
                f"ETA {_clock(p.eta)}",
                err=True,
            )

    if events is not None:
        import threading

        def drain() -> None:
            while (event := events.get()) is not None:
                bar.worker(*event)

        threading.Thread(target=drain, name="m3-batch-progress", daemon=True).start()
    models = Models(config, settings)
    run_ctx = context.run_context(ctx, settings, bar=bar.index_progress)
    try:
        summary = run_batch(
            paths, output, runner, models, run_ctx, journal, progress, recorded=manifest_times(inputs)
        )
    finally:
        bar.close()
        if events is not None:
            events.put(None)
    if report is not None:
        write_report(report, summary)
    if not st.quiet:
        if not lines:  # the progress lines named each failure already when they were shown
            for r in summary.failed:
                typer.echo(f"m3: failed: {safe(r.path)}: {_own_words(r)}", err=True)
        breakdown = (
            f"of {count(len(summary.reports), 'input')}: {summary.count('indexed')} indexed, "
            f"{summary.count('done')} already in the memory, "
            f"{count(summary.count('duplicate'), 'duplicate')}, {summary.count('failed')} failed"
        )
        what = context.memory_counts(summary.count("indexed"), summary.clips, summary.characters)
        context.wrote(ctx, what, output, memory=True, detail=breakdown)
    if summary.failed:
        raise typer.Exit(1)


def _own_words(report: object) -> str:
    """The report's error without the path it often starts with (the line names the path already),
    escaped: a file name may hold terminal control sequences or line breaks."""
    error = str(getattr(report, "error", "") or "")
    path = str(getattr(report, "path", ""))
    for prefix in (f"{path}: ", f"{safe(path)}: "):
        if error.startswith(prefix):
            error = error[len(prefix) :]
    return safe(error)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(batch)
