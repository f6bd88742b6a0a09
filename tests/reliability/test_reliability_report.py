"""`m3 report` on a crafted memory reads nothing outside it.

A memory is untrusted input (it may come from a bucket or a colleague). Starting from a real memory of
the quickstart clip (`m3 run`), its tables are rewritten the way an attacker would: a face crop (and
every keyframe of the clips table) named by an absolute path, by a ``../`` path, through a symlink that
leaves the memory, or as a 20000x20000 PNG; the clip's video path pointed at another recording. The
page must embed none of those files, and still be written (initials instead of a face, a keyframe's
text without its image, no voice sample), with no traceback.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import lancedb
import pyarrow as pa
import pytest

from conftest import DATA, FIXTURE, HAMILTON, run_m3
from m3cli.stages.core.memory_manifest import MANIFEST

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
SECRET_PHOTO = DATA / "fixture_src" / "biden.jpg"


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("crafted")
    mem = root / "mem.lance"
    env = {**OFFLINE, "M3_CACHE": str(root / "cache")}
    run_m3("run", HAMILTON, "-o", mem, "--no-llm", env=env, check=True)
    return mem


def _page(memory: Path, out: Path) -> tuple[str, str]:
    proc = run_m3("report", memory, "-o", out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()
    return out.read_text(), proc.stderr.decode()


def _craft(memory: Path, dst: Path, crop: str | None = None, video: str | None = None) -> Path:
    shutil.copytree(memory, dst, symlinks=True)
    db = lancedb.connect(str(dst))
    if crop is not None:
        db.open_table("entities").update(where="crop IS NOT NULL", values={"crop": crop})
        clips = db.open_table("clips").to_arrow()
        rows = clips.to_pylist()
        for row in rows:
            for frame in row.get("keyframes") or []:
                frame["path"] = crop
        db.create_table("clips", pa.Table.from_pylist(rows, schema=clips.schema), mode="overwrite")
    if video is not None:
        db.open_table("clips").update(values={"path": video})
    (dst / MANIFEST).unlink()  # a memory without a manifest is read as its tables stand
    return dst


@pytest.mark.slow
def test_the_genuine_memory_shows_its_faces_and_voice(memory, tmp_path):
    page, _ = _page(memory, tmp_path / "p.html")
    assert page.count("data:image/jpeg") >= 1 and page.count("data:audio/ogg") == 1
    assert page.count('class="kf-img"') >= 1  # `m3 run` ran sight: keyframes, read from the memory


@pytest.mark.parametrize(
    "how",
    ["absolute", "dotdot", "symlink", "dotdot-inside"],
)
@pytest.mark.slow
def test_crops_outside_the_memory_are_not_embedded(memory, tmp_path, how):
    if how == "absolute":
        crop = str(SECRET_PHOTO)
    elif how == "dotdot":
        crop = os.path.relpath(SECRET_PHOTO, tmp_path / "m.lance")
        assert crop.startswith("..")
    elif how == "dotdot-inside":
        crop = "crops/../../" + os.path.relpath(SECRET_PHOTO, tmp_path)
    else:
        crop = "crops/link.jpg"
    crafted = _craft(memory, tmp_path / "m.lance", crop=crop)
    if how == "symlink":
        (crafted / "crops" / "link.jpg").symlink_to(SECRET_PHOTO)
    page, err = _page(crafted, tmp_path / "p.html")
    assert "data:image/jpeg" not in page  # initials instead of any picture
    assert "outside the memory" in err or how == "absolute" or "crop" in err


@pytest.mark.slow
def test_a_decompression_bomb_crop_is_initials_not_a_traceback(memory, tmp_path):
    from PIL import Image

    crafted = _craft(memory, tmp_path / "m.lance", crop="crops/huge.png")
    Image.new("1", (20000, 20000)).save(crafted / "crops" / "huge.png", optimize=True)  # ~50 kB on disk
    page, err = _page(crafted, tmp_path / "p.html")
    assert "data:image/jpeg" not in page and "unreadable" in err


@pytest.mark.parametrize("which", ["another recording", "same size other bytes"])
@pytest.mark.slow
def test_a_clip_path_naming_another_file_gives_no_audio(memory, tmp_path, which):
    if which == "another recording":
        other = tmp_path / "other.mp4"
        shutil.copyfile(FIXTURE, other)
    else:
        other = tmp_path / "same-size.mp4"
        data = bytearray(HAMILTON.read_bytes())
        data[-1000:] = bytes(1000)
        other.write_bytes(bytes(data))
    crafted = _craft(memory, tmp_path / "m.lance", video=str(other))
    page, err = _page(crafted, tmp_path / "p.html")
    assert "data:audio/ogg" not in page
    assert "not the video these records were made from" in err
    # the genuine file at another path is fine: the content id matches
    moved = tmp_path / "moved.mp4"
    shutil.copyfile(HAMILTON, moved)
    shutil.rmtree(crafted)
    crafted = _craft(memory, tmp_path / "m.lance", video=str(moved))
    page, _ = _page(crafted, tmp_path / "p2.html")
    assert page.count("data:audio/ogg") == 1


@pytest.mark.parametrize("damage", ["missing version", "truncated data", "emptied data"])
@pytest.mark.slow
def test_a_damaged_memory_is_one_line(memory, tmp_path, damage):
    import orjson

    crafted = tmp_path / "m.lance"
    shutil.copytree(memory, crafted)
    if damage == "missing version":
        manifest = orjson.loads((crafted / MANIFEST).read_bytes())
        manifest["tables"]["nodes"] = 99
        (crafted / MANIFEST).write_bytes(orjson.dumps(manifest))
    else:
        for f in (crafted / "nodes.lance" / "data").iterdir():
            os.truncate(f, f.stat().st_size // 2 if damage == "truncated data" else 0)
    proc = run_m3("report", crafted, "-o", tmp_path / "p.html")
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "the memory is damaged" in lines[0] and "rebuild it with `m3 index -o`" in lines[0]
    assert not (tmp_path / "p.html").exists()


@pytest.mark.parametrize(
    "table,damage", [("clips", "data missing"), ("clips", "data truncated"), ("edges", "versions deleted")]
)
@pytest.mark.slow
def test_every_reader_refuses_a_damaged_memory_with_the_same_line(memory, tmp_path, table, damage):
    """`m3 ask` printed `internal error: ArrowInvalid` on a clips data file gone or cut short, and with
    the edges versions deleted it answered as if the memory were whole; `m3 report` said one line.
    Both now run the one integrity check and say the same line."""
    crafted = tmp_path / "m.lance"
    shutil.copytree(memory, crafted)
    folder = crafted / f"{table}.lance"
    if damage == "versions deleted":
        shutil.rmtree(folder / "_versions")
    for f in (folder / "data").iterdir():
        if damage == "data missing":
            f.unlink()
        elif damage == "data truncated":
            os.truncate(f, f.stat().st_size // 2)
    said = []
    for args in (("ask", crafted, "who speaks?"), ("report", crafted, "-o", tmp_path / "p.html")):
        proc = run_m3(*args, env=OFFLINE)
        lines = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and proc.stdout == b"", (args, lines)
        assert (
            lines[0].startswith(f"m3: error: {crafted}: the memory is damaged (") and f"'{table}'" in lines[0]
        )
        assert "rebuild it with `m3 index -o`" in lines[0]
        said.append(lines[0])
    assert said[0] == said[1] and not (tmp_path / "p.html").exists()
