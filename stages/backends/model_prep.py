"""The one-time preparation of the installed models, and which model-store files it makes.

Why a module of its own: the first process on a machine stores int8 copies of the Whisper models,
exports the speaker networks and the tagger to ONNX, builds the text embedder's graph and parses OCR's
model table (about 25 s of CPU in all), and with an empty store that used to happen in the middle of a
user's first `m3 run`. ``m3 models prepare`` does it up front (the installer and the quickstart call
it) with a line per step; ``m3 cache info`` and ``m3 cache prune`` ask :func:`current_files` which
store files this install uses, so older exports (replaced weights, another torch, names from before
content identity) show as stale and can be cleared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from m3cli.stages.core.errors import M3Error


@dataclass(frozen=True)
class Step:
    """One piece of one-time work: ``path()`` the store file it makes, ``run()`` makes (or loads) it."""

    name: str
    path: Callable[[], Path]
    run: Callable[[], object]


def _campplus_path() -> Path:
    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.speaker import campplus as speaker_campplus

    return onnx_export.export_path(speaker_campplus._export_spec(speaker_campplus.bundled_weights(), 192))


def _campplus_run() -> object:
    from m3cli.stages.backends.speaker.campplus import CamppModel

    return CamppModel()


def _segmentation_path() -> Path:
    from m3cli.stages.backends.diarizer import segmentation
    from m3cli.stages.backends.onnx import export as onnx_export

    return onnx_export.export_path(segmentation._export_spec(segmentation.bundled_checkpoint()))


def _segmentation_run() -> object:
    from m3cli.stages.backends.diarizer.segmentation import SegmentationModel

    return SegmentationModel()


def _tagger_path() -> Path:
    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.tagger import effnet as tagger_effnet

    return onnx_export.export_path(tagger_effnet.export_spec())


def _tagger_run() -> object:
    from m3cli.stages.backends.onnx import export as onnx_export
    from m3cli.stages.backends.tagger import effnet as tagger_effnet

    return onnx_export.cpu_session(tagger_effnet.export_spec())


def _embedder_path() -> Path:
    from m3cli.stages.backends.embed import OnnxEmbedder

    return OnnxEmbedder().graph_path()


def _embedder_run() -> object:
    from m3cli.stages.backends.embed import OnnxEmbedder

    embedder = OnnxEmbedder()
    embedder.load()
    return embedder


def _ocr_table_path() -> Path:
    from m3cli.stages.backends.ocr.rapid import parsed_table_path

    return parsed_table_path()


def _ocr_table_run() -> object:
    from m3cli.stages.backends.ocr.rapid import _import_engine

    return _import_engine()


def _whisper_copy_path(name: str | None) -> Callable[[], Path]:
    def path() -> Path:
        from m3cli.stages.backends.asr import int8_copy
        from m3cli.stages.backends.asr.faster_whisper import resolve_model

        return int8_copy.copy_path(resolve_model(name))

    return path


def _whisper_load(name: str | None) -> Callable[[], object]:
    def run() -> object:
        from m3cli.stages.backends.asr.faster_whisper import FasterWhisperAsr

        return FasterWhisperAsr(name)

    return run


STEPS: tuple[Step, ...] = (
    Step("whisper tiny.en -> int8", _whisper_copy_path(None), _whisper_load(None)),
    Step("whisper base -> int8", _whisper_copy_path("base"), _whisper_load("base")),
    Step("segmentation-3.0 -> ONNX", _segmentation_path, _segmentation_run),
    Step("campplus -> ONNX", _campplus_path, _campplus_run),
    Step("efficientnet-lite0 -> ONNX", _tagger_path, _tagger_run),
    Step("all-MiniLM-L6-v2 graph", _embedder_path, _embedder_run),
    Step("rapidocr model table", _ocr_table_path, _ocr_table_run),
)


def current_files() -> set[Path]:
    """The store files this install's models load (a model whose package is missing has none)."""
    out = set()
    for step in STEPS:
        try:
            out.add(step.path())
        except (M3Error, OSError, ImportError):
            continue
    return out


def prepare(say: Callable[[str], None]) -> list[tuple[str, Path | None, float, str | None]]:
    """Run every step (each is made once per machine; a made one only loads), saying each as it starts.
    Returns (step, store file, seconds, problem or None) per step; a failed step does not stop the rest."""
    done: list[tuple[str, Path | None, float, str | None]] = []
    for k, step in enumerate(STEPS, 1):
        path: Path | None = None
        try:
            path = step.path()
            state = "ready" if path.is_file() else "making"
        except (M3Error, OSError) as exc:
            done.append((step.name, None, 0.0, str(exc)))
            say(f"[{k}/{len(STEPS)}] {step.name}: {exc}")
            continue
        say(f"[{k}/{len(STEPS)}] {step.name}: {state} {path.name}")
        started = time.monotonic()
        try:
            step.run()
        except M3Error as exc:
            done.append((step.name, path, time.monotonic() - started, str(exc)))
            say(f"[{k}/{len(STEPS)}] {step.name}: {exc}")
            continue
        done.append((step.name, path, time.monotonic() - started, None))
    return done
