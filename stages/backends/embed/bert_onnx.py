"""The ONNX graph of a sentence-transformers BERT encoder with mean pooling, built from its safetensors.

This is the computation of ``SentenceTransformer(all-MiniLM-L6-v2).encode`` before its final
normalisation: BERT embeddings (word + position + token type 0), ``num_hidden_layers`` post-norm
encoder layers with exact (erf) GELU, then the attention-masked mean of the last hidden states. Built
in memory from the bundled weights in a fraction of a second, so no export step, no torch and no
files outside the installed package are involved. Only what MiniLM-style models use is supported; any
other architecture is refused with a message naming the torch backend, which runs anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.onnx import proto as op
from m3cli.stages.core.errors import M3Error

GRAPH_VERSION = "bert-mean-1"  # bump when the graph changes: it is part of the embedder's version
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "sentence_embedding"


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def check_supported(model_dir: Path) -> dict[str, Any]:
    """The model's config.json when this graph can run it; an M3Error saying why not otherwise."""
    config = _json(model_dir / "config.json")
    pooling = _json(model_dir / "1_Pooling" / "config.json")
    problems = []
    if config.get("model_type") != "bert":
        problems.append(f"model_type {config.get('model_type')!r} (only 'bert')")
    if config.get("hidden_act", "gelu") != "gelu":
        problems.append(f"hidden_act {config.get('hidden_act')!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type {config.get('position_embedding_type')!r}")
    if pooling and not pooling.get("pooling_mode_mean_tokens"):
        problems.append("pooling other than mean")
    if not (model_dir / "model.safetensors").is_file():
        problems.append("no model.safetensors")
    if problems:
        raise M3Error(
            f"{model_dir}: the onnx text embedder cannot run this model ({'; '.join(problems)}). "
            'Use the torch backend for it: M3_EMBED_BACKEND=torch (or embed.backend = "torch").'
        )
    return config


class _Graph:
    """Collects nodes and initializers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.inits: list[op.Chunks] = []
        self._n = 0

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(op.tensor(name, array))
        return name

    def __call__(self, kind: str, *inputs: str, **attrs: object) -> str:
        self._n += 1
        out = f"{kind.lower()}_{self._n}"
        self.nodes.append(op.node(kind, inputs, [out], out, **attrs))
        return out

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        """x @ W^T + b with a torch Linear's weight (out, in) stored transposed."""
        w = self.const(f"{prefix}.wt", np.ascontiguousarray(weights[f"{prefix}.weight"].T))
        b = self.const(f"{prefix}.b", weights[f"{prefix}.bias"])
        return self("Add", self("MatMul", x, w), b)

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
        g = self.const(f"{prefix}.g", weights[f"{prefix}.weight"])
        b = self.const(f"{prefix}.beta", weights[f"{prefix}.bias"])
        return self("LayerNormalization", x, g, b, axis=-1, epsilon=eps)


def _weights(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    raw = load_file(str(model_dir / "model.safetensors"))
    # Checkpoints name the encoder "bert.encoder..." or "encoder..." depending on how they were saved.
    return {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in raw.items()}


def build(model_dir: Path) -> bytes:
    """ONNX model bytes: (input_ids, attention_mask) int64 [batch, seq] -> mean-pooled [batch, hidden]."""
    config = check_supported(model_dir)
    w = _weights(model_dir)
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    head_dim = hidden // heads
    g = _Graph()

    i64 = lambda name, *values: g.const(name, np.asarray(values, dtype=np.int64))  # noqa: E731
    f32 = lambda name, value: g.const(name, np.asarray(value, dtype=np.float32))  # noqa: E731

    # Embeddings: token type is always 0 for single sentences, so its row joins the position table.
    words = g.const("word_embeddings", w["embeddings.word_embeddings.weight"])
    positions = g.const(
        "position_embeddings",
        w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0],
    )
    seq_len = g("Shape", "input_ids", start=1, end=2)
    pos = g("Slice", positions, i64("zero1", 0), seq_len, i64("axis0", 0))
    x = g("Add", g("Gather", words, "input_ids", axis=0), pos)
    x = g.layer_norm(x, w, "embeddings.LayerNorm", eps)

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, -10000 for padding (as BERT does).
    mask = g("Cast", "attention_mask", to=op.FLOAT)
    bias = g("Mul", g("Sub", mask, f32("one", 1.0)), f32("big", 10000.0))
    bias = g("Unsqueeze", bias, i64("axes12", 1, 2))

    split_heads = i64("split_heads", 0, 0, heads, head_dim)
    merge_heads = i64("merge_heads", 0, 0, hidden)
    scale = f32("scale", 1.0 / np.sqrt(head_dim))
    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."

        def by_head(name: str, perm: list[int], x: str = x, p: str = p) -> str:
            return g("Transpose", g("Reshape", g.linear(x, w, p + name), split_heads), perm=perm)

        q = by_head("attention.self.query", [0, 2, 1, 3])
        k = by_head("attention.self.key", [0, 2, 3, 1])  # already transposed for q @ k
        v = by_head("attention.self.value", [0, 2, 1, 3])
        scores = g("Add", g("Mul", g("MatMul", q, k), scale), bias)
        context = g("MatMul", g("Softmax", scores, axis=-1), v)
        context = g("Reshape", g("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = g.linear(context, w, p + "attention.output.dense")
        x = g.layer_norm(g("Add", attended, x), w, p + "attention.output.LayerNorm", eps)
        h = g.linear(x, w, p + "intermediate.dense")
        # exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)), in the order onnxruntime fuses into one Gelu op
        erf = g("Erf", g("Div", h, f32(f"sqrt2_{layer}", np.sqrt(2.0))))
        h = g("Mul", g("Mul", h, g("Add", erf, f32(f"one_{layer}", 1.0))), f32(f"half_{layer}", 0.5))
        out = g.linear(h, w, p + "output.dense")
        x = g.layer_norm(g("Add", out, x), w, p + "output.LayerNorm", eps)

    # Mean over real tokens.
    weights = g("Unsqueeze", mask, i64("axis2", 2))
    summed = g("ReduceSum", g("Mul", x, weights), i64("axis1", 1), keepdims=0)
    counts = g("Max", g("ReduceSum", weights, "axis1", keepdims=0), f32("tiny", 1e-9))
    g.nodes.append(op.node("Div", [summed, counts], [OUTPUT], "mean_pool"))

    return op.model(
        "sentence_encoder",
        g.nodes,
        g.inits,
        [op.value_info(name, op.INT64, ["batch", "sequence"]) for name in INPUTS],
        [op.value_info(OUTPUT, op.FLOAT, ["batch", hidden])],
    )
