"""The whole pipeline on the real fixture video: each character joins one person's face and voice.

fixture.mp4 alternates Obama's photo while LibriSpeech speaker 1688 reads and Biden's photo while
speaker 2033 reads (tests/data/fixture.truth.json). After perception, offline memorize, link, abstract and
index, the memory must hold exactly two face+voice characters, each joining the face seen during one
reader's turns with that reader's voice.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict

import lancedb
import pytest

from conftest import DATA, FIXTURE
from m3cli.commands import COMMANDS
from m3cli.stages.core.memory_store import open_memory
from m3cli.stages.report.gather import gather

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


LINK = DATA / "link"
SPANS = re.compile(r"from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) s")


def _rttm(path) -> list[tuple[str, float, float]]:
    turns = []
    for line in path.read_text().splitlines():
        f = line.split()
        if f and f[0] == "SPEAKER":
            turns.append((f[7], float(f[3]), float(f[3]) + float(f[4])))
    return turns


@pytest.mark.slow
@pytest.mark.parametrize("name", ["grid_4people_turns", "latentsync_2people_turns"])
def test_every_turn_is_in_the_memory_at_its_own_time(m3, tmp_path, cache_dir, name):
    """`m3 run` on real videos: every reference turn of each speaker is a memory line of that speaker's
    voice at the turn's own time (the grid's sentence said twice is two nodes; the two-person video's
    first turn, which the ASR does not transcribe, is there as speech not transcribed), the speaking
    spans come from the turns, and who is seen is one line, not one per pair."""
    video = LINK / f"{name}.mp4"
    people = json.loads((LINK / f"{name}.json").read_text())["people"]
    out = tmp_path / f"{name}.lance"
    env = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
    m3("run", video, "--no-llm", "-o", out, env=env, check=True)
    nodes = lancedb.connect(str(out)).open_table("nodes").to_arrow().to_pylist()
    episodic = [n for n in nodes if n["kind"] == "episodic"]
    said = [n for n in episodic if n["subkind"] in ("speech", "untranscribed")]
    truth = _rttm(video.with_suffix(".rttm"))
    voice_of: dict[str, set[str]] = defaultdict(set)
    lines_of: dict[tuple[str, float], set[str]] = {}
    for person, s, e in truth:
        per_voice: dict[str, float] = defaultdict(float)
        for n in said:
            per_voice[n["entities"][0]] += _overlap([(n["t_start"], n["t_end"])], s, e)
        voice, covered = max(per_voice.items(), key=lambda kv: kv[1])
        assert covered >= 0.5 * (e - s), f"{person} {s:.2f}-{e:.2f}: best covered {covered:.2f} s by {voice}"
        voice_of[person].add(voice)
        lines_of[(person, s)] = {
            n["id"]
            for n in said
            if n["entities"] == [voice] and _overlap([(n["t_start"], n["t_end"])], s, e) >= 0.5
        }
    assert all(len(v) == 1 for v in voice_of.values()), voice_of  # one voice per person, every turn
    assert len({next(iter(v)) for v in voice_of.values()}) == len(voice_of)  # and a voice per person
    # those who speak twice (on the grid top_left at 1.0 s and 16.0 s, top_right at 3.5 s and 12.5 s):
    # lines of their own in each turn, at least 0.5 s of it ("BIMBLU F2 now." twice is two nodes)
    twice = [(p, s) for p, s, _ in truth if sum(q == p for q, _, _ in truth) == 2]
    for p in {p for p, _ in twice}:
        first, second = (lines_of[k] for k in twice if k[0] == p)
        assert first and second and not first & second, (p, first, second)
    assert all(n["weight"] == 1.0 and n["occurrences"] == [n["id"]] for n in episodic)
    # speaking spans: every reference turn inside a span of that person's voice line
    speaking = {
        n["entities"][0]: SPANS.findall(n["raw_text"]) for n in episodic if n["subkind"] == "speaking"
    }
    for person, s, e in truth:
        spans = [(float(a), float(b)) for a, b in speaking[next(iter(voice_of[person]))]]
        assert _overlap(spans, s, e) >= 0.5 * (e - s), (person, s, e, spans)
    # everyone seen all along: one line naming them all, no pairwise co-occurrence lines
    [present] = [n for n in episodic if n["subkind"] == "present"]
    assert present["raw_text"].startswith(f"{len(people)} faces are seen in this clip: ")
    assert len(present["entities"]) == len(people)
    assert not any("together" in n["raw_text"] or "both speak" in n["raw_text"] for n in episodic)
    # the report's timeline: speaking bars are the turns (speech not transcribed included), and the
    # clip's transcript lists each untranscribed stretch at its time
    data = gather(open_memory(out))
    [shown] = data.videos
    characters = {c.id: c for c in shown.characters}
    for person, s, e in truth:
        voice = next(iter(voice_of[person]))
        [c] = [c for c in characters.values() if voice in c.members]
        assert _overlap(c.speaking, s, e) >= 0.5 * (e - s), (person, s, e, c.speaking)
    untranscribed = [n for n in said if n["subkind"] == "untranscribed"]
    listed = {u.node: u for clip in shown.clips for u in clip.utterances}
    for n in untranscribed:
        u = listed[n["id"]]
        assert (u.start, u.end, u.text) == (n["t_start"], n["t_end"], "(speaks, not transcribed)")
