"""`m3 report` on memories the real pipeline builds from real media, checked as HTML and in a real browser.

Four memories are built once for the module, each by the real stages run as commands:
- fixture: tests/data/fixture.mp4 (Obama's and Biden's photos while two LibriSpeech readers take
  turns), offline memorizer — two characters, each one face joined with one voice;
- quickstart: tests/data/short_hamilton_clip.mp4 through examples/quickstart.sh's pipeline, and the
  quickstart's question answered by `m3 ask`;
- llm: the fixture's perception memorized by a (loopback, scripted) OpenAI-compatible server, so the
  memory holds names, attributes and relationships; asked a question over two rounds;
- hostile: the quickstart clip with a transcript line holding `<script>`, `<img onerror>` and
  `javascript:`, as a speech recogniser could write them.

The browser tests drive Debian's `chromium` headless over the DevTools pipe (tests/support/browser.py)
and skip, saying so, only when no chromium is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import lancedb
import orjson
import pytest

from conftest import FIXTURE, HAMILTON, run_m3
from support.browser import Browser, find_chromium
from support.fake_openai import FakeOpenAI
from support.report_page import read_page

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
QUICKSTART_QUESTION = "Who talked about being a self starter?"
HOSTILE = (
    'I said <script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2"> '
    'then <a href="javascript:window.__pwned=3">click here</a> fine'
)
#: The scripted memorizer's reply for every fixture clip: ids only from the clip, names, an attribute,
#: a relationship and both equivalences.
LLM_MEMORY = {
    "episodic": [
        {"text": "<face_1> wears a dark suit and a white shirt", "start": 1.0, "end": 5.0},
        {"text": "<voice_2> reads a passage of a novel aloud", "start": 6.3, "end": 13.0},
    ],
    "semantic": [
        {"text": "Equivalence: <face_1>, <voice_1>", "kind": "equivalence"},
        {"text": "Equivalence: <face_2>, <voice_2>", "kind": "equivalence"},
        {"text": "The name of <voice_1> is Barack", "kind": "attribute"},
        {"text": "<face_2> is named Joe", "kind": "attribute"},
        {"text": "<face_1> speaks calmly and deliberately", "kind": "attribute"},
        {"text": "<voice_1> and <voice_2> are friendly colleagues", "kind": "relationship"},
    ],
    "equivalences": [["<face_1>", "<voice_1>"], ["<face_2>", "<voice_2>"]],
}

needs_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="no chromium on PATH: the real-browser checks need Debian's `chromium` "
    "(apt-get install -y chromium)",
)


@dataclass
class Built:
    memory: Path
    report: Path
    answers: Path | None = None
    records: bytes = b""  # the clip records indexed into the memory


def _m3(*args: object, env: dict, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)],
        input=stdin or b"",
        capture_output=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, f"m3 {args[0]}: {proc.stderr.decode()[-3000:]}"
    return proc.stdout


def _perceive(video: Path, env: dict) -> bytes:
    out = _m3("segment", video, env=env)
    for stage in ("diarize", "voices", "faces"):
        out = _m3(stage, env=env, stdin=out)
    return out


def _remember(perceived: bytes, memory: Path, env: dict, memorize_env: dict | None = None) -> bytes:
    """memorize | link | abstract | index -o memory; returns the records indexed."""
    out = _m3("memorize", "--frames", "0", env={**env, **(memorize_env or {})}, stdin=perceived)
    for stage in ("link", "abstract"):
        out = _m3(stage, env=env, stdin=out)
    _m3("index", "-o", memory, env=env, stdin=out)
    return out


def _report(memory: Path, out: Path, env: dict, *extra: object) -> Path:
    printed = _m3("report", memory, "-o", out, *extra, env=env)
    assert printed.decode().strip() == str(out), "m3 report prints the path of the page it wrote"
    return out


def _with_hostile_line(perceived: bytes) -> bytes:
    records = [orjson.loads(line) for line in perceived.splitlines()]
    records[0]["utterances"][0]["text"] = HOSTILE
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


@pytest.fixture(scope="module")
def memories(tmp_path_factory) -> dict[str, Built]:
    root = tmp_path_factory.mktemp("report")
    env = {**os.environ, **OFFLINE, "M3_CACHE": str(root / "cache")}
    built: dict[str, Built] = {}

    fixture_seen = _perceive(FIXTURE, env)
    fixture_records = _remember(fixture_seen, root / "fixture.lance", env)
    built["fixture"] = Built(
        root / "fixture.lance",
        _report(root / "fixture.lance", root / "fixture.html", env),
        records=fixture_records,
    )

    hamilton_seen = _perceive(HAMILTON, env)
    hamilton_records = _remember(hamilton_seen, root / "quickstart.lance", env)
    _m3("index", "-o", root / "both.lance", env=env, stdin=fixture_records + hamilton_records)
    built["both"] = Built(root / "both.lance", root / "both.html")
    answers = root / "quickstart.answers.jsonl"
    _m3("ask", root / "quickstart.lance", QUICKSTART_QUESTION, "-o", answers, env=env)
    built["quickstart"] = Built(
        root / "quickstart.lance",
        _report(root / "quickstart.lance", root / "quickstart.html", env, "--answers", answers),
        answers,
    )

    with FakeOpenAI() as server:
        server.responder = lambda body: json.dumps(LLM_MEMORY)
        llm = {"M3_LLM_BASE_URL": server.url, "M3_LLM_MODEL": "fake-vlm"}
        _remember(fixture_seen, root / "llm.lance", env, llm)
        server.responder = None
        server.script("I need to know who works with whom.\n[Search] friendly colleagues", "[Answer] Joe")
        llm_answers = root / "llm.answers.jsonl"
        _m3("ask", root / "llm.lance", "Who is Barack's colleague?", "-o", llm_answers, env={**env, **llm})
    built["llm"] = Built(
        root / "llm.lance",
        _report(root / "llm.lance", root / "llm.html", env, "--answers", llm_answers),
        llm_answers,
    )

    _remember(_with_hostile_line(hamilton_seen), root / "hostile.lance", env)
    hostile_answers = root / "hostile.answers.jsonl"
    _m3("ask", root / "hostile.lance", "What did they say about click here?", "-o", hostile_answers, env=env)
    built["hostile"] = Built(
        root / "hostile.lance",
        _report(root / "hostile.lance", root / "hostile.html", env, "--answers", hostile_answers),
        hostile_answers,
    )
    return built


def _characters(memory: Path) -> dict[str, dict]:
    rows = lancedb.connect(str(memory)).open_table("entities").to_arrow().to_pylist()
    return {r["entity"]: r for r in rows if r["kind"] == "character"}


def _equivalence_edges(memory: Path) -> list[dict]:
    rows = lancedb.connect(str(memory)).open_table("edges").to_arrow().to_pylist()
    return [r for r in rows if r["kind"] == "equivalence"]


def _assert_self_contained(page) -> None:
    assert page.tags.get("script") == 1, "one script: the page's own"
    assert not {"iframe", "link", "object", "embed", "base", "form"} & set(page.tags)
    assert not [a for a in page.attributes if a.startswith("on")], "no event-handler attributes"
    assert all(h.startswith("#") for h in page.hrefs), [h for h in page.hrefs if not h.startswith("#")][:3]
    assert all(s.startswith(("data:image/jpeg;base64,", "data:audio/ogg;base64,")) for s in page.srcs)
    assert page.dangling() == []


# ============================================================================== the page as HTML


@pytest.mark.slow
def test_fixture_report_shows_both_people_with_faces_voices_and_joins(memories):
    built = memories["fixture"]
    page = read_page(built.report)
    _assert_self_contained(page)
    characters = _characters(built.memory)
    assert len(characters) == 2 and page.count("card") == 2
    assert page.count("clip-detail") == 2 and page.count("clip-block") == 2
    # one timeline row per character, with both visible and speaking spans from the real perception
    assert page.count("tl-row") == 1 + 1 + 2  # axis, clips, one per character
    assert page.count("visible") >= 2 and page.count("speaking") >= 2
    # every character: a face crop and a voice sample cut from the video, embedded
    assert page.count("crop") == 2 and page.count("voice") == 2
    jpegs = [s for s in page.srcs if s.startswith("data:image/jpeg")]
    oggs = [s for s in page.srcs if s.startswith("data:audio/ogg")]
    assert jpegs and len(oggs) == 2
    assert max(len(s) for s in oggs) < 5.5 * 3_500 * 4 / 3 + 100, "voice samples are bounded (<= 5 s)"
    # the face and voice ids `m3 link` joined, with the weights the memory stores
    for edge in _equivalence_edges(built.memory):
        face, voice = (x.split(":", 1)[1] for x in (edge["src"], edge["dst"]))
        assert f"{face} {voice} {edge['weight']:g}" in page.text
    # selecting clip 0 shows its utterances with speakers and times, and its episodic memory
    for character in characters:
        assert character in page.text
    assert "Utterances" in page.text and "Episodic memory" in page.text
    # a line the reader of turn 2 says; Whisper spells its first word "Whomsoever" or "whom so ever"
    # depending on the CPU's float rounding, so the check rests on the words after it
    assert "thou ceased awake" in page.text


@pytest.mark.slow
def test_quickstart_report_answers_link_their_evidence_and_rounds(memories):
    built = memories["quickstart"]
    page = read_page(built.report)
    _assert_self_contained(page)
    answer = orjson.loads(built.answers.read_bytes().splitlines()[0])
    assert QUICKSTART_QUESTION in page.text
    assert page.count("answer") == 1
    assert page.count("round") == len(answer["trajectory"]) >= 1
    clip_links = [h for h in page.hrefs if h.startswith("#clip-")]
    for ev in answer["evidence"]:
        assert f"#clip-{ev['video']}-{ev['clip']}" in clip_links
    assert "self-starter" in page.text or "self starter" in page.text


@pytest.mark.slow
def test_llm_memory_report_shows_names_attributes_relationships_and_graph(memories):
    built = memories["llm"]
    page = read_page(built.report)
    _assert_self_contained(page)
    text = page.text
    assert "Barack — stated in clip 0" in text and "Joe — stated in clip 0" in text
    assert "speaks calmly and deliberately" in text and "are friendly colleagues" in text
    assert "Attributes" in text and "Relationships" in text
    # equivalence lines are not attributes: the joins table shows them
    assert "face voice link weight" in text
    assert page.tags.get("svg") == 2 and page.count("g-person") >= 2 and page.count("g-fact") >= 2
    # the two-round answer: both rounds, the search's results linked to memory lines
    answer = orjson.loads(built.answers.read_bytes().splitlines()[0])
    assert page.count("round") == len(answer["trajectory"]) == 2
    assert "friendly colleagues" in text


@pytest.mark.slow
def test_untrusted_memory_text_is_shown_as_text(memories):
    built = memories["hostile"]
    source = built.report.read_text(encoding="utf-8")
    page = read_page(built.report)
    _assert_self_contained(page)
    assert all(s.startswith("data:") for s in page.srcs), "the transcript's <img src=x> is no image"
    assert "javascript:" not in "".join(page.hrefs)
    assert "<script>window.__pwned" not in source and 'onerror="window' not in source
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in source
    # and the reader sees exactly what was said
    assert "<script>window.__pwned=1</script>" in page.text
    assert '<img src=x onerror="window.__pwned=2">' in page.text
    assert 'href="javascript:window.__pwned=3"' in page.text


# ============================================================================== limits and errors


@pytest.mark.slow
def test_large_memories_are_paged(memories, tmp_path):
    from m3cli.stages.report import ReportLimits, write_report

    built = memories["fixture"]
    video = next(iter(_characters(built.memory).values()))["video"]
    first = write_report(built.memory, tmp_path / "p1.html", limits=ReportLimits(max_clips=1))
    page = read_page(first.path)
    assert first.clips == 1 and page.count("clip-detail") == 1
    assert "Use --clips 1: for the next page" in page.text
    assert page.dangling() == []
    second = _report(built.memory, tmp_path / "p2.html", {**os.environ, **OFFLINE}, "--clips", "1:")
    page = read_page(second)
    assert (
        page.count("clip-detail") == 1 and f"clip-{video}-1" in page.ids and f"clip-{video}-0" not in page.ids
    )
    assert page.dangling() == []
    small = write_report(built.memory, tmp_path / "p3.html", limits=ReportLimits(max_page_lines=5))
    assert small.clips == 1 and f"--video {video} --clips 1:" in read_page(small.path).text


@pytest.mark.slow
def test_videos_left_off_a_page_are_listed_with_their_command(memories, tmp_path):
    from m3cli.stages.report import ReportLimits, write_report

    built = memories["both"]
    videos = sorted({r["video"] for r in _characters(built.memory).values()})
    assert len(videos) == 2
    stats = write_report(built.memory, built.report, limits=ReportLimits(max_videos=1))
    page = read_page(stats.path)
    assert stats.videos == 1 and page.dangling() == []
    assert "This memory holds 2 videos; 1 are on this page" in page.text
    assert f"m3 report {built.memory} --video {videos[1]} -o {videos[1]}.html" in page.text
    other = _report(built.memory, tmp_path / "other.html", {**os.environ, **OFFLINE}, "--video", videos[1])
    page = read_page(other)
    assert f"video-{videos[1]}" in page.ids and f"video-{videos[0]}" not in page.ids
    assert "Videos not on this page" not in page.text


@pytest.mark.slow
def test_report_of_a_memory_on_s3(memories, tmp_path):
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    from support.s3_server import s3_server

    secret = "s3cr3t-report-never-shown"
    with s3_server("memories", tmp_path, secret) as aws:
        # the cache the records were made with: records may point only into it
        env = {**os.environ, **OFFLINE, **aws, "M3_CACHE": str(memories["fixture"].memory.parent / "cache")}
        _m3("index", "-o", "s3://memories/fixture.lance", env=env, stdin=memories["fixture"].records)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "m3cli",
                "report",
                "s3://memories/fixture.lance",
                "-o",
                tmp_path / "s3.html",
            ],
            capture_output=True,
            env=env,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    page = read_page(tmp_path / "s3.html")
    _assert_self_contained(page)
    local = read_page(memories["fixture"].report)
    assert page.count("card") == local.count("card") == 2 and page.count("clip-detail") == 2
    assert page.count("crop") == 2, "face crops read from the bucket"
    assert len([s for s in page.srcs if s.startswith("data:audio/ogg")]) == 2
    assert secret.encode() not in proc.stderr + (tmp_path / "s3.html").read_bytes()


@pytest.mark.slow
def test_report_is_deterministic(memories, tmp_path):
    built = memories["fixture"]
    again = _report(built.memory, tmp_path / "again.html", {**os.environ, **OFFLINE})
    assert again.read_bytes() == built.report.read_bytes()


@pytest.mark.slow
def test_bad_input_is_one_error_line_and_no_page(tmp_path):
    out = tmp_path / "r.html"
    proc = run_m3("report", tmp_path / "missing.lance", "-o", out)
    assert proc.returncode == 1 and proc.stderr.decode().startswith("m3: error: ")
    assert proc.stderr.decode().count("\n") == 1 and not out.exists() and proc.stdout == b""
    proc = run_m3("report", tmp_path / "missing.lance", "--clips", "5:2")
    assert proc.returncode != 0 and b"Traceback" not in proc.stderr


@pytest.mark.slow
def test_bad_options_on_a_real_memory(memories, tmp_path):
    memory = memories["fixture"].memory
    out = tmp_path / "r.html"
    for args, words in (
        (["--video", "0123456789abcdef"], b"not in"),
        (["--clips", "5:2"], b"before the first"),
        (["--answers", str(memories["fixture"].report)], b"not JSON"),
        (["--answers", str(tmp_path / "none.jsonl")], b"no such file"),
    ):
        proc = run_m3("report", memory, "-o", out, *args)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.startswith("m3: error: ") and err.count("\n") == 1, err
        assert words in proc.stderr and not out.exists()
    proc = run_m3("report", memory, "-o", tmp_path)
    assert proc.returncode == 1 and b"is a directory" in proc.stderr


# ============================================================================== in a real browser

DOM_SUMMARY = """(() => {
  const links = [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href'));
  return {
    ready: document.body.dataset.ready,
    cards: [...document.querySelectorAll('.card h3')].map(h => h.textContent),
    clips: document.querySelectorAll('.clip-detail').length,
    open: [...document.querySelectorAll('.clip-detail')].filter(d => d.offsetParent !== null).length,
    links: links.length,
    dangling: links.filter(h => !document.getElementById(h.slice(1))),
    brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length,
    images: document.images.length,
    evidence: [...document.querySelectorAll('.ev, .ev-clip')]
      .map(a => a.getAttribute('href')).filter(Boolean),
  };
})()"""

AUDIO_DURATIONS = """Promise.all([...document.querySelectorAll('audio.voice')].map(a => new Promise(done => {
  if (a.readyState >= 1) return done(a.duration);
  a.addEventListener('loadedmetadata', () => done(a.duration));
  a.addEventListener('error', () => done(-1));
  a.load();
})))"""


def _sleep(browser: Browser, ms: int) -> None:
    browser.eval(f"new Promise(r => setTimeout(r, {ms}))")


@needs_chromium
@pytest.mark.slow
def test_fixture_report_in_headless_chromium(memories, tmp_path):
    built = memories["fixture"]
    with Browser(1280, 900) as browser:
        browser.open(built.report)
        dom = browser.eval(DOM_SUMMARY)
        assert dom["ready"] == "1", "the page's script ran to its end"
        assert sorted(dom["cards"]) == sorted(_characters(built.memory))
        assert dom["clips"] == 2 and dom["open"] == 1, "the first clip is open, the other hidden"
        assert dom["links"] > 20 and dom["dangling"] == []
        assert dom["images"] >= 2 and dom["brokenImages"] == 0
        durations = browser.eval(AUDIO_DURATIONS)
        assert len(durations) == 2 and all(1.0 <= d <= 5.5 for d in durations), durations

        # selecting clip 1 on the timeline opens its memory and utterances and closes clip 0's
        browser.eval("document.querySelectorAll('.clip-block')[1].click()")
        _sleep(browser, 100)
        shown = browser.eval(
            "[...document.querySelectorAll('.clip-detail')].filter(d => d.offsetParent !== null)"
            ".map(d => [d.dataset.clip, d.querySelectorAll('.utterances tr').length])"
        )
        assert len(shown) == 1 and shown[0][0] == "1" and shown[0][1] >= 1

        # search filters memory text on the page; a hit links to a line in a closed clip and opens it
        browser.eval(
            "const s = document.getElementById('search'); s.value = 'reciter';"
            "s.dispatchEvent(new Event('input'))"
        )
        _sleep(browser, 400)
        hits = browser.eval("[...document.querySelectorAll('#results a')].map(a => a.getAttribute('href'))")
        assert hits and not browser.eval("document.getElementById('search-results').hidden")
        assert browser.eval("document.getElementById('search-count').textContent").endswith(
            ("match", "matches")
        )
        browser.eval(f"location.hash = {json.dumps(hits[0])}")
        _sleep(browser, 200)
        assert browser.eval(f"document.getElementById({json.dumps(hits[0][1:])}).offsetParent !== null")

        shot = browser.screenshot(tmp_path / "fixture-report.png", full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        _keep_artifact(shot)
        assert browser.errors() == []


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart", "llm"])
def test_answers_and_cards_in_headless_chromium(memories, tmp_path, name):
    built = memories[name]
    with Browser(1280, 900) as browser:
        browser.open(built.report)
        dom = browser.eval(DOM_SUMMARY)
        assert dom["ready"] == "1" and dom["dangling"] == [] and dom["brokenImages"] == 0
        assert sorted(dom["cards"]) == sorted(
            c["name"] or c["entity"] for c in _characters(built.memory).values()
        )
        assert dom["evidence"], "the answer's evidence links to clips and lines"
        # following the answer's first evidence opens its clip
        first = browser.eval("document.querySelector('.answer .ev-clip').getAttribute('href')")
        browser.eval(f"location.hash = {json.dumps(first)}")
        _sleep(browser, 200)
        assert browser.eval(f"document.getElementById({json.dumps(first[1:])}).offsetParent !== null")
        rounds = browser.eval("document.querySelectorAll('.answer details.round').length")
        assert rounds == len(orjson.loads(built.answers.read_bytes().splitlines()[0])["trajectory"])
        _keep_artifact(browser.screenshot(tmp_path / f"{name}-report.png", full_page=True))
        assert browser.errors() == []


@needs_chromium
@pytest.mark.slow
def test_hostile_transcript_runs_nothing_in_chromium(memories):
    with Browser(1280, 900) as browser:
        browser.open(memories["hostile"].report)
        assert browser.eval("window.__pwned === undefined")
        said = browser.eval(
            "[...document.querySelectorAll('.utterances td')].map(td => td.textContent).join(' ')"
        )
        assert "<script>window.__pwned=1</script>" in said and 'onerror="window.__pwned=2"' in said
        assert browser.eval("document.querySelectorAll('script').length") == 1
        assert (
            browser.eval(
                "[...document.querySelectorAll('a')].filter(a => /^javascript:/i.test(a.href)).length"
            )
            == 0
        )
        # searching for the hostile text lists it as text too
        browser.eval(
            "const s = document.getElementById('search'); s.value = 'onerror';"
            "s.dispatchEvent(new Event('input'))"
        )
        _sleep(browser, 400)
        assert browser.eval("document.querySelectorAll('#results li').length") >= 1
        assert browser.eval("window.__pwned === undefined")
        assert browser.errors() == []


def _keep_artifact(path: Path) -> None:
    """Copy a screenshot to $M3_TEST_ARTIFACTS (CI keeps that folder) when it is set."""
    folder = os.environ.get("M3_TEST_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / path.name).write_bytes(path.read_bytes())
