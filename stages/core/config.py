"""Effective configuration: flags > ``M3_*`` environment > ``m3.toml`` > defaults.

One :class:`Settings` object is built per command and handed to the stages, so no stage reads the
environment itself. Secrets are :class:`pydantic.SecretStr`: they print as ``**********`` and never
reach records, cache keys or logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
import tomllib
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.options import merge_trees, set_path
from m3cli.stages.core.redact import mask_url

APP_NAME = "m3"
ENV_PREFIX = "M3_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LlmSettings(_Section):
    """Any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp, OpenAI, Gemini's compatible API)."""

    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    #: Completion budget per task (memorize, summary, links, conflicts, ask, prune, rewatch, listen,
    #: judge), overriding the defaults of ``m3cli.stages.backends.llm.DEFAULT_MAX_TOKENS``.
    max_tokens: dict[str, int] = Field(default_factory=dict)

    @property
    def configured(self) -> bool:
        """True when memorize/ask should call an LLM rather than take their offline paths."""
        return bool(self.base_url and self.model)


class EmbedSettings(_Section):
    """Text embeddings: the bundled MiniLM on CPU, or any ``/v1/embeddings`` endpoint."""

    backend: str = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None


class ThreadSettings(_Section):
    """Intra-op threads per numeric library (one each was fastest here: see stages/core/threads.py)."""

    torch: int = Field(default=1, ge=1)
    onnxruntime: int = Field(default=1, ge=1)
    ctranslate2: int = Field(default=1, ge=1)
    blas: int = Field(default=1, ge=1)


class Settings(_Section):
    cache_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_cache_dir(APP_NAME)))
    #: Size cap of the cache ("20G"; "off" for none): least recently used entries are evicted while
    #: stages write, never what a running stage holds (see stages/core/cache.py).
    cache_max_size: str = "20G"
    device: str = "cpu"
    llm: LlmSettings = Field(default_factory=LlmSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    threads: ThreadSettings = Field(default_factory=ThreadSettings)
    #: ``[pipeline.STAGE]`` tables: stage options for `m3 run` and `m3 batch` (e.g. ``[pipeline.faces]
    #: fps = 2``), checked by those commands against each stage's config.
    pipeline: dict[str, dict[str, Any]] = Field(default_factory=dict)


#: Environment variable -> dotted settings key. Standard OpenAI variables are honoured last.
ENV_KEYS: dict[str, str] = {
    "M3_CACHE": "cache_dir",
    "M3_CACHE_MAX_SIZE": "cache_max_size",
    "M3_DEVICE": "device",
    "M3_LLM_BASE_URL": "llm.base_url",
    "M3_LLM_MODEL": "llm.model",
    "M3_LLM_API_KEY": "llm.api_key",
    "M3_LLM_TIMEOUT": "llm.timeout",
    "M3_LLM_MAX_RETRIES": "llm.max_retries",
    "M3_EMBED_BACKEND": "embed.backend",
    "M3_EMBED_MODEL": "embed.model",
    "M3_EMBED_BASE_URL": "embed.base_url",
    "M3_EMBED_API_KEY": "embed.api_key",
    "M3_TORCH_THREADS": "threads.torch",
    "M3_ONNX_THREADS": "threads.onnxruntime",
    "M3_CT2_THREADS": "threads.ctranslate2",
    "M3_BLAS_THREADS": "threads.blas",
}
FALLBACK_ENV_KEYS: dict[str, str] = {"OPENAI_API_KEY": "llm.api_key", "OPENAI_BASE_URL": "llm.base_url"}


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "m3.toml"


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    set_path(tree, dotted.split("."), value)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise M3Error(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise M3Error(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise M3Error(f"{path}: not valid TOML: not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise M3Error(f"{path}: not valid TOML for m3: nested too deeply") from None
    except IsADirectoryError:
        raise M3Error(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise M3Error(f"{path}: cannot read config file: {exc.strerror}") from None


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for var, dotted in FALLBACK_ENV_KEYS.items():
        if environ.get(var):
            _set_dotted(layer, dotted, environ[var])
    for var, dotted in ENV_KEYS.items():
        if environ.get(var):
            _set_dotted(layer, dotted, environ[var])
    return layer


def load_settings(
    flags: Mapping[str, Any] | None = None,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build the effective settings.

    ``flags`` maps dotted keys (``"llm.model"``) to values given on the command line; ``None`` values
    mean "not given". ``config_path`` is ``--config``; without it the user config file is read if it
    exists.
    """
    environ = os.environ if environ is None else environ
    layers: dict[str, Any] = {}
    if config_path is not None:
        layers = _read_toml(config_path)
        source = str(config_path)
    else:
        default = default_config_path()
        layers = _read_toml(default) if default.is_file() else {}
        source = str(default)
    layers = merge_trees(layers, _env_layer(environ))
    flag_layer: dict[str, Any] = {}
    for dotted, value in (flags or {}).items():
        if value is not None:
            _set_dotted(flag_layer, dotted, value)
    layers = merge_trees(layers, flag_layer)
    try:
        return Settings.model_validate(layers)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: "
            + ("unknown setting" if err["type"] == "extra_forbidden" else err["msg"])
            for err in exc.errors(include_url=False)
        )
        raise M3Error(f"invalid configuration (flags, M3_* environment or {source}): {problems}") from None


def masked(settings: Settings) -> dict[str, Any]:
    """Settings as plain data with every secret replaced by a mask, for ``m3 config show``."""
    data = settings.model_dump(mode="json")
    for section in ("llm", "embed"):
        key = getattr(settings, section).api_key
        data[section]["api_key"] = "********" if key is not None else None
        data[section]["base_url"] = mask_url(data[section]["base_url"])  # http://user:key@host
    data["cache_dir"] = str(settings.cache_dir)
    return data
