"""The whole pipeline on the real fixture video: each character joins one person's face and voice.

fixture.mp4 alternates Obama's photo while LibriSpeech speaker 1688 reads and Biden's photo while
speaker 2033 reads (tests/data/fixture.truth.json). After perception, offline memorize, link, abstract and
index, the memory must hold exactly two face+voice characters, each joining the face seen during one
reader's turns with that reader's voice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import lancedb
import pytest

from conftest import DATA, FIXTURE
from m3cli.commands import COMMANDS

NEEDED = ("segment", "diarize", "voices", "faces", "memorize", "link", "abstract", "index")


def _registered() -> set[str]:
    return set(COMMANDS)


def _overlap(spans, start, end) -> float:
    return sum(max(0.0, min(e, end) - max(s, start)) for s, e in spans)


@pytest.mark.slow
def test_fixture_characters_join_face_and_voice(tmp_path, cache_dir):
    missing = [c for c in NEEDED if c not in _registered()]
    if missing:
        pytest.skip(f"perception commands not registered yet: {', '.join(missing)} (m3cli/commands/*_cmd.py)")
    truth = json.loads((DATA / "fixture.truth.json").read_text())
    out = tmp_path / "mem.lance"
    records = tmp_path / "records.jsonl"
    m3 = f"{sys.executable} -m m3cli"
    pipeline = (
        f"{m3} segment {FIXTURE} | {m3} diarize | {m3} voices | {m3} faces | {m3} memorize | "
        f"{m3} link | {m3} abstract | tee {records} | {m3} index -o {out}"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], capture_output=True, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]

    clips = [json.loads(line) for line in records.read_text().splitlines()]
    mapping = clips[-1]["characters"]
    # who was on screen / speaking during each ground-truth turn
    face_of: dict[str, set[str]] = {p: set() for p in truth["people"]}
    voice_of: dict[str, set[str]] = {p: set() for p in truth["people"]}
    for turn in truth["turns"]:
        s, e = turn["start"], turn["end"]
        for c in clips:
            for t in c.get("faces", {}).get("tracks", []):
                if _overlap(t["spans"], s, e) > 0.5 * (e - s):
                    face_of[turn["person"]].add(t["face_id"])
            for u in c.get("utterances", []):
                if u.get("speaker") and _overlap([(u["start"], u["end"])], s, e) > 1.0:
                    voice_of[turn["person"]].add(u["speaker"])
    chars = {}
    for person in truth["people"]:
        assert face_of[person] and voice_of[person], (person, face_of, voice_of)
        ids = face_of[person] | voice_of[person]
        found = {mapping[i] for i in ids}
        assert len(found) == 1, f"{person}: face/voice ids {sorted(ids)} map to {sorted(found)}"
        chars[person] = found.pop()
    assert chars["obama"] != chars["biden"]

    table = lancedb.connect(str(out)).open_table("entities").to_arrow().to_pylist()
    members = {r["entity"]: set(r["members"]) for r in table if r["kind"] == "character"}
    for c in chars.values():
        assert any(m.startswith("<face_") for m in members[c]) and any(
            m.startswith("<voice_") for m in members[c]
        )
        assert members[c] == {i for i, ch in mapping.items() if ch == c}
