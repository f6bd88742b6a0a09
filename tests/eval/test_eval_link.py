"""`m3 eval link` on real clips with hand-written truth: each person one face, one voice, one character."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DATA, HAMILTON, run_m3

LINK = DATA / "link"
CLIPS = {
    "latentsync_demo1_woman_outdoor": LINK / "latentsync_demo1_woman_outdoor.mp4",
    "latentsync_2people_turns": LINK / "latentsync_2people_turns.mp4",
    "grid_4people_turns": LINK / "grid_4people_turns.mp4",
    "short_hamilton_clip": HAMILTON,
}


@pytest.fixture(scope="module")
def perceived(tmp_path_factory) -> dict[str, Path]:
    """Each clip through segment..faces once (one cache for the module): name -> records file."""
    root = tmp_path_factory.mktemp("eval_link")
    env = {**os.environ, "M3_CACHE": str(root / "cache")}
    out = {}
    for name, video in CLIPS.items():
        records = root / f"{name}.jsonl"
        run_m3("-q", "run", video, "--until", "faces", "-o", records, env=env, check=True)
        out[name] = records
    return out


def evaluate(name: str, records: Path, *args: str) -> dict:
    truth = LINK / f"{name}.json"
    proc = run_m3("-q", "eval", "link", CLIPS[name], "--truth", truth, "--records", records, "--json", *args)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", sorted(CLIPS))
@pytest.mark.slow
def test_seen_speaking_joins_every_person_alone_given_the_true_speech(perceived, name):
    """The linker on real faces, lips and shots: with the truth's speech every person is joined."""
    report = evaluate(name, perceived[name], "--oracle-voices")
    assert report["joined"] == report["people"] >= 1, report["per_person"]
    assert report["false_joins"] == 0 and report["splits"] == 0 and report["purity"] == 1.0


@pytest.mark.parametrize("name", ["latentsync_2people_turns", "grid_4people_turns"])
@pytest.mark.slow
def test_meta_clips_cannot_link_people_who_share_the_screen(perceived, name):
    """M3-Agent's meta-clips need one face alone with one voice; here everyone is always on screen."""
    report = evaluate(name, perceived[name], "--oracle-voices", "--method", "meta")
    assert report["joined"] == 0 and report["false_joins"] == 0


@pytest.mark.parametrize("name", sorted(CLIPS))
@pytest.mark.slow
def test_the_whole_pipeline_never_merges_two_people(perceived, name):
    report = evaluate(name, perceived[name])
    assert report["false_joins"] == 0, report["per_person"]
    every_face_once = all(len(p["faces"]) <= 1 for p in report["per_person"].values())
    assert every_face_once, report["per_person"]


@pytest.mark.parametrize("name", ["latentsync_demo1_woman_outdoor", "short_hamilton_clip"])
@pytest.mark.slow
def test_the_whole_pipeline_joins_a_lone_speaker(perceived, name):
    report = evaluate(name, perceived[name])
    assert report["joined"] == report["people"] == 1, report["per_person"]


@pytest.mark.parametrize("name, joined", [("latentsync_2people_turns", 2), ("grid_4people_turns", 3)])
@pytest.mark.slow
def test_the_whole_pipeline_joins_people_taking_turns(perceived, name, joined):
    """With the pipeline's own speech: both men, and three of the four GRID speakers (the fourth speaks
    once, for 1.6 s, and gets no voice id), each one face, one voice and one character."""
    report = evaluate(name, perceived[name])
    assert report["joined"] >= joined and report["false_joins"] == 0, report["per_person"]


@pytest.mark.slow
def test_shot_changes_are_found_on_cuts_only(perceived):
    def shots(name: str) -> list[float]:
        lines = perceived[name].read_text().splitlines()
        return [t for line in lines for t in json.loads(line)["faces"].get("shots") or []]

    hamilton = shots("short_hamilton_clip")  # dissolve ~1.4-1.7 s, cuts at ~3.5 s and ~7.95 s
    assert any(1.2 <= t <= 1.9 for t in hamilton) and any(3.3 <= t <= 3.7 for t in hamilton)
    assert any(7.7 <= t <= 8.1 for t in hamilton)
    for name in ("latentsync_demo1_woman_outdoor", "latentsync_2people_turns", "grid_4people_turns"):
        assert shots(name) == [], name


@pytest.mark.slow
def test_eval_link_in_process_pipeline_and_bad_truth(perceived, tmp_path):
    """Without --records the pipeline runs in process (same cache: same records, same report)."""
    name = "latentsync_demo1_woman_outdoor"
    env = {**os.environ, "M3_CACHE": str(perceived[name].parent / "cache")}
    proc = run_m3("-q", "eval", "link", CLIPS[name], "--truth", LINK / f"{name}.json", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("people=1 joined=1 (1.00) false_joins=0 splits=0 purity=1.000")
    bad = tmp_path / "bad.json"
    bad.write_text('{"people": {"x": {"face": [[0, 1]]}}, "rttm": "missing.rttm"}')
    proc = run_m3("eval", "link", CLIPS[name], "--truth", bad, "--records", perceived[name])
    assert proc.returncode == 1 and b"missing.rttm does not exist" in proc.stderr
