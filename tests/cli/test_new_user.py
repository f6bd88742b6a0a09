"""What a new user hits first: a video given to a later stage, global options after the command,
`--device cuda` without a GPU, and a retrieval-only question the memory cannot answer. Real CLI."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import DATA, FIXTURE, HAMILTON, run_m3
from m3cli.stages.core.devices import cuda_device_count
from support.fake_openai import FakeOpenAI


@pytest.fixture(scope="module")
def segmented(tmp_path_factory):
    path = tmp_path_factory.mktemp("seg") / "clips.jsonl"
    proc = run_m3("segment", FIXTURE, env={"M3_CACHE": str(path.parent / "cache")}, check=True)
    path.write_bytes(proc.stdout)
    return path


# ------------------------------------------------------------------------ a video where records go


@pytest.mark.parametrize("stage", ["faces", "diarize", "memorize", "index"])
@pytest.mark.slow
def test_a_video_given_to_a_later_stage_says_to_segment_it(stage, tmp_path, cache_dir):
    args = ["-o", tmp_path / "m.lance"] if stage == "index" else []
    proc = run_m3(stage, *args, FIXTURE)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and proc.stdout == b"" and len(err.splitlines()) == 1
    assert err == (
        f"m3: error: {FIXTURE}: is a video file, not clip records; cut it into clips first: "
        f"m3 segment {FIXTURE} | m3 {stage}\n"
    )


@pytest.mark.slow
def test_a_video_piped_into_a_stage_and_an_audio_file(cache_dir, tmp_path):
    proc = run_m3("voices", input=HAMILTON.read_bytes())
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("m3: error: <stdin>: is a video file, not clip records")
    renamed = tmp_path / "clip.bin"  # found by its bytes, not its name
    renamed.write_bytes(FIXTURE.read_bytes())
    proc = run_m3("link", renamed)
    assert proc.returncode == 1 and f"{renamed}: is a video file" in proc.stderr.decode()
    proc = run_m3("diarize", DATA / "jfk.wav")
    assert proc.returncode == 1 and "jfk.wav: is an audio file, not clip records" in proc.stderr.decode()
    bad = tmp_path / "bad.jsonl"  # an ordinary broken stream still gets the plain JSON error
    bad.write_bytes(b'{"schema": \n')
    proc = run_m3("link", bad)
    assert proc.returncode == 1 and proc.stderr.decode().startswith(f"m3: error: {bad}:1: not valid JSON")


# ------------------------------------------------------------------------ global options anywhere


@pytest.mark.slow
def test_global_options_after_the_command(segmented, tmp_path, cache_dir):
    quiet = run_m3("memorize", "--no-llm", segmented, "-q")
    assert quiet.returncode == 1 and quiet.stderr.startswith(b"m3: error: ")  # no faces/utterances
    records = [json.loads(line) for line in segmented.read_bytes().splitlines()]
    for r in records:
        r["utterances"] = []
    src = tmp_path / "perceived.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    loud = run_m3("memorize", "--no-llm", src, "-v")
    assert loud.returncode == 0 and b"m3: INFO: no LLM configured (or --no-llm)" in loud.stderr
    after, before = run_m3("memorize", "--no-llm", src, "-vv"), run_m3("-vv", "memorize", "--no-llm", src)
    assert after.stderr == before.stderr
    assert run_m3("memorize", "--no-llm", "-q", src).stderr == b""
    proc = run_m3("cache", "path", "--cache-dir", tmp_path / "elsewhere", check=True)
    assert proc.stdout.decode().strip() == str(tmp_path / "elsewhere")
    proc = run_m3("cache", "path", f"--cache-dir={tmp_path / 'other'}", check=True)
    assert proc.stdout.decode().strip() == str(tmp_path / "other")
    proc = run_m3("validate", "--", "-q")  # after `--` it is a file name
    assert proc.returncode == 1 and proc.stderr == b"m3: error: -q: no such file\n"


def test_a_command_keeps_its_own_option_of_the_same_name(segmented, cache_dir):
    # `m3 diarize --device` is diarize's own option; the root's --device is not taken from it
    proc = run_m3("diarize", "--device", "bogus", segmented)
    assert proc.returncode == 1 and proc.stderr == b"m3: error: --device 'bogus': use cpu, cuda or cuda:N\n"


@pytest.mark.parametrize("name", ["memorize", "abstract", "index"])
@pytest.mark.slow
def test_every_stage_command_checks_the_device_before_it_runs(name, segmented, tmp_path, cache_dir):
    # memorize, abstract and index once built their run context by hand and never looked at --device
    args = ["-o", str(tmp_path / "mem.lance")] if name == "index" else ["--no-llm"]
    proc = run_m3("--device", "bogus", name, *args, segmented)
    assert proc.returncode == 1 and proc.stderr == b"m3: error: --device 'bogus': use cpu, cuda or cuda:N\n"
    assert not (tmp_path / "mem.lance").exists()


# ------------------------------------------------------------------------ --device cuda, no GPU


@pytest.mark.skipif(bool(cuda_device_count()), reason="this machine has a CUDA device")
@pytest.mark.parametrize(
    "args",
    [
        ("faces", "--device", "cuda"),
        ("--device", "cuda", "diarize"),
        ("voices", "--device", "cuda:0"),
    ],
)
@pytest.mark.slow
def test_device_cuda_without_a_gpu_is_one_line(args, segmented, cache_dir):
    proc = run_m3(*args, segmented)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and proc.stdout == b"" and len(err.splitlines()) == 1
    assert err.startswith("m3: error: no CUDA device: --device cuda")
    assert "use --device cpu" in err
    proc = run_m3("faces", segmented, env={"M3_DEVICE": "cuda"})
    assert proc.returncode == 1 and proc.stderr.startswith(b"m3: error: no CUDA device")


# ------------------------------------------------------------------------ no evidence is no answer


@pytest.mark.slow
def test_retrieval_only_says_when_nothing_in_memory_matches(segmented, tmp_path, cache_dir):
    record = json.loads(segmented.read_bytes().splitlines()[0])
    record["memory"] = {
        "source": "offline",
        "episodic": [{"text": "<face_1> is visible from 0.6 to 5.8 s", "start": 0.6, "end": 5.8}],
        "semantic": [],
    }
    record["characters"] = {"<face_1>": "<character_1>"}
    src = tmp_path / "mem.jsonl"
    src.write_bytes(orjson.dumps(record) + b"\n")
    with FakeOpenAI() as server:
        env = {
            "M3_EMBED_BACKEND": "openai",
            "M3_EMBED_BASE_URL": server.url,
            "M3_EMBED_MODEL": "fake-embed",
            "M3_LLM_BASE_URL": "",
            "M3_LLM_MODEL": "",
        }
        run_m3("index", "-o", tmp_path / "mem.lance", src, env=env, check=True)
        miss, hit = (
            json.loads(run_m3("ask", tmp_path / "mem.lance", q, env=env, check=True).stdout)
            for q in ("Who likes coffee?", "When is face visible?")
        )
    # the memory has no speech at all (no diarize record): the answer says it cannot tell, and why
    assert miss["answer"] == (
        "The memory of fixture.mp4 holds no record that speech (`m3 diarize`) looked at it, "
        "so it cannot say whether anything is said."
    ), miss["answer"]
    assert miss["evidence"] == []  # the nearest line is named in the answer, not offered as evidence
    assert miss["trajectory"][0]["results"]  # the nearest lines are still shown, as a search result
    assert "visible" in hit["answer"] and hit["evidence"] and not hit["answer"].startswith("No line")
