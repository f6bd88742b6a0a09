"""Recording times on real media: dated copies of tests/data videos (re-muxed with the metadata a
camera or phone writes, tests/data/time/make_dated.py), their clip records, a memory of several days,
and `m3 ask` questions across days (tests/data/time/questions.jsonl, written before the answerer ran)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import DATA, run_m3
from m3cli.schemas.records import ClipRecord
from m3cli.stages.ask.memory import LanceMemory
from m3cli.stages.ask.nodes import Scope
from m3cli.stages.ask.offline import OfflineAnswerer
from m3cli.stages.ask.wording import evidence_of
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.batch.stage import apply_manifest_time, manifest_times
from m3cli.stages.configs.segment import SegmentConfig
from m3cli.stages.index.stage import index_records
from m3cli.stages.segment import segment_video
from support.fake_openai import FakeOpenAI

TIME = DATA / "time"
QUESTIONS = TIME / "questions.jsonl"
_spec = importlib.util.spec_from_file_location("make_dated", TIME / "make_dated.py")
assert _spec is not None and _spec.loader is not None
make_dated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_dated)

WHEN = {
    "day1.mp4": ("2026-11-12T09:30:00+00:00", "container"),
    "day2.mov": ("2026-11-13T10:15:00+01:00", "container"),  # the QuickTime date keeps its offset
    "day3.mkv": ("2026-11-14T08:00:00+00:00", "container"),
    "undated.mp4": (None, None),
}


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_dated.make_all(tmp_path_factory.mktemp("days"))


def _videos(stdout: bytes) -> list[dict]:
    return [orjson.loads(line)["video"] for line in stdout.splitlines()]


@pytest.mark.slow
def test_recording_time_from_the_container(days: dict[str, Path], cache_dir: Path) -> None:
    for name, path in days.items():
        videos = _videos(run_m3("segment", path, check=True).stdout)
        assert {(v.get("recorded"), v.get("recorded_source")) for v in videos} == {WHEN[name]}, name


@pytest.mark.slow
def test_recorded_at_fills_in_only_what_the_file_does_not_say(days: dict[str, Path], cache_dir: Path) -> None:
    out = run_m3(
        "segment",
        "--recorded-at",
        "2026-11-10T18:00:00+01:00",
        days["undated.mp4"],
        days["day1.mp4"],
        check=True,
    )
    got = {Path(v["path"]).name: (v.get("recorded"), v.get("recorded_source")) for v in _videos(out.stdout)}
    assert got == {"undated.mp4": ("2026-11-10T18:00:00+01:00", "given"), "day1.mp4": WHEN["day1.mp4"]}
    # without a time, the file's modification time only when asked, marked as a guess
    os.utime(days["undated.mp4"], (1_800_000_000, 1_800_000_000))
    (v,) = {json.dumps(v) for v in _videos(run_m3("segment", days["undated.mp4"], check=True).stdout)}
    assert "recorded" not in json.loads(v)
    guessed = _videos(run_m3("segment", "--recorded-from-file-time", days["undated.mp4"], check=True).stdout)[
        0
    ]
    assert guessed["recorded_source"] == "file-time-guess"
    from datetime import datetime

    start = datetime.fromisoformat(guessed["recorded"]).timestamp()
    assert start == pytest.approx(1_800_000_000 - guessed["duration"], abs=1.0)
    bad = run_m3("segment", "--recorded-at", "last tuesday", days["undated.mp4"])
    assert bad.returncode != 0 and b"--recorded-at 'last tuesday' is not a date-time" in bad.stderr


def test_manifest_field(days: dict[str, Path], tmp_path: Path) -> None:
    manifest = tmp_path / "days.jsonl"
    manifest.write_text(
        "\n".join(
            json.dumps({"path": str(days[n]), "recorded": t})
            for n, t in (("undated.mp4", "2026-11-11T07:00:00-05:00"), ("day1.mp4", "2020-01-01T00:00:00Z"))
        )
        + "\n"
    )
    times = manifest_times([manifest])
    config = SegmentConfig(recorded_at="2026-11-10T18:00:00+01:00")  # the batch-wide --recorded-at
    for name, want in (
        ("undated.mp4", ("2026-11-11T07:00:00-05:00", "manifest")),  # the manifest beats --recorded-at
        ("day1.mp4", WHEN["day1.mp4"]),  # the file's own time beats both
    ):
        records = segment_video(days[name], config)
        apply_manifest_time(records, times.get(os.path.abspath(days[name])))
        assert {(r.video.recorded, r.video.recorded_source) for r in records} == {want}
    manifest.write_text(json.dumps({"path": "x.mp4", "recorded": "soon"}) + "\n")
    with pytest.raises(Exception, match=r"days.jsonl:1: recorded 'soon' is not a date-time"):
        manifest_times([manifest])


# ---------------------------------------------------------------- a memory of several days (fast)
SAID = {  # what each video's memory says (speech lines), so the answers can be checked line by line
    "day1.mp4": "Let us plan the garden on Saturday.",
    "day2.mov": "The bakery opens at seven tomorrow.",
    "day3.mkv": "I fixed the bicycle this morning.",
    "undated.mp4": "Nobody knows when this was said.",
}


def _with_lines(records: list[ClipRecord], text: str) -> list[ClipRecord]:
    """Each clip's memory: the first clip holds the one line, the others none (nothing said there)."""
    out = []
    for r in records:
        data = r.to_json()
        said = [
            {"text": f'<character_1> says: "{text}"', "start": r.clip.start + 1.0, "end": r.clip.start + 3.0}
        ]
        data["memory"] = {"source": "offline", "episodic": said if r.clip.index == 0 else [], "semantic": []}
        data["characters"] = {"<voice_1>": "<character_1>"}
        out.append(ClipRecord.model_validate(data))
    return out


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeOpenAI() as s:
        yield s


@pytest.fixture(scope="module")
def memory(days: dict[str, Path], server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real clip records of the four videos (their real recording times), each with one line."""
    path = tmp_path_factory.mktemp("mem") / "days.lance"
    embedder = make_embedder("openai", base_url=server.url, model="fake-embed")
    records = [
        r for name, p in days.items() for r in _with_lines(segment_video(p, SegmentConfig()), SAID[name])
    ]
    index_records(records, path, embedder)
    return path


def _ask(memory: Path, server: Any, question: str, now: str | None = None) -> tuple[Any, list[dict]]:
    embedder = make_embedder("openai", base_url=server.url, model="fake-embed")
    view = LanceMemory.open(memory)
    a = OfflineAnswerer(view, lambda q: embedder.embed([q])[0], Scope(), 0.5, now=now)
    ans = a.answer(question)
    return ans, evidence_of(a, ans.cited if ans.supported else [])


@pytest.mark.slow
def test_questions_across_days(memory: Path, server: Any) -> None:
    ans, ev = _ask(memory, server, "What did people say on November 13?")
    assert ans.text == (
        f'On November 13, 2026: <character_1> says "{SAID["day2.mov"]}" (day2.mov, 1.0-3.0 s, '
        "2026-11-13 10:15:01) (undated.mp4: recording time unknown, not counted)."
    )
    assert [(e["file"], e["at"]) for e in ev] == [("day2.mov", "2026-11-13T10:15:01+01:00")]
    ans, _ = _ask(memory, server, "What was said yesterday?")  # now: the end of the newest recording
    assert ans.text.startswith("Yesterday (November 13, 2026):") and SAID["day2.mov"] in ans.text
    ans, _ = _ask(memory, server, "What was said yesterday?", now="2026-11-13T20:00:00+01:00")
    assert ans.text.startswith("Yesterday (November 12, 2026):") and SAID["day1.mp4"] in ans.text
    ans, ev = _ask(memory, server, "What was said after November 12?")
    assert {e["file"] for e in ev} == {"day2.mov", "day3.mkv"}
    ans, _ = _ask(memory, server, "What did people say on November 20?")
    assert not ans.supported
    assert ans.text == "Nothing was recorded on November 20, 2026; the memory covers Nov 12\u201314, 2026."
    ans, _ = _ask(memory, server, "What was said about the bakery on 2026-11-12?")
    assert not ans.supported and ans.text.startswith("On November 12, 2026, nothing about that is said")


def test_first_and_last_time(memory: Path, server: Any) -> None:
    """<character_1> is each video's own id: the answer gives each video's last time, newest first, and
    names the video whose time is unknown."""
    ans, ev = _ask(memory, server, "When was <character_1> last heard?")
    assert ans.text == (
        "<character_1> is each video's own id, so it may be 3 different people: "
        "last heard on November 14, 2026 at 08:00:03 in day3.mkv (day3.mkv, 1.0-3.0 s, 2026-11-14 08:00:01); "
        "last heard on November 13, 2026 at 10:15:03 in day2.mov (day2.mov, 1.0-3.0 s, 2026-11-13 10:15:01); "
        "last heard on November 12, 2026 at 09:30:03 in day1.mp4 (day1.mp4, 1.0-3.0 s, 2026-11-12 09:30:01) "
        "(also in undated.mp4, whose recording time is unknown)."
    )
    assert [e["file"] for e in ev] == ["day3.mkv", "day2.mov", "day1.mp4"]


def test_every_citation_carries_its_date(memory: Path, server: Any) -> None:
    ans, ev = _ask(memory, server, "Who speaks first?")
    assert "(day1.mp4, 1.0-3.0 s, 2026-11-12 09:30:01)" in ans.text
    assert "(day3.mkv, 1.0-3.0 s, 2026-11-14 08:00:01)" in ans.text
    assert "(undated.mp4, 1.0-3.0 s)" in ans.text  # unknown: no date made up
    assert {e["file"]: e.get("at") for e in ev}["undated.mp4"] is None


def test_old_memory_without_the_column_still_opens(
    memory: Path, server: Any, tmp_path: Path, days: dict[str, Path]
) -> None:
    """A memory written before clips.recorded: its clips table without the column reads as unknown."""
    import lance

    old = tmp_path / "old.lance"
    shutil.copytree(memory, old)
    ds = lance.dataset(str(old / "clips.lance"))
    ds.drop_columns(["recorded"])
    manifest = json.loads((old / "m3.manifest.json").read_text())
    manifest["tables"]["clips"] = lance.dataset(str(old / "clips.lance")).version
    (old / "m3.manifest.json").write_text(json.dumps(manifest))
    ans, _ = _ask(old, server, "Who speaks first?")
    assert "(day1.mp4, 1.0-3.0 s)" in ans.text and "2026" not in ans.text
    ans, _ = _ask(old, server, "What did people say on November 13?")
    assert not ans.supported and "does not know when its videos were recorded" in ans.text
    # a dated video added to it is stored without the column, and the memory keeps answering
    tags = {"creation_time": "2026-11-16T12:00:00Z"}
    late = make_dated.remux(days["day1.mp4"], tmp_path / "late.mp4", tags)
    records = _with_lines(segment_video(late, SegmentConfig()), "Added to an old memory.")
    assert records[0].video.recorded == "2026-11-16T12:00:00+00:00"
    index_records(records, old, make_embedder("openai", base_url=server.url, model="fake-embed"))
    assert "recorded" not in lance.dataset(str(old / "clips.lance")).schema.names
    ans, _ = _ask(old, server, "What was said about an old memory?")
    assert "(late.mp4, 1.0-3.0 s)" in ans.text


def test_llm_window_tool_takes_dates(memory: Path, server: Any) -> None:
    """The LLM path: [Window] <date> returns the lines of the videos recorded then, each with its date;
    every rendered line carries its date."""
    from m3cli.stages.ask.loop import Asker
    from m3cli.stages.ask.questions import Question
    from m3cli.stages.backends.llm import LlmClient
    from m3cli.stages.configs.ask import AskConfig

    server.requests.clear()
    server.script("[Window] yesterday", "[Window] November 20", "[Search] bicycle", "[Answer] the bakery")
    embedder = make_embedder("openai", base_url=server.url, model="fake-embed")
    client = LlmClient(server.url, "fake-model", max_retries=1, backoff=0.01, timeout=5)
    asker = Asker(LanceMemory.open(memory), embedder, client, AskConfig(), memory_name=str(memory))
    rec = asker.ask(Question("What was said yesterday?"))
    assert rec["error"] is None
    day = rec["trajectory"][0]
    assert day["query"] == "yesterday (November 13, 2026)" and len(day["results"]) == 1
    seen = [b["messages"][-1]["content"] for b in server.chat_requests]  # what the model was shown
    assert SAID["day2.mov"] in seen[1] and "2026-11-13 10:15:01" in seen[1]
    assert all(said not in seen[1] for n, said in SAID.items() if n != "day2.mov")
    assert "Nothing was recorded on November 20, 2026; the memory covers Nov 12\u201314, 2026." in seen[2]
    assert "2026-11-14 08:00:01" in seen[3]  # a search result carries its date too
    assert {e["at"] for e in rec["evidence"]} >= {"2026-11-13T10:15:01+01:00"}  # evidence: absolute times


# ---------------------------------------------------------------- end to end (real models)
@pytest.mark.slow
def test_batch_of_dated_videos_answers_the_question_set(days: dict[str, Path], tmp_path: Path) -> None:
    """`m3 batch` of the four videos, then every question of tests/data/time/questions*.jsonl."""
    mem = tmp_path / "mem.lance"
    run_m3("batch", *days.values(), "-o", mem, "--no-llm", check=True)
    failures = []
    lines = QUESTIONS.read_text().splitlines() + (TIME / "questions_heldout.jsonl").read_text().splitlines()
    for line in lines:
        q = json.loads(line)
        args = ["ask", mem, q["question"], "--no-llm"] + (["--now", q["now"]] if "now" in q else [])
        rec = orjson.loads(run_m3(*args, check=True).stdout)
        failures += [f"{q['id']}: {why}" for why in check_expectation(rec, q["expect"])]
    assert not failures, failures


def check_expectation(rec: dict, want: dict) -> list[str]:
    """What an answer record misses of a question's expectations (empty: it meets them)."""
    note = rec["trajectory"][0]["note"] or ""
    files = {e.get("file") for e in rec["evidence"]}
    out = []
    if "form" in want and f"question form: {want['form']}" not in note:
        out.append(f"form: {note}")
    out += [f"cites no {f}" for f in want.get("files", []) if f not in files]
    out += [f"cites {f}" for f in want.get("not_files", []) if f in files]
    out += [f"answer lacks {c!r}" for c in want.get("contains", []) if c.lower() not in rec["answer"].lower()]
    if "contains_for_undated" in want and want["contains_for_undated"] not in rec["answer"]:
        out.append("undated video cited with a date")
    if want.get("supported") is False and "(unsupported)" not in note:
        out.append("answered as supported")
    return out


@pytest.mark.slow
def test_watch_dates_a_live_source_by_the_clock(
    days: dict[str, Path], tmp_path: Path, cache_dir: Path
) -> None:
    """`m3 watch` on a recording as a camera writes it (MPEG-TS): its start is the wall-clock time at
    the live edge less the media already there, kept in the watch state; --recorded-at overrides it."""
    from datetime import datetime, timezone

    import lance

    camera = make_dated.remux(days["undated.mp4"], tmp_path / "camera.ts", {}, fmt="mpegts")
    before = datetime.now(timezone.utc)
    mem, state = tmp_path / "live.lance", tmp_path / "state"
    run_m3("watch", camera, "-o", mem, "--until-eof", "--no-llm", "--state", state, check=True)
    after = datetime.now(timezone.utc)
    rows = lance.dataset(str(mem / "clips.lance")).to_table(columns=["recorded"]).to_pylist()
    (start,) = {r["recorded"] for r in rows}
    saved = json.loads((state / "state.json").read_text())["recorded"]
    assert start == saved
    length = float(lance.dataset(str(mem / "clips.lance")).to_table(columns=["end"])["end"].to_pylist()[-1])
    when = datetime.fromisoformat(start)
    assert before.timestamp() - length - 2 <= when.timestamp() <= after.timestamp() - length + 2
    given = tmp_path / "given.lance"
    run_m3(
        "watch",
        camera,
        "-o",
        given,
        "--until-eof",
        "--no-llm",
        "--state",
        tmp_path / "state2",
        "--recorded-at",
        "2026-11-15T07:00:00+01:00",
        check=True,
    )
    rows = lance.dataset(str(given / "clips.lance")).to_table(columns=["recorded"]).to_pylist()
    assert {r["recorded"] for r in rows} == {"2026-11-15T07:00:00+01:00"}
