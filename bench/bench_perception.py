"""Perception speed and accuracy on the real media in tests/data (and ../shared/media when present).

Targets: faces <= 0.5 s of compute per second of video at 5 fps on 640x360; diarize + voices <= 0.15
CPU-seconds per audio second and <= 1.3x plain faster-whisper tiny.en on the same audio; zero false
merges on the face sets; turn DER <= 20% on the AMI dev excerpts with no speaker count (utterances
<= 30%); fixture DER <= 5%; WER <= 10% on jfk.wav. Compute is measured in-process with models already
loaded (what a long video pays per second); the cold command-line time of each stage (imports and
model loading included) is shown beside.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

from bench.common import DIARIZE_DEFAULT, m3, machine, run_cmd, table  # noqa: E402

DATA = ROOT / "tests" / "data"
SHARED_FACES = ROOT.parent / "shared" / "media" / "faces"
VIDEOS = {
    "fixture.mp4 (49.8 s, 10 fps)": DATA / "fixture.mp4",
    "short_hamilton_clip.mp4 (10 s, 29.97 fps)": DATA / "short_hamilton_clip.mp4",
    "libri5.mp4 (29.9 s, 5 speakers)": DATA / "libri5.mp4",
}
SHARED_DIAR = ROOT.parent / "shared" / "media" / "diarization"


def _records(video: Path, cache):
    from m3cli.stages.segment import SegmentConfig, segment_video

    return segment_video(video, SegmentConfig(), cache)


def speed_rows(tmp: Path) -> list[list[object]]:
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.diarize.stage import DiarizeConfig, diarize_records
    from m3cli.stages.faces.stage import FacesConfig, load_model, run_faces
    from m3cli.stages.voices import VoicesConfig, voices_records

    rows = []
    face_cfg = FacesConfig()
    face_model = load_model(face_cfg)
    # warm the audio models once so the timed runs measure compute, not loading
    warm = Cache(tmp / "warm")
    voices_records(
        diarize_records(
            _records(DATA / "short_hamilton_clip.mp4", warm),
            DiarizeConfig(second_reading="off"),
            RunContext(cache=warm),
        ),
        VoicesConfig(),
        RunContext(cache=warm),
    )
    for label, video in VIDEOS.items():
        cache = Cache(tmp / video.stem)
        ctx = RunContext(cache=cache)
        recs = _records(video, cache)
        duration = recs[0].video.duration
        t0 = time.perf_counter()
        run_faces(recs, face_model, face_cfg, ctx)
        t_faces = time.perf_counter() - t0
        c0 = time.process_time()
        diarized = diarize_records(recs, DiarizeConfig(second_reading="off"), ctx)
        t_diar = time.process_time() - c0
        c0 = time.process_time()
        voices_records(diarized, VoicesConfig(), ctx)
        t_voices = time.process_time() - c0
        t_asr = plain_asr_seconds(recs, cache)
        t0 = time.perf_counter()
        run_faces(recs, face_model, face_cfg, ctx)
        voices_records(diarize_records(recs, DiarizeConfig(second_reading="off"), ctx), VoicesConfig(), ctx)
        t_rerun = time.perf_counter() - t0
        rows.append(
            [
                label,
                f"{t_faces / duration:.3f} s/s",
                f"{(t_diar + t_voices) / duration:.3f} ({(t_diar + t_voices) / t_asr:.2f}x ASR)",
                f"{t_rerun:.2f} s",
                *cold_rows(video, tmp / f"cold-{video.stem}"),
            ]
        )
    return rows


def plain_asr_seconds(recs, cache) -> float:
    """CPU seconds of plain faster-whisper tiny.en over the same clips' audio: faster-whisper's default
    settings (beam 5, its full temperature ladder, no word timestamps, no VAD), as the peer of the
    real-footage bench runs it, on the same CTranslate2 model m3 bundles."""
    from m3cli.stages.backends.asr import make_asr
    from m3cli.stages.core import media, media_audio

    asr = _plain_asr.get("m") or _plain_asr.setdefault("m", make_asr("faster-whisper"))
    whisper = asr._model  # type: ignore[attr-defined]
    total = 0.0
    for r in recs:
        path = media.source_path(r.video, cache)
        audio = media_audio.clip_audio(path, r.video.id, r.clip.index, r.clip.start, r.clip.end, cache=cache)
        c0 = time.process_time()
        segments, _ = whisper.transcribe(audio, language="en")
        list(segments)  # the segments are decoded lazily
        total += time.process_time() - c0
    return total


_plain_asr: dict = {}


def cold_rows(video: Path, cache: Path) -> list[str]:
    env = {"M3_CACHE": str(cache)}
    seg = run_cmd(m3("segment", str(video)), env=env)
    out = []
    for stage in ("faces", "diarize"):
        args = m3(stage, *DIARIZE_DEFAULT) if stage == "diarize" else m3(stage)  # as the default install
        run = run_cmd(args, env=env, stdin=seg.stdout)
        out.append(f"{run.seconds:.1f} s / {run.peak_rss_mb:.0f} MB")
        if stage == "diarize":
            voices = run_cmd(m3("voices"), env=env, stdin=run.stdout)
            out.append(f"{voices.seconds:.1f} s / {voices.peak_rss_mb:.0f} MB")
    return out


def _eval(*args: str) -> dict:
    return json.loads(run_cmd(m3("eval", *args, "--json")).stdout)


def accuracy_rows() -> list[list[object]]:
    rows = []
    der_args = [
        str(DATA / "dev00.wav"),
        str(DATA / "dev01.wav"),
        "--rttm",
        str(DATA / "debug.development.rttm"),
        "--uem",
        str(DATA / "debug.development.uem"),
    ]
    for label, extra in (("default", []), ("--speakers 2", ["--speakers", "2"])):
        result = _eval("diarization", *der_args, *extra)
        for f in result["files"]:
            rows.append(
                [
                    f"DER {Path(f['file']).name} ({label}), collar 0.25 s",
                    f"turns {f['turns']['der']:.1%}, utterances {f['utterances']['der']:.1%}",
                    f"{f['turns']['hyp_speakers']} of {f['ref_speakers']} speakers found",
                ]
            )
        overall = result["overall_der"]
        rows.append(
            [
                f"DER dev00+dev01 ({label})",
                f"turns {overall['turns']:.1%}, utterances {overall['utterances']:.1%}",
                "",
            ]
        )
    more = [(DATA / "libri5.mp4", DATA / "libri5.rttm")]
    if SHARED_DIAR.is_dir():
        more.append((SHARED_DIAR / "sample.wav", SHARED_DIAR / "sample.rttm"))
    for media_file, rttm in more:
        f = _eval("diarization", str(media_file), "--rttm", str(rttm))["files"][0]
        rows.append(
            [
                f"DER {media_file.name} (default)",
                f"turns {f['turns']['der']:.1%}, utterances {f['utterances']['der']:.1%}",
                f"{f['turns']['hyp_speakers']} of {f['ref_speakers']} speakers found",
            ]
        )
    fixture = _eval("diarization", str(DATA / "fixture.mp4"), "--rttm", str(DATA / "fixture.rttm"))
    f = fixture["files"][0]
    rows.append(
        [
            "DER fixture.mp4 (default)",
            f"turns {f['turns']['der']:.1%}, utterances {f['utterances']['der']:.1%}",
            f"{f['turns']['hyp_speakers']} of {f['ref_speakers']} speakers found",
        ]
    )
    asr = _eval("asr", str(DATA / "jfk.wav"), "--ref", str(DATA / "jfk.ref.txt"))
    rows.append(["WER jfk.wav (tiny.en)", f"{asr['wer']:.1%}", f"{asr['reference_words']} words"])
    face_sets = [("tests/data/fixture_src", DATA / "fixture_src")]
    if SHARED_FACES.is_dir():
        face_sets.append(("shared/media/faces", SHARED_FACES))
    for label, folder in face_sets:
        res = _eval("faces", str(folder))["online"]
        rows.append(
            [
                f"faces {label}",
                f"purity {res['purity']:.2f}, false merges {res['false_merges']}, splits {res['splits']}",
                f"{res['items']} photos, {res['identities']} identities",
            ]
        )
    truth = _eval("faces", str(DATA / "fixture.mp4"), "--truth", str(DATA / "fixture.truth.json"))["online"]
    rows.append(
        [
            "faces fixture.mp4 detections",
            f"purity {truth['purity']:.2f}, false merges {truth['false_merges']}, splits {truth['splits']}",
            f"{truth['items']} detections",
        ]
    )
    return rows


def main() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="m3-bench-perception-"))
    try:
        speed = speed_rows(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = table(
        f"perception speed ({machine()})",
        [
            "video",
            "faces compute per video second",
            "diarize+voices CPU s per audio s",
            "cached rerun (all three)",
            "m3 faces cold (wall / peak RSS)",
            "m3 diarize cold",
            "m3 voices cold",
        ],
        speed,
    )
    text += "\n" + table("perception accuracy", ["what", "score", "note"], accuracy_rows())
    return text


if __name__ == "__main__":
    print(main())
