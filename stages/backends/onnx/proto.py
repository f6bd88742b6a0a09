"""Write ONNX models as protobuf bytes without the `onnx` package.

The bundled MiniLM ships as safetensors weights; onnxruntime wants an ONNX graph. Exporting through
torch needs torch (seconds to import) and the `onnx` package, which a user install does not carry. A
BERT encoder needs only a handful of message types, so this module encodes them directly in the
protobuf wire format (field numbers from onnx/onnx.proto) and the graph is built in memory at load
time from the weights alone. ``tests/backends/test_embed.py`` checks the bytes with the `onnx` checker.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

FLOAT = 1  # TensorProto.DataType
INT64 = 7
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}

# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values are sent as their 64-bit two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


class Chunks(list):
    """A message kept as a list of byte pieces, so 90 MB of weights are copied once, at the very end."""

    @property
    def size(self) -> int:
        return sum(len(c) for c in self)


def _nested(field: int, message: Chunks) -> Chunks:
    return Chunks([_key(field, 2) + _varint(message.size), *message])


def _str(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


def tensor(name: str, array: np.ndarray) -> Chunks:
    """TensorProto with little-endian raw data (a view of the array, not a copy)."""
    array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    head = b"".join(_int(1, d) for d in array.shape) + _int(2, _DTYPES[array.dtype.newbyteorder("=")])
    data = array.reshape(-1).data.cast("B")
    return Chunks([head + _str(8, name) + _key(9, 2) + _varint(data.nbytes), data])


def attribute(name: str, value: float | int | Sequence[int]) -> bytes:
    """AttributeProto for a float, an int or a list of ints."""
    if isinstance(value, float):
        return _str(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, int):
        return _str(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    return _str(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)


def node(op: str, inputs: Iterable[str], outputs: Iterable[str], name: str, **attrs: object) -> bytes:
    """NodeProto of the default ONNX domain."""
    body = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    body += _str(3, name) + _str(4, op)
    body += b"".join(_bytes(5, attribute(k, v)) for k, v in attrs.items())  # type: ignore[arg-type]
    return body


def value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> bytes:
    """ValueInfoProto of a tensor; a str dim is a symbolic (dynamic) axis."""
    shape = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    name: str,
    nodes: Sequence[bytes],
    initializers: Sequence[Chunks],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    opset: int = 17,
    ir_version: int = 8,
) -> bytes:
    """ModelProto bytes ready for ``onnxruntime.InferenceSession``."""
    graph = Chunks([b"".join(_bytes(1, n) for n in nodes) + _str(2, name)])
    for init in initializers:
        graph += _nested(5, init)
    graph.append(b"".join(_bytes(11, i) for i in inputs) + b"".join(_bytes(12, o) for o in outputs))
    opset_id = _str(1, "") + _int(2, opset)
    head = _int(1, ir_version) + _str(2, "m3") + _bytes(8, opset_id)
    return b"".join([head, *_nested(7, graph)])
