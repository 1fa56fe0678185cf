"""energyflow.camera_state_term: a camera bundle's state term retrained on camera demonstrations."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from energyflow import localiser as L
from energyflow.bundle import read_manifest, write_manifest
from energyflow.camera_bundle import camera_bundle
from energyflow.camera_state_term import CameraStateTermError, features, retrain, state_view
from energyflow.preprocess import preprocess_image


def _frame(x: float, size: int = 32) -> np.ndarray:
    img = np.full((size, size, 3), 90, np.uint8)
    c = int(round((x + 1) / 2 * (size - 9))) + 1
    img[12:20, c:c + 7] = (220, 30, 30)
    return img


@pytest.fixture
def cam_bundle(tmp_path):
    from energyflow.fixtures import make_fixtures

    torch.set_num_threads(1)
    make_fixtures(tmp_path / "fx", n_cases=1, train_steps=2, steps=2, state_dim=7)
    loc = L.Localiser(L.LocaliserConfig(image_size=(32, 32), channels=(8, 8, 8), keypoints=4)).eval()
    L.save(loc, str(tmp_path / "loc.pt"))
    out = tmp_path / "cam"
    man = camera_bundle(tmp_path / "fx" / "bundle", tmp_path / "loc.pt", out, "topview")
    cal = man["calibration"] = man.get("calibration") or {}
    cal["closed_loop"] = {"score": "state_energy", "rate_hz": 20, "steps_k": 2, "q": 8.7}
    cal["closed_loop_others"] = [{"score": "state_energy", "rate_hz": 10, "steps_k": 2, "q": 9.9}]
    write_manifest(out, man)
    return out


def _demos(path, action_dim: int, camera: bool = True, n: int = 4, steps: int = 6) -> None:
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for i in range(n):
            g = f.create_group(f"data/demo_{i}")
            g.create_dataset("actions", data=rng.normal(size=(steps, action_dim)).astype(np.float32))
            g.create_dataset("obs/proprio", data=rng.normal(size=(steps, 4)).astype(np.float32))
            if camera:
                xs = np.linspace(-1, 1, steps) * (i + 1) / n
                g.create_dataset("obs/camera", data=np.stack([_frame(x) for x in xs]))


def test_features_are_the_vision_graphs_and_the_view_keeps_cond(cam_bundle, tmp_path):
    import h5py

    man = read_manifest(cam_bundle)
    _demos(tmp_path / "d.hdf5", man["action_dim"])
    assert features(cam_bundle, tmp_path / "d.hdf5", tmp_path / "s.hdf5") == {"demos": 4, "steps": 24, "features": 3}
    cam = man["obs"][1]
    sess = ort.InferenceSession(str(cam_bundle / "vision.onnx"), providers=["CPUExecutionProvider"])
    with h5py.File(tmp_path / "d.hdf5") as d, h5py.File(tmp_path / "s.hdf5") as s:
        frame, prop = d["data/demo_2/obs/camera"][3], d["data/demo_2/obs/proprio"][3]
        row = s["data/demo_2/obs/state"][3]
    (want,) = sess.run(None, {sess.get_inputs()[0].name: preprocess_image(frame, cam["preprocess"])[None]})
    np.testing.assert_allclose(row, np.concatenate([prop, want[0]]), rtol=1e-6)

    view = read_manifest(state_view(cam_bundle, tmp_path / "view"))
    assert [o["name"] for o in view["obs"]] == ["state"] and view["cond_dim"] == man["cond_dim"]
    assert "vision" not in view["graphs"]
    norm = view["obs"][0]["norm"]
    # the view standardises the arm reading as the camera bundle does and leaves the features as they come
    assert norm["mean"] == man["obs"][0]["norm"]["mean"] + [0.0] * 3
    assert norm["std"] == man["obs"][0]["norm"]["std"] + [1.0] * 3


def test_retrain_writes_a_new_term_and_drops_the_old_thresholds(cam_bundle, tmp_path):
    man = read_manifest(cam_bundle)
    _demos(tmp_path / "d.hdf5", man["action_dim"], n=12)
    block = retrain(cam_bundle, tmp_path / "d.hdf5", tmp_path / "new", steps=20)
    new = read_manifest(tmp_path / "new")  # every file hash checks
    assert new["state_energy"]["train"]["camera_demos"]["demos"] == 12
    assert block["train"]["dropped_closed_loop"] == [{"rate_hz": 20, "steps_k": 2, "q": 8.7},
                                                      {"rate_hz": 10, "steps_k": 2, "q": 9.9}]
    assert "closed_loop" not in new["calibration"] and "closed_loop_others" not in new["calibration"]
    assert [o["name"] for o in new["obs"]] == ["proprio", "camera"]   # still the camera bundle
    sess = ort.InferenceSession(str(tmp_path / "new" / "state_energy.onnx"), providers=["CPUExecutionProvider"])
    (score,) = sess.run(None, {"cond": np.zeros((2, man["cond_dim"]), np.float32)})
    assert score.shape == (2,) and np.isfinite(score).all()
    with pytest.raises(CameraStateTermError, match="exists"):
        retrain(cam_bundle, tmp_path / "d.hdf5", tmp_path / "new", steps=20)


def test_refuses_demonstrations_without_the_camera(cam_bundle, tmp_path):
    _demos(tmp_path / "d.hdf5", read_manifest(cam_bundle)["action_dim"], camera=False)
    with pytest.raises(CameraStateTermError, match="no obs/camera"):
        features(cam_bundle, tmp_path / "d.hdf5", tmp_path / "s.hdf5")
    with pytest.raises(CameraStateTermError, match="camera bundle"):
        features(tmp_path / "fx" / "bundle", tmp_path / "d.hdf5", tmp_path / "s.hdf5")
