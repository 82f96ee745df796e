"""retrieval/onnx_proto.py writes what the onnx package (a test-only dependency) writes."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval import onnx_proto

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def test_its_messages_are_byte_for_byte_the_onnx_helpers():
    weight = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    steps = np.array([-1, 0, 2**40], dtype=np.int64)
    assert (
        onnx_proto.from_array(weight, "w")
        == numpy_helper.from_array(weight, "w").SerializeToString()
    )
    assert (
        onnx_proto.from_array(steps, "s") == numpy_helper.from_array(steps, "s").SerializeToString()
    )
    for name, value in [("axis", -1), ("epsilon", 1e-12), ("perm", [0, 2, 1, 3]), ("keepdims", 0)]:
        expected = helper.make_attribute(name, value).SerializeToString()
        assert onnx_proto.make_attribute(name, value) == expected, name
    node = helper.make_node("Softmax", ["x"], ["y"], name="n", axis=-1)
    assert onnx_proto.make_node("Softmax", ["x"], ["y"], name="n", axis=-1) == (
        node.SerializeToString()
    )
    value = helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", 3])
    assert onnx_proto.make_tensor_value_info("x", onnx_proto.INT64, ["batch", 3]) == (
        value.SerializeToString()
    )


def test_a_model_it_writes_passes_the_checker_and_runs():
    import onnxruntime

    weight = np.random.default_rng(7).standard_normal((4, 3)).astype(np.float32)
    nodes = [
        onnx_proto.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        onnx_proto.make_node("Softmax", ["h"], ["y"], name="softmax", axis=-1),
    ]
    graph = onnx_proto.make_graph(
        nodes,
        "tiny",
        [onnx_proto.make_tensor_value_info("x", onnx_proto.FLOAT, ["batch", 4])],
        [onnx_proto.make_tensor_value_info("y", onnx_proto.FLOAT, ["batch", 3])],
        initializer=[onnx_proto.from_array(weight, "w")],
    )
    written = onnx_proto.make_model(
        graph, ir_version=8, opset=17, producer_name="test", producer_version="1"
    )
    model = onnx.load_from_string(written)
    onnx.checker.check_model(model, full_check=True)
    assert [opset.version for opset in model.opset_import] == [17]
    assert np.array_equal(numpy_helper.to_array(model.graph.initializer[0]), weight)
    session = onnxruntime.InferenceSession(written, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(8).standard_normal((5, 4)).astype(np.float32)
    [y] = session.run(None, {"x": x})
    h = x @ weight
    expected = np.exp(h - h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, expected / expected.sum(axis=1, keepdims=True), rtol=1e-5)
