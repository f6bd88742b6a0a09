"""The whole pipeline in one process: segment, diarize, voices, faces, sight, memorize, link, abstract,
index.

Why it exists: a shell pipe of eight stages pays eight interpreter start-ups and loads torch and the
text embedder three times per video. Here every model is loaded once (the first time a stage needs
it) and kept for every later video, which is what `m3 run` and each worker of `m3 batch` use.

Why the records are byte-identical to the shell pipe's: each stage is called through its own public
function with the same config dataclass its command builds, and between stages every record takes the
same JSON round trip a pipe gives it (serialise, parse, validate). Caches are the stages' own, so a
`m3 run --until faces` followed by `m3 memorize | m3 link | ...` hits the same entries as either alone.

Streaming: videos pass through every stage one after another, so a video is finished (indexed, or
ready to emit) before the next starts and memory use does not grow with the number of videos. Within
a video the stages take a few clips at a time and carry their folds (identity banks, link voting,
summaries) from pass to pass, the finished clips held as JSON until ``index``, so memory use does not
grow with the video's length either. The folds are per video, which makes the video the unit that can
be completed, journaled and retried on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from m3cli.schemas.records import ClipRecord
from m3cli.stages.configs.stage_table import (
    STAGE_CONFIGS,
    AbstractConfig,
    DiarizeConfig,
    FacesConfig,
    IndexConfig,
    LinkConfig,
    MemorizeConfig,
    SegmentConfig,
    SightConfig,
    VoicesConfig,
)
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.heap import trim_heap
from m3cli.stages.core.held_clips import HeldClips
from m3cli.stages.core.once import MadeOnce
from m3cli.stages.core.options import build_config, option_paths
from m3cli.stages.index.stage import IndexStats

log = logging.getLogger(__name__)

#: Pipeline order. `--until STAGE` runs a prefix of it.
STAGES = ("segment", "diarize", "voices", "faces", "sight", "memorize", "link", "abstract", "index")


@dataclass(frozen=True)
class PipelineConfig:
    """Every stage's own config, plus where to stop and whether an LLM may be called."""

    segment: SegmentConfig = field(default_factory=SegmentConfig)
    diarize: DiarizeConfig = field(default_factory=DiarizeConfig)
    voices: VoicesConfig = field(default_factory=VoicesConfig)
    faces: FacesConfig = field(default_factory=FacesConfig)
    sight: SightConfig = field(default_factory=SightConfig)
    memorize: MemorizeConfig = field(default_factory=MemorizeConfig)
    link: LinkConfig = field(default_factory=LinkConfig)
    abstract: AbstractConfig = field(default_factory=AbstractConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    until: str = "index"
    offline: bool = False
    #: faces (and sight) run in a second thread beside diarize and voices (:func:`perceive_side_by_side`)
    parallel: bool = True

    def __post_init__(self) -> None:
        if self.until not in STAGES:
            raise InputError(f"--until must be one of {', '.join(STAGES)}; got {self.until!r}")

    @property
    def stages(self) -> tuple[str, ...]:
        return STAGES[: STAGES.index(self.until) + 1]

    @property
    def whole_video(self) -> bool:
        """Whether a stage is set to cluster all of a video's clips at once (``--recluster``), which
        the passes of :func:`process_video` cannot give it."""
        return (self.voices.recluster and "voices" in self.stages) or (
            self.faces.recluster and "faces" in self.stages
        )


# ------------------------------------------------------------------------------ options by name
def pipeline_config(
    options: Mapping[str, Any], until: str = "index", offline: bool = False, parallel: bool = True
) -> PipelineConfig:
    """The pipeline's config from an option tree ``{stage: {option: value}}``; unknown names fail."""
    configs = {}
    for stage, values in options.items():
        if stage not in STAGE_CONFIGS:
            raise InputError(f"{stage}: not a stage; options go to {', '.join(STAGES)}")
        if not isinstance(values, Mapping):
            raise InputError(f"{stage}: expected STAGE.OPTION=VALUE, got {values!r}")
        configs[stage] = build_config(STAGE_CONFIGS[stage], values, stage)
    return PipelineConfig(**configs, until=until, offline=offline, parallel=parallel)


def option_names() -> dict[str, list[str]]:
    """Every option `--set` accepts, per stage (for --help and error messages)."""
    return {stage: option_paths(cls) for stage, cls in STAGE_CONFIGS.items()}


# ------------------------------------------------------------------------------------ the models
class Models:
    """The models of one pipeline config, each loaded the first time a stage needs it, then kept.

    ``settings`` is the effective :class:`~m3cli.stages.core.config.Settings` (device, LLM, embedder).
    """

    def __init__(self, config: PipelineConfig, settings: Any) -> None:
        self.config = config
        self.settings = settings
        self._loaded: MadeOnce[Any] = MadeOnce()  # the two perception branches may ask at once

    def _get(self, name: str, make: Callable[[], Any]) -> Any:
        return self._loaded.get(name, make)

    def warm_memory_models(self) -> None:
        """Load the text embedder that abstract and index will need, if they run and it loads locally.

        Called by the faces branch once its clips are done, usually while diarize still works (faces
        costs two thirds of diarize + voices per video second): the load (~0.3 s) would otherwise wait
        for both. Not done by the diarize branch: building the embedder's graph holds the interpreter
        lock and slowed the faces branch by as much. Opportunistic: a model that fails to load here is
        left to fail where the stage asks for it, with that stage's error."""
        stages = self.config.stages
        if "index" in stages or ("abstract" in stages and self.config.abstract.embed):
            try:
                load = getattr(self.text, "load", None)  # local models; a server has nothing to load
                if load is not None:
                    load()
            except Exception as exc:  # noqa: BLE001 - reported by the stage that needs the model
                log.debug("text embedder not preloaded: %s", exc)

    @property
    def diarize(self) -> Any:
        from m3cli.stages.diarize.stage import Pipeline

        return self._get("diarize", lambda: Pipeline(self.config.diarize, self.settings.device))

    @property
    def voices(self) -> Any:
        from m3cli.stages.voices import Embedder

        return self._get("voices", lambda: Embedder(self.config.voices, self.settings.device))

    @property
    def faces(self) -> Any:
        from m3cli.stages.faces.stage import load_model

        return self._get("faces", lambda: load_model(self.config.faces, self.settings.device))

    @property
    def sight(self) -> Any:
        from m3cli.stages.sight import SightModels

        return self._get("sight", lambda: SightModels(self.config.sight))

    @property
    def llm(self) -> Any:
        from m3cli.stages.backends.llm import client_from_settings

        def make() -> Any:
            return None if self.config.offline else client_from_settings(self.settings.llm)

        return self._get("llm", make)

    @property
    def text(self) -> Any:
        from m3cli.stages.core.memory_store import make_text_embedder

        return self._get("text", lambda: make_text_embedder(self.settings.embed, self.settings.device))


# --------------------------------------------------------------------------------- one video
def roundtrip(records: Iterable[ClipRecord]) -> list[ClipRecord]:
    """Records as the next stage of a shell pipe would read them: serialised, parsed and validated."""
    return [
        ClipRecord.model_validate(orjson.loads(orjson.dumps(r.to_json(), option=orjson.OPT_SERIALIZE_NUMPY)))
        for r in records
    ]


@dataclass
class Folds:
    """The per-video state each folding stage keeps between clips (the voices heard in English, voice
    and face banks, link votes, abstraction state), by stage and then by video id.

    A caller that feeds one video's clips in several calls of :func:`process_records` passes the same
    ``Folds`` to each, so a call folds only its own clips and continues from the last one (`m3 watch`:
    round time and memory stay flat as the recording grows). The stages that do not fold (sight,
    memorize) need nothing here."""

    diarize: dict[str, Any] = field(default_factory=dict)
    voices: dict[str, Any] = field(default_factory=dict)
    faces: dict[str, Any] = field(default_factory=dict)
    link: dict[str, Any] = field(default_factory=dict)
    abstract: dict[str, Any] = field(default_factory=dict)

    def checkpoint(self, video: str, clips: list[int], models: Models) -> Any:
        """A :class:`~m3cli.stages.core.checkpoint.Checkpoint` of ``video``'s folds after ``clips`` (the
        clip indexes fed so far), for the index run that commits them to write with its manifest.
        Raises :class:`~m3cli.stages.core.checkpoint.NotCheckpointable` for folds it cannot keep."""
        from m3cli.stages.core import checkpoint

        arrays = checkpoint.Arrays()
        doc = {stage: state.dump(arrays) for stage, state in self.states(video).items()}
        return checkpoint.make(video, clips, checkpoint.settings_key(models), doc, arrays)

    def states(self, video: str) -> dict[str, Any]:
        """What a checkpoint keeps of ``video``, by stage, in stage order: each fold's state (of the
        abstraction's pair, its state, not the abstractor that made it)."""
        out: dict[str, Any] = {
            stage: getattr(self, stage)[video]
            for stage in ("diarize", "voices", "faces", "link")
            if video in getattr(self, stage)
        }
        if video in self.abstract:
            out["abstract"] = self.abstract[video][1]
        return out

    @classmethod
    def resume(cls, video: str, saved: Any, models: Models, ctx: RunContext) -> Folds:
        """The folds a checkpoint saved (:meth:`checkpoint`; ``saved`` is a verified
        :class:`~m3cli.stages.core.checkpoint.Loaded`), continuing as if its clips had just been fed.
        Raises ValueError (or KeyError, TypeError) for a document that is not one of this format."""
        from m3cli.stages.abstract.facts import VideoState
        from m3cli.stages.abstract.stage import Abstractor
        from m3cli.stages.diarize.carried import SpokenVoices
        from m3cli.stages.faces.stage import FacesFold
        from m3cli.stages.link.stage import LinkFold
        from m3cli.stages.voices import VoiceBank

        doc, arrays, folds = saved.folds, saved.arrays, cls()
        if "diarize" in doc:
            folds.diarize[video] = SpokenVoices.load(doc["diarize"], arrays)
        if "voices" in doc:
            folds.voices[video] = VoiceBank.load(doc["voices"], arrays)
        if "faces" in doc:
            folds.faces[video] = FacesFold.load(doc["faces"], arrays)
        if "link" in doc:
            folds.link[video] = LinkFold.load(doc["link"], models.config.link, arrays)
        if "abstract" in doc:
            config = models.config.abstract
            embedder = models.text if config.embed else None
            runner = Abstractor(config, models.llm, embedder, ctx.cache)
            folds.abstract[video] = (runner, VideoState.load(doc["abstract"], arrays))
        return folds


def _diarize(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.diarize.stage import diarize_records

    known = None if folds is None else folds.diarize
    return diarize_records(records, models.config.diarize, ctx, pipe=models.diarize, known=known)


def _voices(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.voices import voices_records

    banks = None if folds is None else folds.voices
    return voices_records(records, models.config.voices, ctx, embedder=models.voices, banks=banks)


def _faces(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.faces.stage import run_faces

    by_video = None if folds is None else folds.faces
    return run_faces(records, models.faces, models.config.faces, ctx, folds=by_video)


def _sight(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.sight import run_sight

    return run_sight(records, models.sight, models.config.sight, ctx)


def _memorize(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.memorize.stage import memorize_records

    return memorize_records(records, models.config.memorize, models.llm, ctx)


def _link(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.link.stage import link_records

    return link_records(records, models.config.link, folds=None if folds is None else folds.link)


def _abstract(
    records: list[ClipRecord], models: Models, ctx: RunContext, folds: Folds | None = None
) -> list[ClipRecord]:
    from m3cli.stages.abstract.stage import abstract_records

    config = models.config.abstract
    embedder = models.text if config.embed else None
    by_video = None if folds is None else folds.abstract
    return abstract_records(records, config, models.llm, embedder, ctx, folds=by_video)


_STEPS: dict[str, Callable[[list[ClipRecord], Models, RunContext, Folds | None], list[ClipRecord]]] = {
    "diarize": _diarize,
    "voices": _voices,
    "faces": _faces,
    "sight": _sight,
    "memorize": _memorize,
    "link": _link,
    "abstract": _abstract,
}


class _Stopped(Exception):
    """The other branch of :func:`perceive_side_by_side` failed: this one stops at its next clip."""


def _stoppable(progress: Callable[..., Iterable], stop: threading.Event) -> Callable[..., Iterable]:
    def wrapped(items: Iterable, *args: Any, **kwargs: Any) -> Iterator:
        for item in progress(items, *args, **kwargs):
            if stop.is_set():
                raise _Stopped
            yield item

    return wrapped


def merge_faces(
    heard: list[ClipRecord], seen: list[ClipRecord], before: list[ClipRecord]
) -> list[ClipRecord]:
    """The audio branch's records with the faces branch's section and problems added, as if faces had
    run after voices: faces reads only the video stream and the clip bounds, so its output does not
    depend on the audio sections, and the problems it reports come after the audio stages' ones."""
    merged = []
    for audio, faces, base in zip(heard, seen, before, strict=True):
        if audio.key != faces.key:
            raise AssertionError(f"faces and voices disagree on clip order: {audio.key} vs {faces.key}")
        record = audio.model_copy()
        record.faces = faces.faces
        added = (faces.errors or [])[len(base.errors or []) :]
        if added:
            record.errors = [*(audio.errors or []), *added]
        merged.append(record)
    return merged


def merge_sight(
    merged: list[ClipRecord], sighted: list[ClipRecord], before: list[ClipRecord]
) -> list[ClipRecord]:
    """:func:`merge_faces`'s records with the sight section and problems that sight found on
    ``before``, as if sight had run after faces: sight too reads only the video stream and the clip
    bounds, and its problems come after every earlier stage's."""
    out = []
    for record, sight, base in zip(merged, sighted, before, strict=True):
        if record.key != sight.key:
            raise AssertionError(f"sight and voices disagree on clip order: {record.key} vs {sight.key}")
        record = record.model_copy()
        record.sight = sight.sight
        added = (sight.errors or [])[len(base.errors or []) :]
        if added:
            record.errors = [*(record.errors or []), *added]
        out.append(record)
    return out


def perceive_side_by_side(
    records: list[ClipRecord],
    models: Models,
    ctx: RunContext,
    on_stage: Callable[[str, int], None] | None = None,
    folds: Folds | None = None,
    side: ThreadPoolExecutor | None = None,
) -> list[ClipRecord]:
    """diarize -> voices in this thread while faces runs in a second one, and sight (when the config
    runs it) in whichever of the two is free first; the records `... | m3 voices | m3 faces | m3 sight`
    would give.

    Why: the branches read different streams of the video and share nothing but the cache (whose
    entries are written atomically), and their heavy work (CTranslate2, onnxruntime, torch, dlib, the
    video decoder) runs outside the GIL, so on two cores they overlap almost fully where the shell
    pipe's processes overlap only as far as each stage streams. Sight needs only the clips, so it
    takes the first free thread: on long clips with speech faces finishes well before diarize (which
    runs on one thread) and sight leaves the critical path (`m3 watch`'s per-clip latency, `m3 run`'s
    wall time); on short clips where faces is the longer branch it follows voices as before. If one
    branch fails, the other stops at its next clip and the first failure is raised.

    ``side``: the one-worker executor whose thread runs the faces branch, kept by a caller that calls
    this for every pass of a video (:func:`process_video`); a thread started anew for each pass left
    about 80 MB more resident on 10 minutes of footage. Without it, one is made for this call.
    """
    stop = threading.Event()
    branch_ctx = dataclasses.replace(ctx, progress=_stoppable(ctx.progress, stop))  # both branches
    sight_free = threading.Lock() if "sight" in models.config.stages else None

    def sight_if_free() -> list[ClipRecord] | None:
        """Sight's records, computed here unless the other thread took it (or the config skips it)."""
        if sight_free is None or not sight_free.acquire(blocking=False):
            return None
        return roundtrip(_STEPS["sight"](records, models, branch_ctx, folds))

    def video_branch() -> tuple[list[ClipRecord], list[ClipRecord] | None]:
        try:
            seen = roundtrip(_STEPS["faces"](records, models, branch_ctx, folds))
            sighted = sight_if_free()
        except BaseException:
            stop.set()
            raise
        models.warm_memory_models()
        return seen, sighted

    with contextlib.ExitStack() as own:
        pool = side or own.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="m3-faces"))
        pending = pool.submit(video_branch)
        try:
            heard = records
            for stage in ("diarize", "voices"):
                heard = roundtrip(_STEPS[stage](heard, models, branch_ctx, folds))
                if on_stage:
                    on_stage(stage, len(heard))
            sighted = sight_if_free()
            if on_stage and sighted is not None:
                on_stage("sight", len(sighted))
        except _Stopped:
            pending.result()  # the other branch failed first: raise its error, not the stop
            raise
        except BaseException:
            stop.set()
            raise
        seen, sighted_there = pending.result()
    if on_stage:
        on_stage("faces", len(seen))
    merged = merge_faces(heard, seen, records)
    if sighted_there is not None:
        sighted = sighted_there
        if on_stage:
            on_stage("sight", len(sighted))
    if sighted is not None:
        merged = merge_sight(merged, sighted, records)
    return roundtrip(merged)


def content_id(path: Path, ctx: RunContext) -> str:
    """The video's content id (cached by path, size and mtime), or one clear error for a bad file."""
    from m3cli.stages.core import media

    return media.content_id(Path(path), ctx.cache)


#: Clips of a video each stage takes at a time in :func:`process_video` (10 minutes of 30-s clips).
#: A pass's records (about 0.4 MB a clip as objects) never matter beside the models. Not smaller:
#: a video of several passes peaks higher than one of a single pass, by a fixed amount (10 minutes
#: of footage in passes of 8 clips: about 1,990 MB against 1,850 in one pass; see
#: docs/scale-length.md). At 20, videos up to 10 minutes keep the single pass's peak, and longer
#: ones pay the difference once, not per hour.
CLIPS_PER_PASS = 20


def process_video(
    path: Path,
    models: Models,
    ctx: RunContext,
    on_stage: Callable[[str, int], None] | None = None,
    clips_per_pass: int = CLIPS_PER_PASS,
) -> HeldClips:
    """One video through every stage before ``index`` that the config runs; its records, in clip order.

    The clips go through the stages ``clips_per_pass`` at a time with one :class:`Folds` kept across
    the passes, which gives the records one pass over all of them would (the folds are what `m3 watch`
    keeps between its rounds), and each finished pass is held as JSON (:class:`HeldClips`): memory
    stays flat however long the video is. ``on_stage(stage, clips)`` is told when each stage has
    finished the whole video (progress reporting); the stages' progress counts the video's clips.
    """
    from m3cli.stages.segment import segment_video

    if ctx.cache is not None:
        ctx.cache.hold(renew=True)  # earlier videos' entries are done: the size cap may evict them
    segmented = roundtrip(segment_video(Path(path), models.config.segment, ctx.cache))
    if on_stage:
        on_stage("segment", len(segmented))
    held, fallbacks = HeldClips(), 0
    folds: Folds | None = Folds()
    video_ctx = dataclasses.replace(ctx, progress=_counted_across_passes(ctx.progress, len(segmented)))
    if models.config.whole_video:  # an option that needs every clip at once: one pass, nothing carried
        clips_per_pass, folds = len(segmented), None
    step = max(1, clips_per_pass)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="m3-faces") as side:
        for start in range(0, len(segmented), step):
            last = start + step >= len(segmented)
            told = _told_whole(on_stage, len(segmented)) if last and on_stage else None
            part = _through_stages(segmented[start : start + step], models, video_ctx, told, folds, side)
            fallbacks += _fallbacks(part)
            held.extend(part)
            del part
            trim_heap()  # the pass's freed pages, before the next pass allocates its own
    _warn_fallbacks(path, fallbacks, len(held))
    return held


def _told_whole(on_stage: Callable[[str, int], None], clips: int) -> Callable[[str, int], None]:
    """``on_stage`` told of a stage's last pass as of the whole video: the stage is done with it."""
    return lambda stage, _pass_clips: on_stage(stage, clips)


def _counted_across_passes(progress: Callable[..., Iterable], clips: int) -> Callable[..., Iterable]:
    """``progress`` as each stage sees it in :func:`process_video`: a pass's clips counted after the
    ones the stage took in earlier passes, out of the video's ``clips``."""
    taken: dict[str, int] = {}

    def counted(items: Iterable, desc: str = "", total: int | None = None, done: int = 0) -> Iterable:
        before = taken.get(desc, 0)
        taken[desc] = before + (total if total is not None else len(items))  # type: ignore[arg-type]
        return progress(items, desc, clips, done=before)

    return counted


def _fallbacks(records: Iterable[ClipRecord]) -> int:
    return sum(1 for r in records if r.memory and r.memory.fallback)


def _warn_fallbacks(path: Path | str, fallbacks: int, clips: int) -> None:
    if fallbacks:
        log.warning(
            "%s: %d of %d clips fell back to the offline memorizer (see each record's errors)",
            path,
            fallbacks,
            clips,
        )


def process_records(
    records: list[ClipRecord],
    models: Models,
    ctx: RunContext,
    on_stage: Callable[[str, int], None] | None = None,
    folds: Folds | None = None,
) -> list[ClipRecord]:
    """Segmented records of one video through every stage after ``segment`` up to ``index`` (not run).

    ``folds``: the stages' per-video state left by an earlier call, which these records (the clips
    that follow that call's, in order) continue; `m3 watch` keeps one while it runs, so clip k comes
    out as it would from the finished recording while each round works only on its new clips."""
    out = _through_stages(records, models, ctx, on_stage, folds)
    if out:
        _warn_fallbacks(out[0].video.path, _fallbacks(out), len(out))
    return out


def _through_stages(
    records: list[ClipRecord],
    models: Models,
    ctx: RunContext,
    on_stage: Callable[[str, int], None] | None = None,
    folds: Folds | None = None,
    side: ThreadPoolExecutor | None = None,
) -> list[ClipRecord]:
    """:func:`process_records` without its warning (:func:`process_video` says it once per video)."""
    stages = list(models.config.stages[1:])
    if models.config.parallel and "faces" in stages and records:
        records = perceive_side_by_side(records, models, ctx, on_stage, folds, side)
        stages = stages[stages.index("sight" if "sight" in stages else "faces") + 1 :]
    for stage in stages:
        if stage == "index" or not records:
            break
        records = roundtrip(_STEPS[stage](records, models, ctx, folds))
        if on_stage:
            on_stage(stage, len(records))
    return records


def index_video(
    records: Sequence[ClipRecord], memory: str | Path, models: Models, ctx: RunContext, checkpoint: Any = None
) -> IndexStats:
    """Commit one video's records to the memory through the index stage's public function; with
    ``checkpoint`` (:meth:`Folds.checkpoint`), the folds after them in the same commit."""
    from m3cli.stages.index.stage import index_records

    if checkpoint is None:
        return index_records(records, memory, models.text, models.config.index, ctx)
    return index_records(records, memory, models.text, models.config.index, ctx, checkpoint=checkpoint)


@dataclass
class VideoOutcome:
    """What became of one input video."""

    path: str
    video: str | None = None
    clips: int = 0
    error: str | None = None
    skipped: str | None = None


def run_videos(
    paths: Iterable[Path],
    models: Models,
    ctx: RunContext,
    memory: str | Path | None = None,
    keep_going: bool = False,
    on_video: Callable[[int, Path], None] | None = None,
    on_stage: Callable[[str, int], None] | None = None,
) -> Iterator[tuple[VideoOutcome, Sequence[ClipRecord]]]:
    """Each video through the pipeline, in order: indexed into ``memory`` when the config runs to
    ``index``, else its records handed back. A video whose content was already seen in this run is
    skipped (two copies of one file are one video). With ``keep_going`` a failing video is reported in
    its outcome and the others go on; without, the first failure raises.

    Progress hooks: ``on_video(k, path)`` when the k-th video (from 0) starts, ``on_stage(stage,
    clips)`` when a stage has finished it (``index`` included)."""
    from m3cli.stages.core.errors import M3Error

    seen: dict[str, str] = {}
    for number, path in enumerate(paths):
        if on_video:
            on_video(number, Path(path))
        outcome = VideoOutcome(path=str(path))
        try:
            vid = content_id(Path(path), ctx)
            outcome.video = vid
            if vid in seen:
                outcome.skipped = f"same content as {seen[vid]}"
                log.warning("%s: skipped, %s", path, outcome.skipped)
                yield outcome, []
                continue
            seen[vid] = str(path)
            records = process_video(Path(path), models, ctx, on_stage)
            outcome.clips = len(records)
            if models.config.until == "index" and records:
                if memory is None:
                    raise InputError("the pipeline runs to index but no memory was given (-o MEMORY)")
                index_video(records, memory, models, ctx)
                if on_stage:
                    on_stage("index", len(records))
        except M3Error as exc:
            if not keep_going:
                raise
            outcome.error = str(exc)
            yield outcome, []
            continue
        yield outcome, records
