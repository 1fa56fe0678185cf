"""Export round trip, operator set, manifest fields and hashes, parity fixtures format."""
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from energyflow.bundle import BundleError, read_manifest, sha256_file, write_manifest
from energyflow.config import ModelConfig, TINY_SIZE
from energyflow.export import ExportCheckError, export_energy_grad, graph_ops, write_bundle
from energyflow.model import EnergyUNet

torch.set_num_threads(1)

#: operators the energy-gradient graph may use (TensorRT 10 ONNX parser friendly, opset 17)
TEST_ALLOWED_OPS = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "ReduceMean",
                    "Reshape", "Exp", "Log", "Tanh", "Sigmoid", "Softplus", "Sin", "Cos", "Concat",
                    "Unsqueeze", "Transpose", "Sqrt", "Reciprocal", "Pow", "Slice", "Gather", "Constant",
                    "Identity", "Neg"}


def tiny_model(seed=0, **kw) -> EnergyUNet:
    torch.manual_seed(seed)
    d = dict(action_dim=2, state_dim=4, **TINY_SIZE)
    d.update(kw)
    return EnergyUNet(ModelConfig(**d))


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("b") / "bundle"
    m = tiny_model()
    write_bundle(out, m, "test", [0.1, -0.2], [2.0, 0.5], [0.0] * 4, [1.0, 2.0, 0.0, 3.0])
    return out


def check_export_graph(p) -> onnx.ModelProto:
    """An energy-gradient graph TensorRT 10 parses: valid, opset 17, only the
    allowed operators, and no shape-computing ones (every Reshape target is a
    constant)."""
    model = onnx.load(str(p))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == 17
    ops = set(graph_ops(p))
    assert ops <= TEST_ALLOWED_OPS, ops - TEST_ALLOWED_OPS
    assert not ops & {"Shape", "Where", "Equal", "Cast", "Expand", "ConstantOfShape"}
    return model


def test_export_round_trip_and_ops(bundle_dir):
    p = bundle_dir / "energy_grad.onnx"
    model = check_export_graph(p)
    # reduction axes are constant (ReduceMean takes them as an attribute in opset 17)
    for n in model.graph.node:
        if n.op_type == "ReduceMean":
            assert any(a.name == "axes" for a in n.attribute)
    # dynamic batch
    sess = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
    ins = {i.name: i.shape for i in sess.get_inputs()}
    assert list(ins) == ["a_t", "cond", "t"]
    assert [o.name for o in sess.get_outputs()] == ["grad_a", "energy"]
    for B in (1, 7):
        g, e = sess.run(None, {"a_t": np.random.randn(B, 16, 2).astype(np.float32),
                               "cond": np.random.randn(B, 8).astype(np.float32),
                               "t": np.random.rand(B).astype(np.float32)})
        assert g.shape == (B, 16, 2) and e.shape == (B,)


@pytest.mark.parametrize("kw", [dict(energy_scale="inv_sigma"),
                                dict(input_scale="c_in", energy_scale="edm", energy_prior="gaussian")])
def test_export_matches_autograd_and_refuses_bad(tmp_path, kw):
    m = tiny_model(1, **kw)
    errs = export_energy_grad(m, tmp_path / "eg.onnx")
    assert errs["grad_a"] <= 1e-5 and errs["energy"] <= 1e-5
    with pytest.raises(ExportCheckError):
        export_energy_grad(m, tmp_path / "bad.onnx", tol=0.0)
    assert not (tmp_path / "bad.onnx").exists()


def test_manifest_fields_and_hashes(bundle_dir):
    man = read_manifest(bundle_dir)
    for k in ("format_version", "policy", "name", "created", "source_commit", "action_dim", "pred_horizon",
              "obs_horizon", "action_horizon", "action_norm", "obs", "conditioning", "cond_dim", "schedule",
              "sampler", "reference_actions", "graphs", "calibration", "files", "model"):
        assert k in man, k
    assert man["format_version"] == 1 and man["policy"] == "energyflow"
    assert man["created"].endswith("Z")
    assert (man["action_dim"], man["pred_horizon"], man["obs_horizon"], man["action_horizon"]) == (2, 16, 2, 8)
    assert man["cond_dim"] == 8
    assert man["conditioning"] == {"layout": "history_flat", "items": [{"obs": "state", "width": 4}]}
    assert man["schedule"] == {"kind": "geometric", "sigma_min": 0.01, "sigma_max": 10.0, "T": 1.0, "gamma": 0.001}
    assert man["sampler"] == {"steps": 20}
    ref = np.asarray(man["reference_actions"])
    assert ref.shape == (16, 16, 2)
    assert abs(ref.mean()) < 0.2 and 0.8 < ref.std() < 1.2
    st = man["obs"][0]
    assert st["kind"] == "state" and st["shape"] == [4]
    assert st["norm"]["std"][2] == pytest.approx(1e-6)  # floored
    # float32 round trip of every written float
    for v in man["action_norm"]["std"] + st["norm"]["std"]:
        assert float(np.float32(v)) == v
    g = man["graphs"]["energy_grad"]
    assert g["inputs"] == [{"name": "a_t", "shape": [-1, 16, 2]}, {"name": "cond", "shape": [-1, 8]},
                           {"name": "t", "shape": [-1]}]
    assert g["outputs"] == [{"name": "grad_a", "shape": [-1, 16, 2]}, {"name": "energy", "shape": [-1]}]
    assert man["files"] == {"energy_grad.onnx": sha256_file(bundle_dir / "energy_grad.onnx")}
    assert man["calibration"] is None


def test_tampered_bundle_is_refused(bundle_dir, tmp_path):
    import shutil

    b = tmp_path / "copy"
    shutil.copytree(bundle_dir, b)
    with open(b / "energy_grad.onnx", "ab") as f:
        f.write(b"x")
    with pytest.raises(BundleError, match="sha256"):
        read_manifest(b)
    man = json.loads((b / "manifest.json").read_text())
    man["format_version"] = 2
    (b / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(BundleError, match="format_version"):
        read_manifest(b, verify=False)


def test_vision_bundle(tmp_path):
    from energyflow.train import Policy

    cfg = ModelConfig.from_dict(dict(action_dim=2, state_dim=3, images=[dict(name="camera", shape=(3, 32, 32),
                                                                              resize=(36, 36))], **TINY_SIZE))
    torch.manual_seed(0)
    pol = Policy(cfg).eval()
    man = write_bundle(tmp_path / "vb", pol.energy, "v", [0, 0], [1, 1], [0] * 3, [1] * 3, vision_encoder=pol.vision)
    assert set(man["files"]) == {"energy_grad.onnx", "vision.onnx"}
    assert man["cond_dim"] == 2 * (3 + 512)
    cam = man["obs"][1]
    assert cam["kind"] == "image" and cam["graph"] == "vision" and cam["features"] == 512
    assert cam["preprocess"]["resize"] == [36, 36] and cam["preprocess"]["crop"] == [32, 32]
    assert man["graphs"]["vision"]["inputs"] == [{"name": "image", "shape": [-1, 3, 32, 32]}]
    assert man["conditioning"]["items"] == [{"obs": "state", "width": 3}, {"obs": "camera", "width": 512}]


@pytest.mark.parametrize("width,features", [(64, 512), (4, 32)])
def test_vision_width(width, features):
    from energyflow.train import Policy
    from energyflow.vision import ResNet18GN

    spec = dict(name="camera", shape=(3, 32, 32), resize=(36, 36), width=width)
    cfg = ModelConfig.from_dict(dict(action_dim=2, state_dim=3, images=[spec], **TINY_SIZE))
    assert cfg.images[0].features == features and cfg.cond_dim == 2 * (3 + features)
    pol = Policy(cfg).eval()
    assert pol.vision(torch.zeros(1, 3, 32, 32)).shape == (1, features)
    # the config round-trips (checkpoints store to_dict)
    assert ModelConfig.from_dict(cfg.to_dict()).images[0].width == width
    with pytest.raises(ValueError, match="width"):
        ModelConfig.from_dict(dict(action_dim=2, state_dim=3, images=[dict(spec, features=100)], **TINY_SIZE))
    with pytest.raises(ValueError, match="width"):
        ResNet18GN(0)


def test_fixtures_format(tmp_path):
    from energyflow.fixtures import make_fixtures

    res = make_fixtures(tmp_path, n_cases=2, train_steps=2, steps=3)
    doc = json.loads((tmp_path / "cases.json").read_text())
    assert doc["steps"] == 3 and len(doc["cases"]) == 2
    c = doc["cases"][0]
    man = read_manifest(tmp_path / "bundle")
    assert np.asarray(c["obs"]["state"]).shape == (2, 5)
    assert len(c["cond"]) == man["cond_dim"]
    assert np.asarray(c["noise"]).shape == (16, 3)
    a_std = np.asarray(c["actions_std"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    np.testing.assert_allclose(np.asarray(c["actions"]), a_std * std + mean, rtol=1e-6, atol=1e-6)
    assert c["centered_reward"] == pytest.approx(-(c["energy"] - c["ref_energy_mean"]))
    assert res["torch_vs_ort_max_abs_action_diff"] < 1e-3
    sm = np.asarray(man["obs"][0]["norm"]["mean"], np.float32)
    ss = np.asarray(man["obs"][0]["norm"]["std"], np.float32)
    np.testing.assert_allclose(np.asarray(c["cond"], np.float32),
                               ((np.asarray(c["obs"]["state"], np.float32) - sm) / ss).reshape(-1), rtol=1e-6)


def test_rewrite_manifest_updates_hashes(bundle_dir, tmp_path):
    import shutil

    b = tmp_path / "c2"
    shutil.copytree(bundle_dir, b)
    man = read_manifest(b)
    (b / "calibration.png").write_bytes(b"png")
    man = write_manifest(b, man)
    assert "calibration.png" in man["files"]
    read_manifest(b)
