"""What m3 prints and writes: escaped file names, one line per failure, plural forms, summaries, and
outputs written through to devices and FIFOs with the user's umask."""

from __future__ import annotations

import pytest

from conftest import DATA, FIXTURE, run_m3

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


def test_batch_escapes_file_names_and_names_each_failure_once(tmp_path, cache_dir):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    hostile = ["clear\x1b[2J.mp4", "title\x1b]0;pwned\x07.mp4", "x\nm3: error: FORGED.mp4"]
    for i, name in enumerate(hostile):
        (inbox / name).write_bytes(b"not a video at all %d" % i)
    (inbox / "photo.mp4").write_bytes((DATA / "fixture_src" / "obama.jpg").read_bytes())
    for verbose in ((), ("-v",)):  # summary only, and progress lines too
        proc = run_m3(*verbose, "batch", inbox, "-o", tmp_path / "mem.lance", env=OFFLINE)
        err = proc.stderr.decode()
        assert proc.returncode == 1
        assert "\x1b" not in err and "\x07" not in err
        assert not any(line.startswith("m3: error: FORGED") for line in err.splitlines())
        for name in ("clear\\x1b[2J.mp4", "title\\x1b]0;pwned\\x07.mp4", "x\\nm3: error: FORGED.mp4"):
            assert err.count(name) == 1, (name, err)  # named once, escaped
        assert err.count("photo.mp4") == 1 and "still image (JPEG)" in err
        assert "4 videos: 0 indexed (0 clips)" in err and "0 duplicates, 4 failed" in err


def test_a_still_image_renamed_as_a_video_is_refused(tmp_path, cache_dir):
    from PIL import Image

    src = DATA / "fixture_src" / "biden.jpg"
    cases = {"a.mp4": "JPEG", "b.mkv": "PNG", "c.mov": "BMP"}
    for name, fmt in cases.items():
        Image.open(src).convert("RGB").save(tmp_path / name, format=fmt)
        proc = run_m3("segment", tmp_path / name)
        [line] = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 1 and f"still image ({fmt})" in line and proc.stdout == b""
    assert run_m3("segment", FIXTURE).returncode == 0  # a real video still is one


@pytest.mark.parametrize(
    "n,word,text", [(1, "clip", "1 clip"), (0, "clip", "0 clips"), (2, "round", "2 rounds")]
)
def test_counts_are_plural_only_when_they_should_be(n, word, text):
    from m3cli.stages.core.sizes import count

    assert count(n, word) == text
