"""The camera localiser (energyflow.localiser) and the camera bundle conversion."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch

from energyflow import localiser as L
from energyflow.camera_bundle import CameraBundleError, camera_bundle
from energyflow.export import ALLOWED_OPS, graph_ops
from energyflow.preprocess import preprocess_image


def _scene(x: float, size: int = 32) -> np.ndarray:
    """A grey frame with a red square whose column follows x in [-1, 1]."""
    img = np.full((size, size, 3), 90, np.uint8)
    c = int(round((x + 1) / 2 * (size - 9))) + 1
    img[12:20, c:c + 7] = (220, 30, 30)
    return img


@pytest.mark.parametrize("row,col", [(0, 0), (5, 17), (11, 11)])
def test_spatial_softmax_finds_a_peak(row, col):
    ss = L.SpatialSoftmax(12, 18)
    x = torch.full((1, 1, 12, 18), -50.0)
    x[0, 0, row, col] = 50.0
    kp = ss(x)[0].detach().numpy()
    assert kp == pytest.approx([-1 + 2 * col / 17, -1 + 2 * row / 11], abs=1e-4)


@pytest.mark.parametrize("kind,actions_close,want_step", [
    ("success", None, 6),
    ("grasp", 3, 3),
    ("grasp", None, 6),  # never closes: the success step
])
def test_episode_label(kind, actions_close, want_step):
    proprio = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    actions = -np.ones((10, 4), np.float32)
    if actions_close is not None:
        actions[actions_close:, 3] = 1.0
    got = L.episode_label(proprio, actions, 6, kind)
    assert got.tolist() == proprio[want_step, :3].tolist()


def test_episode_label_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="label 'touch'"):
        L.episode_label(np.zeros((3, 4)), np.zeros((3, 4)), 1, "touch")


def test_localiser_learns_where_the_object_is():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, 240)
    frames = np.stack([_scene(x) for x in xs])
    targets = np.stack([xs, 0.5 * xs, np.zeros_like(xs)], 1).astype(np.float32)
    cfg = L.LocaliserConfig(channels=(8, 8, 8), keypoints=8, steps=400, batch_size=32, lr=3e-3, shift=1)
    m = L.train_localiser(frames[:200], targets[:200], cfg, log_every=0)
    err = np.abs(L.predict(m, frames[200:])[:, 0] - xs[200:])
    assert err.mean() < 0.1, f"held-out error {err.mean():.3f} (labels span 2.0)"


def test_vision_graph_matches_torch_and_uses_allowed_ops(tmp_path):
    torch.set_num_threads(1)
    cfg = L.LocaliserConfig(image_size=(32, 32), channels=(8, 8, 8), keypoints=4)
    m = L.Localiser(cfg).eval()
    mean, std = np.array([0.1, 0.2, 0.3]), np.array([2.0, 3.0, 4.0])
    path = tmp_path / "vision.onnx"
    L.export_vision(m, mean, std, str(path))
    assert set(graph_ops(path)) <= ALLOWED_OPS | {"InstanceNormalization"}
    img = _scene(0.3)
    x = preprocess_image(img, L.native_spec((32, 32)))[None]
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["features"], {"image": x})
    with torch.no_grad():
        want = (m(torch.from_numpy(x)).numpy() - mean) / std
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_camera_bundle_keeps_cond_and_refuses_a_wrong_width(tmp_path):
    from energyflow.fixtures import make_fixtures

    torch.set_num_threads(1)
    make_fixtures(tmp_path / "fx", n_cases=1, train_steps=2, steps=2, state_dim=7)
    cfg = L.LocaliserConfig(image_size=(32, 32), channels=(8, 8, 8), keypoints=4)
    loc = L.Localiser(cfg).eval()
    L.save(loc, str(tmp_path / "loc.pt"))
    src = json.loads((tmp_path / "fx" / "bundle" / "manifest.json").read_text())
    man = camera_bundle(tmp_path / "fx" / "bundle", tmp_path / "loc.pt", tmp_path / "cam", "topview")
    assert man["cond_dim"] == src["cond_dim"]
    assert [o["name"] for o in man["obs"]] == ["proprio", "camera"]
    assert man["obs"][1]["camera"] == {"name": "topview", "width": 32, "height": 32}
    assert man["obs"][0]["norm"]["mean"] == pytest.approx(src["obs"][0]["norm"]["mean"][:4])
    assert "vision.onnx" in man["files"]

    make_fixtures(tmp_path / "fx5", n_cases=1, train_steps=2, steps=2, state_dim=5)
    with pytest.raises(CameraBundleError, match="state width 5, expected 4"):
        camera_bundle(tmp_path / "fx5" / "bundle", tmp_path / "loc.pt", tmp_path / "cam5", "topview")
