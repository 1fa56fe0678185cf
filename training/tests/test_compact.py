"""energyflow.compact: float16 weights behind a Cast, checked against the float32 graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from energyflow.bundle import FORMAT_VERSION, read_manifest, write_manifest
from energyflow.compact import CompactError, compact_bundle, to_float16


def _mlp(path: Path, seed: int = 0, big: float = 1.0) -> None:
    """y = tanh(x @ W1 + b1) @ W2, with W1 64x128 (converted) and b1 (too small to convert)."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((64, 128)) * 0.2 * big).astype(np.float32)
    b1 = rng.standard_normal(128).astype(np.float32)
    w2 = (rng.standard_normal((128, 8)) * 0.1).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
         helper.make_node("Tanh", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    _mlp(tmp_path / "energy_grad.onnx")
    write_manifest(tmp_path, {"format_version": FORMAT_VERSION, "name": "t"})
    return tmp_path


def test_weights_halve_and_outputs_hold(bundle: Path) -> None:
    before = (bundle / "energy_grad.onnx").stat().st_size
    diffs = compact_bundle(bundle)
    after = (bundle / "energy_grad.onnx").stat().st_size
    assert after < 0.6 * before
    assert 0 < diffs["energy_grad.onnx"]["y"] < 5e-3
    man = read_manifest(bundle)  # hashes rewritten: verifies
    assert man["weights"]["dtype"] == "float16"
    m = onnx.load(str(bundle / "energy_grad.onnx"))
    kinds = {i.name: i.data_type for i in m.graph.initializer}
    assert kinds == {"w1__fp16": TensorProto.FLOAT16, "w2__fp16": TensorProto.FLOAT16, "b1": TensorProto.FLOAT}
    assert [n.op_type for n in m.graph.node[:2]] == ["Cast", "Cast"]
    # a second pass leaves it alone
    assert compact_bundle(bundle) == diffs
    assert (bundle / "energy_grad.onnx").stat().st_size == after


def test_out_of_tolerance_leaves_the_bundle(bundle: Path) -> None:
    original = (bundle / "energy_grad.onnx").read_bytes()
    manifest = (bundle / "manifest.json").read_text()
    with pytest.raises(CompactError, match="bundle unchanged"):
        compact_bundle(bundle, tolerance=1e-9)
    assert (bundle / "energy_grad.onnx").read_bytes() == original
    assert (bundle / "manifest.json").read_text() == manifest


@pytest.mark.parametrize("scale,w1_type", [(1.0, TensorProto.FLOAT16), (1e6, TensorProto.FLOAT)])
def test_a_weight_float16_cannot_hold_stays_float32(tmp_path: Path, scale: float, w1_type: int) -> None:
    _mlp(tmp_path / "g.onnx", big=scale)
    m = onnx.load(str(tmp_path / "g.onnx"))
    to_float16(m)
    kinds = {i.name.removesuffix("__fp16"): i.data_type for i in m.graph.initializer}
    assert kinds == {"w1": w1_type, "w2": TensorProto.FLOAT16, "b1": TensorProto.FLOAT}
