"""The checks behind ``scripts/gpu_check.sh``: each GPU path of m3 on CUDA and on the CPU, on tests/data.

Run by the shell script inside the scratch virtualenv that holds the GPU extras; it can also be run
directly with any Python that has m3 installed. Each path prints one line:

    faces     ok               cuda 1.9 s, cpu 21.4 s: x11.3 (100 frames, 112 faces on both)
    pyannote  missing weights  pass --diarizer-model DIR (a local pyannote pipeline with config.yaml)
    align     failed           <the error, one line>

Times are the work itself after one warm-up call (model loading excluded), so the speed-up is what a
long video sees. The CPU side runs with m3's own thread settings ([threads] in m3.toml, M3_*_THREADS).
Outputs of the two devices are compared loosely (face counts, transcript words, embedding cosine): a
CUDA path that is fast but wrong is a failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FACE_VIDEOS = ("fixture.mp4", "short_hamilton_clip.mp4")
SPEECH_VIDEO = "fixture.mp4"
FACE_FPS = 2.0
EMBED_TEXTS = 2000


class MissingWeights(Exception):
    """The path cannot run because its weights are not on this machine (not a failure of m3)."""


class CheckFailed(Exception):
    """The path ran but is wrong or unusable on CUDA."""


@dataclass
class Timing:
    cuda_s: float
    cpu_s: float
    detail: str

    def line(self) -> str:
        ratio = self.cpu_s / self.cuda_s if self.cuda_s > 0 else float("inf")
        return f"cuda {self.cuda_s:.2f} s, cpu {self.cpu_s:.2f} s: x{ratio:.1f} ({self.detail})"


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds of one call of ``work`` after a warm-up call (first calls pay for kernels and caches)."""
    work()
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def _torch_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise CheckFailed(f"torch {torch.__version__} sees no CUDA device (a CPU-only torch build?)")


def _face_frames() -> list[Any]:
    from m3cli.stages.core.media_frames import sample_frames
    from m3cli.stages.core.media_probe import probe

    frames = []
    for name in FACE_VIDEOS:
        path = DATA / name
        frames += sample_frames(path, name, 0, 0.0, probe(path).duration, fps=FACE_FPS).images
    return frames


def check_faces(args: argparse.Namespace) -> Timing:
    """insightface through onnxruntime's CUDA execution provider against its CPU provider."""
    folder = Path(args.insightface_dir or os.environ.get("M3_INSIGHTFACE_DIR")
                  or "~/.insightface/models/buffalo_l").expanduser()
    if not any(folder.glob("*.onnx")):
        raise MissingWeights(f"no insightface pack in {folder}: unzip buffalo_l there, "
                             "or pass --insightface-dir")
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        raise CheckFailed(f"onnxruntime {onnxruntime.__version__} has no CUDAExecutionProvider "
                          "(onnxruntime-gpu missing, or CPU onnxruntime installed beside it)")
    from m3cli.stages.backends.face.insightface import InsightFaceModel

    frames = _face_frames()
    counts = {}
    seconds = {}
    for device in ("cuda", "cpu"):
        model = InsightFaceModel(model_dir=folder, device=device)
        seconds[device], found = timed(lambda m=model: [len(m.detect(f)) for f in frames])
        counts[device] = sum(found)
        if device == "cuda" and model._load().models["detection"].session.get_providers()[0] != \
                "CUDAExecutionProvider":
            raise CheckFailed("insightface fell back to the CPU provider on --device cuda")
    if abs(counts["cuda"] - counts["cpu"]) > max(2, counts["cpu"] // 20):
        raise CheckFailed(f"faces found differ: {counts['cuda']} on cuda, {counts['cpu']} on cpu")
    return Timing(seconds["cuda"], seconds["cpu"],
                  f"{len(frames)} frames, {counts['cuda']} faces on cuda, {counts['cpu']} on cpu")


def _speech() -> Any:
    from m3cli.stages.core.media_audio import clip_audio
    from m3cli.stages.core.media_probe import probe

    path = DATA / SPEECH_VIDEO
    return clip_audio(path, SPEECH_VIDEO, 0, 0.0, probe(path).duration)


def _words(transcript: Any) -> list[str]:
    return [w.text.strip().lower().strip(".,?!") for seg in transcript.segments for w in seg.words]


def check_whisperx(args: argparse.Namespace) -> Timing:
    """whisperx batched ASR plus wav2vec2 alignment (the diarize stage's production backend)."""
    _torch_cuda()
    from m3cli.stages.backends.asr.faster_whisper import bundled_model_dir
    from m3cli.stages.backends.asr.whisperx import WhisperxAsr
    from m3cli.stages.core.errors import M3Error

    model = args.asr_model or str(bundled_model_dir())
    align = args.align_model or os.environ.get("M3_ALIGN_MODEL")
    audio = _speech()
    words = {}
    seconds = {}
    for device in ("cuda", "cpu"):
        asr = WhisperxAsr(model, device=device, align_model=align)
        try:
            asr._aligner("en")
        except M3Error as exc:
            if align:
                raise CheckFailed(str(exc)) from None
            raise MissingWeights(f"whisperx's English alignment model is not cached here ({exc}); "
                                 "pass --align-model DIR (a local wav2vec2 CTC model)") from None
        seconds[device], transcript = timed(lambda a=asr: a.transcribe(audio, "en"))
        words[device] = _words(transcript)
    same = sum(a == b for a, b in zip(words["cuda"], words["cpu"], strict=False))
    if not words["cuda"] or same < 0.8 * max(len(words["cpu"]), 1):
        raise CheckFailed(f"transcripts differ: {same} of {len(words['cpu'])} cpu words match on cuda")
    return Timing(seconds["cuda"], seconds["cpu"],
                  f"{len(audio) / 16000:.0f} s of speech, {len(words['cuda'])} aligned words, {same} same")


def check_pyannote(args: argparse.Namespace) -> Timing:
    """A local pyannote speaker-diarization pipeline (diarize --diarizer pyannote)."""
    folder = args.diarizer_model or os.environ.get("M3_PYANNOTE_DIR")
    if not folder or not (Path(folder).expanduser() / "config.yaml").is_file():
        raise MissingWeights("pass --diarizer-model DIR (or set M3_PYANNOTE_DIR): a local pyannote "
                             "speaker-diarization pipeline with config.yaml and its models")
    _torch_cuda()
    from m3cli.stages.backends.diarizer.pyannote import PyannoteDiarizer

    audio = _speech()
    speakers = {}
    seconds = {}
    for device in ("cuda", "cpu"):
        diarizer = PyannoteDiarizer(folder, device=device)
        seconds[device], turns = timed(lambda d=diarizer: d.turns(audio, None, None))
        speakers[device] = len({t.speaker for t in turns})
    if speakers["cuda"] != speakers["cpu"]:
        raise CheckFailed(f"speakers differ: {speakers['cuda']} on cuda, {speakers['cpu']} on cpu")
    return Timing(seconds["cuda"], seconds["cpu"], f"{speakers['cuda']} speakers on both (fixture has 2)")


def _texts() -> list[str]:
    words = (DATA / "jfk.ref.txt").read_text().split()
    return [f"<character_{i % 7}> " + " ".join(words[i % len(words):][:12]) for i in range(EMBED_TEXTS)]


def check_embed(args: argparse.Namespace) -> Timing:
    """The bundled MiniLM through the embedder's torch backend (``M3_EMBED_BACKEND=torch``), the one that
    runs on CUDA (the onnx default is CPU-only), on CUDA against the CPU."""
    _torch_cuda()
    import numpy as np

    from m3cli.stages.backends.embed import TorchEmbedder

    texts = _texts()
    vectors = {}
    seconds = {}
    for device in ("cuda", "cpu"):
        embedder = TorchEmbedder(device=device)
        seconds[device], vectors[device] = timed(lambda e=embedder: e.embed(texts))
    cosine = float(np.min(np.sum(vectors["cuda"] * vectors["cpu"], axis=1)))
    if cosine < 0.99:
        raise CheckFailed(f"cuda and cpu embeddings disagree (lowest cosine {cosine:.3f})")
    return Timing(seconds["cuda"], seconds["cpu"], f"{len(texts)} lines, lowest cpu/cuda cosine {cosine:.4f}")


CHECKS: dict[str, Callable[[argparse.Namespace], Timing]] = {
    "faces": check_faces,
    "whisperx": check_whisperx,
    "pyannote": check_pyannote,
    "embed": check_embed,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--insightface-dir")
    parser.add_argument("--asr-model")
    parser.add_argument("--align-model")
    parser.add_argument("--diarizer-model")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before no new check starts")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget
    failed = 0
    for name, check in CHECKS.items():
        if time.monotonic() > deadline:
            print(f"{name:<9} failed           not started: the time budget ({args.budget:.0f} s) is spent",
                  flush=True)
            failed += 1
            continue
        try:
            status, detail = "ok", check(args).line()
        except MissingWeights as exc:
            status, detail = "missing weights", str(exc)
        except Exception as exc:  # noqa: BLE001 - any error is this path's result, the others still run
            status, detail = "failed", " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
            failed += 1
        print(f"{name:<9} {status:<16} {detail}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
