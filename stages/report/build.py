"""`m3 report`: one offline, self-contained HTML page of a memory (and optionally of `m3 ask` answers).

Steps, one module each: :mod:`.gather` reads what the page shows from the memory tables (capped) into
:mod:`.records` (:mod:`.fill` sorting each video's lines into transcripts, spans and cards),
:mod:`.media` makes the embedded thumbnails and voice samples, :mod:`.render` writes the HTML (with
:mod:`.graph` drawing each character's SVG graph). The file is written next to its destination and
renamed into place, so an interrupted run never leaves half a page.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from m3cli.stages.core.common import RunContext
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import open_memory
from m3cli.stages.core.outputs import check_writable, unwritable
from m3cli.stages.core.storage import damaged_memory, write_atomic
from m3cli.stages.report.answers import read_answers
from m3cli.stages.report.gather import gather, gather_people
from m3cli.stages.report.media import KEYFRAME_SIDE, thumbnail, voice_sample
from m3cli.stages.report.records import ReportData, ReportLimits
from m3cli.stages.report.render import render


@dataclass
class ReportStats:
    path: Path
    bytes: int
    videos: int
    clips: int
    characters: int
    answers: int
    thumbnails: int
    voice_samples: int
    keyframes: int = 0


def _pin_script(page: str) -> str:
    """Replace the CSP's 'unsafe-inline' for scripts by the hash of the page's own script: even if some
    text escaped escaping, a script it smuggled in would not run."""
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    if len(scripts) != 1:
        return page
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    return page.replace("script-src 'unsafe-inline'", f"script-src 'sha256-{digest}'", 1)


def write_report(
    memory: str | Path,
    output: Path,
    video: str | None = None,
    clips: tuple[int, int | None] = (0, None),
    answers: Path | None = None,
    limits: ReportLimits | None = None,
    ctx: RunContext | None = None,
) -> ReportStats:
    """Write the report of ``memory`` to ``output``; returns what went into it."""
    limits = limits or ReportLimits()
    ctx = ctx or RunContext()
    if output.exists() and output.is_dir():
        raise InputError(
            f"-o {output}: is a directory; name the HTML file to write, e.g. {output / 'report.html'}"
        )
    check_writable(output, "the report", "give a writable -o path, e.g. -o ~/report.html")
    answer_rows, answers_total = read_answers(answers, limits.max_answers) if answers else ([], 0)
    from m3cli.stages.core.memory_reader import open_reader

    try:
        store = open_memory(memory)
        reader = open_reader(memory)  # the integrity check every reader runs (one line if damaged)
        data = gather(store, video, clips, limits)
        gather_people(reader, data)
    except (OSError, ValueError, RuntimeError) as exc:  # the engine's errors: one line, not a traceback
        raise damaged_memory(memory, exc) from None
    data.answers = answer_rows
    thumbs: dict[tuple[str, str], list[str]] = {}
    voices: dict[tuple[str, str], str] = {}
    made_of: dict[tuple[object, object], str | None] = {}  # one crop file is encoded once per page
    crops = samples = 0
    chars = [(v, c) for v in data.videos for c in v.characters]
    for v, c in ctx.progress(chars, desc="report", total=len(chars)):
        made: list[str] = []
        for crop in c.crops:
            if crops >= limits.max_page_crops:
                break
            key = (crop.path, crop.data_uri)
            if key not in made_of:
                made_of[key] = thumbnail(crop)
            uri = made_of[key]
            if uri:
                made.append(uri)
                crops += 1
        if made:
            thumbs[(v.id, c.id)] = made
        if c.voice_sample is not None and samples >= limits.max_page_voice_samples:
            c.voice_sample = None
            c.voice_note = f"no voice sample: the page holds at most {limits.max_page_voice_samples}"
        elif c.voice_sample is not None:
            sample_of, start, end = c.voice_sample
            audio = voice_sample(sample_of, start, end, video_id=v.id)  # only from that very video
            if audio:
                voices[(v.id, c.id)] = audio
                samples += 1
    frames = _keyframe_thumbs(data, limits)
    page = _pin_script(render(data, thumbs, voices, answers_total, frames=frames))
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        # all or nothing, 0666 less the umask (a page is for sharing), written through to /dev/null or a FIFO
        write_atomic(output, page.encode("utf-8"))
    except OSError as exc:  # the folder became read-only while the page was made
        if not unwritable(exc):
            raise
        raise InputError(
            f"{output}: cannot write the report ({exc.strerror or exc}); give a writable -o path"
        ) from None
    return ReportStats(
        path=output,
        bytes=len(page.encode("utf-8")),
        videos=len(data.videos),
        clips=sum(len(v.clips) for v in data.videos),
        characters=len(chars),
        answers=len(answer_rows),
        thumbnails=sum(len(t) for t in thumbs.values()),
        voice_samples=len(voices),
        keyframes=len(frames),
    )


def _keyframe_thumbs(data: ReportData, limits: ReportLimits) -> dict[tuple[str, int, int], str]:
    """(video, clip, keyframe number) -> an embedded JPEG of the keyframe, for at most
    ``max_page_keyframes`` keyframes (a note says when the cap bites)."""
    frames: dict[tuple[str, int, int], str] = {}
    made_of: dict[tuple[object, object], str | None] = {}
    shown = 0
    for v in data.videos:
        for c in v.clips:
            for i, k in enumerate(c.keyframes):
                if k.image.path is None and k.image.data_uri is None:
                    continue
                shown += 1
                if shown > limits.max_page_keyframes:
                    continue
                key = (k.image.path, k.image.data_uri)
                if key not in made_of:  # one image file is encoded once per page
                    made_of[key] = thumbnail(k.image, KEYFRAME_SIDE)
                made = made_of[key]
                if made:
                    frames[(v.id, c.index, i)] = made
    if shown > limits.max_page_keyframes:
        data.notes.append(
            f"{shown} keyframes in the clips shown; the first {limits.max_page_keyframes} are embedded "
            "(the others are listed with their text and tags)."
        )
    return frames
