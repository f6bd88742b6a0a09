"""Perception speed and accuracy on the real media in tests/data (and ../shared/media when present).

Targets: faces <= 0.5 s of compute per second of video at 5 fps on 640x360; diarize + voices real-time
factor <= 0.3; zero false merges on the face sets; DER <= 20% on the AMI dev excerpts; WER <= 10% on
jfk.wav. Compute is measured in-process with models already loaded (what a long video pays per
second); the cold command-line time of each stage (imports and model loading included) is shown beside.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import m3, machine, run_cmd, table  # noqa: E402

DATA = ROOT / "tests" / "data"
SHARED_FACES = ROOT.parent / "shared" / "media" / "faces"
VIDEOS = {
    "fixture.mp4 (49.8 s, 10 fps)": DATA / "fixture.mp4",
    "short_hamilton_clip.mp4 (10 s, 29.97 fps)": DATA / "short_hamilton_clip.mp4",
}


def _records(video: Path, cache):
    from m3cli.stages.segment import SegmentConfig, segment_video

    return segment_video(video, SegmentConfig(), cache)


def speed_rows(tmp: Path) -> list[list[object]]:
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.diarize import DiarizeConfig, diarize_records
    from m3cli.stages.faces import FacesConfig, load_model, run_faces
    from m3cli.stages.voices import VoicesConfig, voices_records

    rows = []
    face_cfg = FacesConfig()
    face_model = load_model(face_cfg)
    # warm the audio models once so the timed runs measure compute, not loading
    warm = Cache(tmp / "warm")
    voices_records(
        diarize_records(
            _records(DATA / "short_hamilton_clip.mp4", warm), DiarizeConfig(), RunContext(cache=warm)
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
        t0 = time.perf_counter()
        diarized = diarize_records(recs, DiarizeConfig(), ctx)
        t_diar = time.perf_counter() - t0
        t0 = time.perf_counter()
        voices_records(diarized, VoicesConfig(), ctx)
        t_voices = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_faces(recs, face_model, face_cfg, ctx)
        voices_records(diarize_records(recs, DiarizeConfig(), ctx), VoicesConfig(), ctx)
        t_rerun = time.perf_counter() - t0
        rows.append(
            [
                label,
                f"{t_faces / duration:.3f} s/s",
                f"{(t_diar + t_voices) / duration:.3f}",
                f"{t_rerun:.2f} s",
                *cold_rows(video, tmp / f"cold-{video.stem}"),
            ]
        )
    return rows


def cold_rows(video: Path, cache: Path) -> list[str]:
    env = {"M3_CACHE": str(cache)}
    seg = run_cmd(m3("segment", str(video)), env=env)
    out = []
    for stage in ("faces", "diarize"):
        run = run_cmd(m3(stage), env=env, stdin=seg.stdout)
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
            "diarize+voices RTF",
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
