"""`m3 report` on big memories (lazy sections instead of a cut) and its People section, on real memories.

Memories, built once for the module:
- two: the photo dev set's first two videos (tests/data/people/photos: Obama and Biden's photos with
  LibriSpeech readers, then Obama again with reader 367), each added with `m3 run --no-llm -o`, so the
  memory's people table holds Obama once across both videos;
- ten_hours: SYNTHETIC, one 10-hour video made by bench/synth_memory.py from the first real video's
  rows (tiled in time under a new video id);
- thousand: SYNTHETIC, 1,000 videos of ~30 s made the same way from both real videos;
- coffee: a silent 10-s video without people (tests/data/sight/video) through the perception stages.

The checks read the page's HTML with its lazy blocks inflated (every clip must be in the page), and
drive Debian's `chromium` headless (tests/support/browser.py): every clip of every video opens from its
timeline. Speed is the benchmark's (bench/scale_report.py); these tests check reachability and that
the page is written in lazy sections.
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

import lancedb
import pytest

from conftest import DATA, ROOT, run_m3
from support.browser import Browser, find_chromium
from support.report_page import Page, read_page

PHOTOS = DATA / "people" / "photos"
COFFEE = DATA / "sight" / "video" / "sam2_04_coffee.mp4"
OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
LAZY = re.compile(r'<script type="application/gzip" class="lazy" data-block="\d+">([A-Za-z0-9+/=]*)</script>')

needs_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="no chromium on PATH: the real-browser checks need Debian's `chromium` "
    "(apt-get install -y chromium)",
)


def _synth():
    """bench/synth_memory.py (the documented generator of synthetic memories from real rows)."""
    path = ROOT / "bench" / "synth_memory.py"
    if not path.exists():
        pytest.skip("bench/synth_memory.py is not in this checkout")
    spec = importlib.util.spec_from_file_location("synth_memory", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["synth_memory"] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def _m3(*args: object, env: dict, stdin: bytes | None = None) -> bytes:
    proc = run_m3(*map(str, args), input=stdin, env=env)
    assert proc.returncode == 0, f"m3 {args[0]}: {proc.stderr.decode()[-3000:]}"
    return proc.stdout


def _replicate(synth, source: Path, dest: Path, hours: float, videos: int) -> None:
    try:
        synth.replicate(source, dest, hours, videos)
    except ImportError:  # an indexer without build_indexes: the report needs no index
        import shutil

        shutil.rmtree(dest, ignore_errors=True)
        synth.replicate(source, dest, hours, videos, indexes=False)


@pytest.fixture(scope="module")
def memories(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pages")
    env = {**OFFLINE, "M3_CACHE": str(root / "cache")}
    two = root / "two.lance"
    for name in ("p1_obama_biden.mp4", "p2_obama_367.mp4"):
        _m3("run", PHOTOS / name, "--no-llm", "-o", two, env=env)
    out = _m3("segment", COFFEE, env=env)
    for stage in ("diarize", "voices", "faces"):
        out = _m3(stage, env=env, stdin=out)
    out = _m3("memorize", "--frames", "0", env=env, stdin=out)
    for stage in ("link", "abstract"):
        out = _m3(stage, env=env, stdin=out)
    _m3("index", "-o", root / "coffee.lance", env=env, stdin=out)
    synth = _synth()
    _replicate(synth, two, root / "ten_hours.lance", 10.0, 1)
    _replicate(synth, two, root / "thousand.lance", 1000 * 30 / 3600, 1000)
    return {
        "two": two,
        "coffee": root / "coffee.lance",
        "ten_hours": root / "ten_hours.lance",
        "thousand": root / "thousand.lance",
    }


_WRITTEN: dict[Path, Path] = {}


def _report(memory: Path, out: Path) -> Path:
    """The page of ``memory``, written by `m3 report` once per module (a 10-hour page takes a while)."""
    if memory not in _WRITTEN:
        printed = _m3("report", memory, "-o", out, env=OFFLINE)
        assert printed.decode().strip() == str(out)
        _WRITTEN[memory] = out
    return _WRITTEN[memory]


def _expanded(page: Path, tmp: Path) -> tuple[Page, int]:
    """The page with every lazy block inflated in place (what the browser shows once all are opened),
    read as HTML; and the number of lazy blocks."""
    source = page.read_text(encoding="utf-8")
    blocks = LAZY.findall(source)
    whole = LAZY.sub(lambda m: gzip.decompress(base64.b64decode(m.group(1))).decode("utf-8"), source)
    out = tmp / f"{page.stem}.expanded.html"
    out.write_text(whole, encoding="utf-8")
    return read_page(out), len(blocks)


def _clips(memory: Path) -> set[tuple[str, int]]:
    rows = lancedb.connect(str(memory)).open_table("clips").search().select(["video", "clip"]).limit(None)
    return {(r["video"], int(r["clip"])) for r in rows.to_arrow().to_pylist()}


def _clip_id(video: str, clip: int) -> str:
    return f"clip-{video}-{clip}"


#: Opens every video (a link to it) and every section of its clips (a timeline click on the first clip
#: not yet in the page) as a reader would; then every clip of the video must be in the page, linked
#: from its timeline block, and the video's last clip must open on screen.
REACH_ALL = """(async () => {
  const wait = async (ok) => {
    for (let i = 0; i < 2000; i++) { if (ok()) return true; await new Promise(r => setTimeout(r, 5)); }
    return false;
  };
  const shown = (id) => { const d = document.getElementById(id);
    return d && d.classList.contains('open') && d.offsetParent !== null; };
  const videos = [...document.querySelectorAll('section.video')];
  const missing = [];
  let opened = 0, clicks = 0;
  for (const v of videos) {
    // reach the video by a link, as a reader does: a script's `location.hash =` is a navigation the
    // browser drops beyond 200 in 10 s (Chromium), with no event the page could answer
    const link = document.querySelector('a[href="#' + v.id + '"]')
      || Object.assign(document.body.appendChild(document.createElement('a')), {href: '#' + v.id});
    link.click();
    if (!await wait(() => v.querySelector('.clip-detail.open'))) { missing.push(v.id); continue; }
    const blocks = [...v.querySelectorAll('.clip-block')];
    const ids = blocks.map(b => b.getAttribute('href').slice(1));
    for (let i = 0; i < blocks.length; i++) {
      if (document.getElementById(ids[i])) continue;
      blocks[i].click(); clicks++;
      if (!await wait(() => shown(ids[i]))) missing.push(ids[i]);
    }
    for (const id of ids) {
      const d = document.getElementById(id);
      if (d && d.closest('section.video') === v) opened++; else missing.push(id);
    }
    const last = blocks[blocks.length - 1];
    if (last && !shown(ids[ids.length - 1])) {
      last.click();
      if (!await wait(() => shown(ids[ids.length - 1]))) missing.push('last of ' + v.id);
    }
  }
  return {videos: videos.length, opened, clicks, missing: missing.slice(0, 20)};
})()"""

LOAD = """(() => { const n = performance.getEntriesByType('navigation')[0];
  return {lazy: document.querySelectorAll('script.lazy').length,
          live: document.querySelectorAll('.clip-detail').length,
          ready: document.body.dataset.ready}; })()"""


# ============================================================================== big memories


@pytest.mark.slow
def test_every_clip_of_a_ten_hour_video_is_in_the_page_in_lazy_sections(memories, tmp_path):
    memory = memories["ten_hours"]
    clips = _clips(memory)
    assert len({v for v, _ in clips}) == 1 and len(clips) > 1000, "one video, thousands of clips"
    html = _report(memory, memory.with_suffix(".html"))
    page = read_page(html)
    assert page.count("clip-detail") <= 25, "only the first section is markup at load"
    assert page.tags.get("script") > 10  # the page's script and its lazy blocks
    whole, blocks = _expanded(html, tmp_path)
    assert blocks >= len(clips) // 25
    assert {(v, c) for v, c in clips if _clip_id(v, c) in whole.ids} == clips, "every clip is in the page"
    assert whole.count("clip-detail") == len(clips) and whole.count("clip-block") == len(clips)
    assert whole.dangling() == []
    assert "clips are shown. Use --clips" not in whole.text, "no cut"


@needs_chromium
@pytest.mark.slow
def test_every_clip_of_a_ten_hour_video_opens_in_chromium(memories, tmp_path):
    memory = memories["ten_hours"]
    html = _report(memory, memory.with_suffix(".html"))
    clips = _clips(memory)
    with Browser(1280, 900, timeout=600) as browser:
        browser.open(html)
        state = browser.eval(LOAD)
        assert state["ready"] == "1" and state["lazy"] >= len(clips) // 25 and state["live"] <= 25
        reached = browser.eval(REACH_ALL)
        assert reached["missing"] == [] and reached["opened"] == len(clips), reached
        assert reached["clicks"] >= len(clips) // 25 - 1, "the sections were opened one by one"
        assert browser.eval("document.querySelectorAll('script.lazy').length") == 0, "all opened now"
        assert browser.errors() == []


@needs_chromium
@pytest.mark.slow
def test_search_hits_in_unopened_sections_open_their_clip(memories, tmp_path):
    memory = memories["ten_hours"]
    last = max(c for _, c in _clips(memory))
    said = [
        r["raw_text"]
        for r in lancedb.connect(str(memory))
        .open_table("nodes")
        .search()
        .where(f"clip = {last}")
        .select(["raw_text", "subkind"])
        .limit(None)
        .to_arrow()
        .to_pylist()
        if r["subkind"] == "speech"
    ]
    word = max(re.findall(r"[a-z]{5,}", " ".join(said).lower()), key=len)  # a word said at the very end
    html = _report(memory, memory.with_suffix(".html"))
    with Browser(1280, 900, timeout=120) as browser:
        browser.open(html)
        browser.eval(
            f"const s = document.getElementById('search'); s.value = {json.dumps(word)};"
            "s.dispatchEvent(new Event('input'))"
        )
        browser.eval("new Promise(r => setTimeout(r, 800))")
        hits = browser.eval("[...document.querySelectorAll('#results a')].map(a => a.getAttribute('href'))")
        assert hits, "the lazy sections' text is searched"
        target = hits[-1][1:]
        assert browser.eval(f"document.getElementById({json.dumps(target)}) === null"), "not loaded yet"
        browser.eval(f"location.hash = {json.dumps(hits[-1])}")
        browser.eval("new Promise(r => setTimeout(r, 500))")
        assert browser.eval(f"document.getElementById({json.dumps(target)}).offsetParent !== null")
        assert browser.errors() == []


@needs_chromium
@pytest.mark.slow
def test_a_thousand_video_memory_is_one_page_and_every_clip_opens(memories, tmp_path):
    memory = memories["thousand"]
    clips = _clips(memory)
    videos = {v for v, _ in clips}
    assert len(videos) == 1000
    html = _report(memory, memory.with_suffix(".html"))
    page = read_page(html)
    assert "Videos on this page (1000)" in page.text and "Videos not on this page" not in page.text
    whole, _ = _expanded(html, tmp_path)
    assert {(v, c) for v, c in clips if _clip_id(v, c) in whole.ids} == clips
    assert whole.dangling() == []
    with Browser(1280, 900, timeout=600) as browser:
        browser.open(html)
        assert browser.eval(LOAD)["ready"] == "1"
        reached = browser.eval(REACH_ALL)
        assert reached["videos"] == 1000 and reached["missing"] == [], reached
        assert reached["opened"] == len(clips)
        # Chromium's own note that it dropped fragment navigations (the walk makes over 200 in 10 s);
        # the page opened every clip regardless, through its click handler
        assert [e for e in browser.errors() if "Throttling navigation" not in e] == []


# ============================================================================== people across videos


def _people(memory: Path) -> list[dict]:
    out = _m3("people", memory, "--format", "jsonl", env=OFFLINE)
    return [json.loads(x) for x in out.splitlines()]


@pytest.mark.slow
def test_people_section_lists_each_person_across_the_two_real_videos(memories, tmp_path):
    memory = memories["two"]
    people = _people(memory)
    assert len(people) == 3 and sorted(len(p["videos"]) for p in people) == [1, 1, 2]
    html = _report(memory, memory.with_suffix(".html"))
    page = read_page(html)
    assert page.count("person-card") == 3 and "3 people across 2 videos" in page.text
    assert page.dangling() == []
    source = html.read_text(encoding="utf-8")
    for p in people:
        section = source[source.index(f'id="{p["id"].strip("<>")}"') :]
        section = section[: section.index("</article>")]
        card = read_page_text(section)
        for v in p["videos"]:
            assert Path(v["path"]).name in card
            assert v["recorded"][:10] in card, "the recording date of each video"
            assert f'href="#video-{v["video"]}"' in section
            # the clips they appear in, linked into that video
            assert f'href="#clip-{v["video"]}-' in section
        assert ("person-face" in section) or ("person-voice" in section), "a face or a voice"
    both = next(p for p in people if len(p["videos"]) == 2)
    section = source[source.index(f'id="{both["id"].strip("<>")}"') :]
    section = section[: section.index("</article>")]
    assert "person-face" in section, "Obama's face"
    assert section.count('class="pv"') == 2
    lines = re.findall(r'href="#(n-[^"]+)"', section)
    assert lines and all(x in page.ids for x in lines), "their lines link to the utterances"


@pytest.mark.slow
def test_a_stored_profile_is_on_its_persons_card(memories, tmp_path):
    """A profile stored by `m3 people summarize` (written here as it stores one: the LLM that writes
    it is tested in tests/stages/people/test_person_summary.py) is on that person's card only."""
    import shutil

    from m3cli.stages.people.edit import save_profiles

    memory = tmp_path / "two.lance"
    shutil.copytree(memories["two"], memory)
    both = next(p for p in _people(memory) if len(p["videos"]) == 2)
    text = "Speaks in both videos, a day apart."
    save_profiles(
        memory, [{"person": both["id"], "text": text, "evidence": ["x:0:e0"], "model": "m", "digest": "d"}]
    )
    html = tmp_path / "two.html"
    _m3("report", memory, "-o", html, env=OFFLINE)
    source = html.read_text(encoding="utf-8")
    card = source[source.index(f'id="{both["id"].strip("<>")}"') :]
    card = card[: card.index("</article>")]
    assert text in card and "written by m from 1 cited lines" in read_page_text(card)
    assert source.count(text) == 1


@needs_chromium
@pytest.mark.slow
def test_people_links_open_their_clips_in_chromium(memories, tmp_path):
    html = _report(memories["two"], memories["two"].with_suffix(".html"))
    with Browser(1280, 900, timeout=60) as browser:
        browser.open(html)
        links = browser.eval(
            "[...document.querySelectorAll('#people a[href^=\"#clip-\"]')].map(a => a.getAttribute('href'))"
        )
        assert links
        for href in links:
            browser.eval(f"location.hash = {json.dumps(href)}")
            browser.eval("new Promise(r => setTimeout(r, 100))")
            assert browser.eval(f"document.getElementById({json.dumps(href[1:])}).offsetParent !== null"), (
                href
            )
        assert browser.eval("document.querySelectorAll('#people .person-card').length") == 3
        # each person's player plays their character's voice sample once the card is on screen
        browser.eval("document.getElementById('people').scrollIntoView()")
        browser.eval("new Promise(r => setTimeout(r, 300))")
        voices = browser.eval(
            "[...document.querySelectorAll('audio.person-voice')].map(a => (a.getAttribute('src') || '')"
            ".slice(0, 22))"
        )
        assert voices and all(v == "data:audio/ogg;base64," for v in voices), voices
        assert browser.errors() == []


@needs_chromium
@pytest.mark.slow
def test_people_of_a_thousand_videos_link_into_unopened_videos(memories, tmp_path):
    html = _report(memories["thousand"], memories["thousand"].with_suffix(".html"))
    with Browser(1280, 900, timeout=120) as browser:
        browser.open(html)
        links = browser.eval(
            "[...document.querySelectorAll('#people a[href^=\"#clip-\"]')].map(a => a.getAttribute('href'))"
        )
        lazy = [h for h in links if browser.eval(f"document.getElementById({json.dumps(h[1:])}) === null")]
        assert lazy, "some of a person's clips are in videos not opened yet"
        browser.eval(f"location.hash = {json.dumps(lazy[-1])}")
        browser.eval("new Promise(r => setTimeout(r, 500))")
        assert browser.eval(f"document.getElementById({json.dumps(lazy[-1][1:])}).offsetParent !== null")
        assert browser.errors() == []


@pytest.mark.slow
def test_a_memory_without_people_has_no_people_section(memories, tmp_path):
    memory = memories["coffee"]
    assert lancedb.connect(str(memory)).open_table("people").count_rows() == 0
    page = read_page(_report(memory, memory.with_suffix(".html")))
    assert "people" not in page.ids and page.count("person-card") == 0
    assert "#people" not in page.hrefs


def read_page_text(markup: str) -> str:
    """The text of a piece of the page's markup (tags dropped, entities decoded)."""
    import html

    return html.unescape(re.sub(r"<[^>]*>", "", markup))


def test_lazy_blocks_hold_exactly_the_markup_and_no_angle_bracket():
    """The packing is lossless and leaves nothing that could end the block or open an element."""
    from m3cli.stages.report.lazy import _packed
    from m3cli.stages.report.markup import el

    markup = el("p", '</script><script>alert(1)</script> & "quotes"', class_="x")
    packed = _packed(markup)
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", packed)
    assert gzip.decompress(base64.b64decode(packed)).decode() == markup
    assert _packed(markup) == packed, "deterministic (gzip mtime 0)"
