"""`m3 run`: the whole pipeline in one process gives the shell pipe's records byte for byte, shares its
caches (so the two mix), and builds the same memory row for row."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import orjson
import pytest

from conftest import HAMILTON
from m3cli.commands import COMMANDS
from m3cli.lazy import load_command
from m3cli.stages.configs.ask import AskConfig
from m3cli.stages.configs.stage_table import STAGE_CONFIGS
from m3cli.stages.configs.watch import WatchConfig
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import assignments
from m3cli.stages.pipeline import STAGES, option_names, pipeline_config
from support.memory_rows import memory_rows
from support.strict_records import undeclared_fields

M3 = f"{sys.executable} -m m3cli"
OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


def _sh(command: str, cache) -> bytes:
    env = {**os.environ, **OFFLINE, "M3_CACHE": str(cache)}
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout


def test_set_options_build_each_stage_config():
    config = pipeline_config(
        assignments(
            [
                "faces.fps=2",
                "diarize.cluster.threshold=0.4",
                "segment.clip_seconds=4",
                "diarize.model=/models/whisper small",
                "abstract.check=true",
            ]
        ),
        until="faces",
    )
    assert config.faces.fps == 2.0 and config.diarize.cluster.threshold == 0.4
    assert config.segment.clip_seconds == 4.0 and config.diarize.model == "/models/whisper small"
    assert config.abstract.check is True
    assert config.stages == ("segment", "diarize", "voices", "faces")
    assert set(option_names()) == set(STAGES) and "cluster.threshold" in option_names()["diarize"]


def _flagged(config: type) -> list[tuple[str, object]]:
    """(option path, field) of every option of ``config`` that declares command-line flags."""
    out = []
    for f in dataclasses.fields(config):
        if dataclasses.is_dataclass(f.default_factory):
            out += [(f"{f.name}.{p}", g) for p, g in _flagged(f.default_factory)]
        elif f.metadata.get("flags"):
            out.append((f.name, f))
    return out


# `m3 ask` and `m3 watch` are not pipeline stages (no --set, no m3.toml table) but declare their
# options the same way
DECLARED = {**STAGE_CONFIGS, "ask": AskConfig, "watch": WatchConfig}


@pytest.mark.parametrize("stage", list(DECLARED))
def test_each_stage_command_takes_its_flags_and_defaults_from_the_one_declaration(stage):
    # a flag, its default or its help written a second time in the command would drift from the
    # config that --set and m3.toml fill
    command = load_command(stage, COMMANDS[stage][0])
    params = {name: p for p in command.params for name in (*p.opts, *p.secondary_opts)}
    flagged = _flagged(DECLARED[stage])
    assert flagged, f"{stage} declares no flags"
    for path, f in flagged:
        declared = [part for flag in f.metadata["flags"] for part in flag.split("/")]
        param = params.get(declared[0])
        assert param is not None, f"m3 {stage} lacks {declared[0]} ({stage}.{path})"
        assert set(declared) <= set(param.opts) | set(param.secondary_opts)
        assert param.help == f.metadata["help"]
        if not f.metadata["extra"].get("off"):
            assert param.default == f.default, f"{stage}.{path}"


@pytest.mark.parametrize(
    ("stage", "args", "expected"),
    [
        ("index", ["-o", "mem.lance", "--no-fts"], {"fts": False, "ann_min_rows": 50_000}),
        ("index", ["-o", "mem.lance"], {"fts": True}),
        ("abstract", ["--no-embed", "--similar", "0.7"], {"embed": False, "similar_threshold": 0.7}),
        ("abstract", [], {"embed": True, "causal": True}),
        ("link", ["--no-meta", "--no-split-voices"], {"perception": False, "split_voices": False}),
        (
            "diarize",
            ["--speakers", "2", "--cluster-threshold", "0.4"],
            {"num_speakers": 2, "cluster.hop": 0.5, "cluster.threshold": 0.4},
        ),
        ("sight", ["--no-tags"], {"tags": False, "tag_threshold": STAGE_CONFIGS["sight"]().tag_threshold}),
        (
            "watch",
            ["udp://127.0.0.1:5000", "-o", "mem.lance", "--idle", "3", "--until-eof"],
            {"idle": 3.0, "until_eof": True, "max_lag": 300.0, "give_up": 60.0, "settle": 0.5},
        ),
        ("ask", ["mem.lance", "--rounds", "3", "--clip-k", "1"], {"rounds": 3, "clip_k": 1, "k": 5}),
    ],
)
def test_command_flags_become_the_stage_config(stage, args, expected):
    from m3cli.options import stage_config

    command = load_command(stage, COMMANDS[stage][0])
    with command.make_context(stage, list(args)) as ctx:
        config = stage_config(DECLARED[stage], ctx.params)
    for path, value in expected.items():
        got = config
        for part in path.split("."):
            got = getattr(got, part)
        assert got == value, f"{stage}.{path}"


@pytest.mark.parametrize(
    ("sets", "until", "message"),
    [
        (["faces.nope=1"], "index", "faces.nope: unknown option"),
        (["nope.fps=1"], "index", "nope: not a stage"),
        (["faces.fps=fast"], "index", "faces.fps: expected float"),
        (["faces.fps=-1"], "index", "--fps must be a positive number"),
        (["faces"], "index", "expected STAGE.OPTION=VALUE"),
        ([], "ask", "--until must be one of"),
    ],
)
def test_bad_stage_options_fail_clearly(sets, until, message):
    with pytest.raises(InputError, match=message.replace(".", r"\.").replace("-", r"\-")):
        pipeline_config(assignments(sets), until=until)


@pytest.mark.slow
def test_run_reports_bad_input_in_one_line(m3, tmp_path, cache_dir):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    proc = m3("run", bad, "-o", tmp_path / "mem.lance")
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode().strip().startswith(f"m3: error: {bad}")
    proc = m3("run", bad, "--set", "faces.fps=x")
    assert proc.returncode == 1 and b"faces.fps: expected float" in proc.stderr
    proc = m3("run", "--options")
    assert proc.returncode == 0
    assert b"faces:\n  faces.backend = " in proc.stdout and b"  faces.fps = " in proc.stdout


@pytest.mark.slow
def test_run_records_and_memory_equal_the_shell_pipe(tmp_path):
    cache_run, cache_pipe = tmp_path / "cache-run", tmp_path / "cache-pipe"
    perceive = f"{M3} segment -l 4 {HAMILTON} | {M3} diarize | {M3} voices | {M3} faces --fps 2"
    perceive += f" | {M3} sight"
    pipe = _sh(f"{perceive} | {M3} memorize | {M3} link | {M3} abstract", cache_pipe)
    ran = _sh(f"{M3} run -l 4 --faces-fps 2 --until abstract {HAMILTON}", cache_run)
    assert len(pipe.splitlines()) == 3  # three 4-second clips, folded per video
    for line in pipe.splitlines():  # every field a stage writes is declared by the schema and the models
        assert undeclared_fields(orjson.loads(line)) == []
    # computed separately, byte for byte the same (cache paths aside: each run has its own cache)
    assert ran.replace(str(cache_run).encode(), str(cache_pipe).encode()) == pipe

    # the two mix: stop `m3 run` after faces and let the shell stages finish, on the pipe's cache
    (tmp_path / "faces.jsonl").write_bytes(
        _sh(f"{M3} run -l 4 --set faces.fps=2 --until faces {HAMILTON}", cache_pipe)
    )
    finish = f"{M3} memorize | {M3} link | {M3} abstract"
    mixed = _sh(f"{M3} sight {tmp_path / 'faces.jsonl'} | {finish}", cache_pipe)
    assert mixed == pipe
    # faces in a second thread beside diarize and voices (the default) = faces after voices
    sequential = _sh(f"{M3} run -l 4 --set faces.fps=2 --until faces --sequential {HAMILTON}", cache_pipe)
    assert sequential == (tmp_path / "faces.jsonl").read_bytes()

    # the memory `m3 run` writes equals `m3 index` of the pipe's records, row for row
    (tmp_path / "pipe.jsonl").write_bytes(pipe)
    _sh(f"{M3} index -o {tmp_path / 'pipe.lance'} {tmp_path / 'pipe.jsonl'}", cache_pipe)
    _sh(f"{M3} run -l 4 --faces-fps 2 {HAMILTON} -o {tmp_path / 'run.lance'}", cache_pipe)
    ran_rows, pipe_rows = memory_rows(tmp_path / "run.lance"), memory_rows(tmp_path / "pipe.lance")
    assert ran_rows["nodes"] and ran_rows == pipe_rows
