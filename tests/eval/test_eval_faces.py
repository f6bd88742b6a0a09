"""`m3 eval faces`: scoring, labels from file names, and real runs on the shared face photos."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, ROOT
from m3cli.stages.eval.faces import identity_of, score


def m3(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "M3_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "m3cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )


def test_identity_from_file_name():
    assert identity_of(Path("obama2.jpg")) == "obama"
    assert identity_of(Path("obama_small.jpg")) == "obama"
    assert identity_of(Path("biden.jpg")) == "biden"
    assert identity_of(Path("lin-manuel-miranda.png")) == "lin-manuel-miranda"


def test_score_counts_merges_and_splits():
    perfect = score(["a", "a", "b"], ["x", "x", "y"])
    assert perfect["purity"] == 1.0 and perfect["false_merges"] == 0 and perfect["splits"] == 0
    merged = score(["a", "a", "b", "c"], ["x", "x", "x", "y"])
    assert merged["false_merges"] == 1 and merged["splits"] == 0 and merged["purity"] == 0.75
    split = score(["a", "a", "a", "b"], ["x", "y", "z", "w"])
    assert split["splits"] == 2 and split["false_merges"] == 0 and split["purity"] == 1.0
    assert split["clusters_by_identity"] == {"a": ["x", "y", "z"], "b": ["w"]}


@pytest.mark.slow
def test_eval_labelled_photos(tmp_path):
    res = m3("eval", "faces", str(DATA / "fixture_src"), "--json", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    for mode in ("online", "batch"):
        s = report[mode]
        assert s["identities"] == 2 and s["false_merges"] == 0 and s["splits"] == 0 and s["purity"] == 1.0
    got = report["assigned"]  # images are fed in name order: biden*.jpg first
    assert got["biden.jpg"] == got["biden2.jpg"] == "<face_1>"
    assert got["obama.jpg"] == got["obama2.jpg"] == got["obama_small.jpg"] == "<face_2>"
    # photos with two people cannot be labelled by their file name: skipped and said so
    assert set(report["skipped"]) == {"obama_and_biden.jpg", "two_people.jpg"}
    text = m3("eval", "faces", str(DATA / "fixture_src"), cache=tmp_path)
    assert "online items=5 identities=2 clusters=2 purity=1.000 false_merges=0 splits=0" in text.stdout


@pytest.mark.slow
def test_eval_video_with_truth(tmp_path):
    truth = str(DATA / "fixture.truth.json")
    res = m3("eval", "faces", str(DATA / "fixture.mp4"), "--truth", truth, "--json", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)["online"]
    assert s["identities"] == 2 and s["clusters"] == 2 and s["false_merges"] == 0 and s["splits"] == 0
    assert s["items"] > 150


@pytest.mark.slow
def test_eval_bad_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, needle in [
        ([str(empty)], "no images"),
        ([str(DATA / "fixture.mp4")], "give --truth"),
        ([str(DATA / "fixture.mp4"), "--truth", str(tmp_path / "gone.json")], "gone.json: no such file"),
        ([str(DATA / "fixture_src"), "--backend", "nope"], "unknown face backend"),
    ]:
        res = m3("eval", "faces", *args, cache=tmp_path / "cache")
        assert res.returncode == 1 and needle in res.stderr and "Traceback" not in res.stderr, res.stderr
