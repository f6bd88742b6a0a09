"""Configuration precedence and secret handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURE, run_m3
from m3cli.stages.core.config import load_settings, masked
from m3cli.stages.core.errors import M3Error

SECRET = "sk-test-very-secret-0123456789"


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_precedence_flags_env_file_defaults(tmp_path):
    cfg = write_toml(
        tmp_path / "m3.toml", '[llm]\nmodel = "from-file"\nbase_url = "http://file"\ntimeout = 9\n'
    )
    env = {"M3_LLM_MODEL": "from-env"}
    s = load_settings(flags={"llm.model": "from-flag"}, config_path=cfg, environ=env)
    assert (s.llm.model, s.llm.base_url, s.llm.timeout, s.llm.max_retries) == (
        "from-flag",
        "http://file",
        9,
        4,
    )
    s = load_settings(flags={"llm.model": None}, config_path=cfg, environ=env)
    assert s.llm.model == "from-env"
    s = load_settings(config_path=cfg, environ={})
    assert s.llm.model == "from-file"
    assert load_settings(environ={"M3_CACHE": str(tmp_path)}).cache_dir == tmp_path


def test_standard_openai_variables_are_a_fallback():
    s = load_settings(environ={"OPENAI_API_KEY": "a", "M3_LLM_API_KEY": "b", "OPENAI_BASE_URL": "http://x"})
    assert s.llm.api_key.get_secret_value() == "b" and s.llm.base_url == "http://x"


def test_bad_values_name_the_key_and_source(tmp_path):
    with pytest.raises(M3Error, match=r"llm\.timeout"):
        load_settings(environ={"M3_LLM_TIMEOUT": "soon"})
    cfg = write_toml(tmp_path / "bad.toml", "[llm\n")
    with pytest.raises(M3Error, match="bad.toml: not valid TOML"):
        load_settings(config_path=cfg)
    with pytest.raises(M3Error, match="unknown"):
        load_settings(config_path=write_toml(tmp_path / "typo.toml", "[llm]\nmodle = 1\n"))
    with pytest.raises(M3Error, match="config file not found"):
        load_settings(config_path=tmp_path / "absent.toml")


def test_secrets_are_masked(tmp_path):
    s = load_settings(environ={"M3_LLM_API_KEY": SECRET})
    assert SECRET not in repr(s) and SECRET not in str(masked(s))
    assert masked(s)["llm"]["api_key"] == "********"


def test_config_show_masks_the_key_and_the_key_never_reaches_outputs(tmp_path, cache_dir):
    cfg = write_toml(
        tmp_path / "m3.toml", f'[llm]\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\napi_key = "{SECRET}"\n'
    )
    shown = run_m3("--config", cfg, "config", "show", check=True).stdout.decode()
    assert 'api_key = "********"' in shown and SECRET not in shown
    assert 'model = "m"' in shown
    proc = run_m3("--config", cfg, "-vv", "segment", FIXTURE, env={"M3_LLM_API_KEY": SECRET}, check=True)
    assert SECRET.encode() not in proc.stdout + proc.stderr
    for path in cache_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes()


def test_flag_overrides_environment_for_the_cache(tmp_path, cache_dir):
    other = tmp_path / "elsewhere"
    out = run_m3("--cache-dir", other, "cache", "path", check=True).stdout.decode().strip()
    assert out == str(other)
