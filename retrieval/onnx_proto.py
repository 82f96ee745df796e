"""Just enough of ONNX's protobuf encoding to write one model file, without the onnx package.

The service builds the local embedding model's graph itself (retrieval/onnx_model.py)
and ONNX Runtime reads it; the onnx package (31 MB) would only be needed to
serialise it. These functions write the few messages a plain inference graph
needs — ``ModelProto``, ``GraphProto``, ``NodeProto``, ``AttributeProto``,
``TensorProto`` (raw data), ``ValueInfoProto`` — with the field numbers of
onnx/onnx.proto, each returning the encoded bytes; the names and arguments
follow ``onnx.helper``. tests/embeddings/test_onnx_proto.py reads what they
write back with the onnx package and runs its checker over it.
"""

from __future__ import annotations

import struct

import numpy as np

# TensorProto.DataType
FLOAT = 1
UINT8 = 2
INT64 = 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.uint8): UINT8, np.dtype(np.int64): INT64}
# AttributeProto.AttributeType
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7

_VARINT, _FIXED32, _LENGTH_DELIMITED = 0, 5, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as their two's complement, ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(int(value))


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, _LENGTH_DELIMITED) + _varint(len(value)) + value


def _string(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _float(field: int, value: float) -> bytes:
    return _key(field, _FIXED32) + struct.pack("<f", value)


def make_attribute(name: str, value) -> bytes:
    """An int, a float or a list of ints, as ``onnx.helper.make_attribute`` types them."""
    # Fields in number order, as protobuf writes them: name 1, f 2, i 3, ints 8, type 20.
    out = _string(1, name)
    if isinstance(value, (bool, int, np.integer)):
        return out + _int(3, int(value)) + _int(20, _ATTRIBUTE_INT)
    if isinstance(value, (float, np.floating)):
        return out + _float(2, float(value)) + _int(20, _ATTRIBUTE_FLOAT)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return out + b"".join(_int(8, v) for v in value) + _int(20, _ATTRIBUTE_INTS)
    raise TypeError(f"attribute {name}: {value!r} is not an int, a float or a list of ints")


def make_node(
    op_type: str,
    inputs: list[str],
    outputs: list[str],
    name: str = "",
    domain: str = "",
    **attributes,
):
    out = b"".join(_string(1, item) for item in inputs)
    out += b"".join(_string(2, item) for item in outputs)
    if name:
        out += _string(3, name)
    out += _string(4, op_type)
    for key in sorted(attributes):
        out += _bytes(5, make_attribute(key, attributes[key]))
    if domain:
        out += _string(7, domain)
    return out


def from_array(array: np.ndarray, name: str) -> bytes:
    """A TensorProto holding ``array`` (float32, uint8 or int64) as little-endian raw data."""
    array = np.asarray(array)
    data_type = _DATA_TYPES.get(array.dtype)
    if data_type is None:
        raise TypeError(f"tensor {name}: dtype {array.dtype} is not float32, uint8 or int64")
    out = b"".join(_int(1, dim) for dim in array.shape)
    out += _int(2, data_type) + _string(8, name)
    return out + _bytes(
        9, np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    )


def make_tensor_value_info(name: str, elem_type: int, shape: list[int | str]) -> bytes:
    """A graph input or output: its element type and its shape (ints, or names of free axes)."""
    dims = b"".join(
        _bytes(1, _string(2, dim) if isinstance(dim, str) else _int(1, dim)) for dim in shape
    )
    tensor_type = _int(1, elem_type) + _bytes(2, dims)
    return _string(1, name) + _bytes(2, _bytes(1, tensor_type))


def make_graph(
    nodes: list[bytes],
    name: str,
    inputs: list[bytes],
    outputs: list[bytes],
    initializer: list[bytes],
) -> bytes:
    out = b"".join(_bytes(1, node) for node in nodes) + _string(2, name)
    out += b"".join(_bytes(5, tensor) for tensor in initializer)
    out += b"".join(_bytes(11, value) for value in inputs)
    return out + b"".join(_bytes(12, value) for value in outputs)


def make_model(
    graph: bytes,
    *,
    ir_version: int,
    opset: int,
    producer_name: str,
    producer_version: str,
    domains: dict[str, int] | None = None,
) -> bytes:
    """The serialised ModelProto: what ``onnx.save_model`` would write. ``opset``
    is the default domain's; ``domains`` maps any other the nodes use (ONNX
    Runtime's ``com.microsoft``) to its version."""
    out = _int(1, ir_version) + _string(2, producer_name) + _string(3, producer_version)
    out += _bytes(7, graph) + _bytes(8, _string(1, "") + _int(2, opset))
    for domain, version in (domains or {}).items():
        out += _bytes(8, _string(1, domain) + _int(2, version))
    return out
