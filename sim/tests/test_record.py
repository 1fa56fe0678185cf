"""Recorded demonstrations have the robomimic-style layout the training toolkit reads."""

import io
import json

import h5py
import numpy as np
import pytest
from PIL import Image

from sim.record import record


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, bridge):
    out = tmp_path_factory.mktemp("rec") / "demos.hdf5"
    s = record("button-press", episodes=1, out=out, camera=True, seed=100,
               extra_steps=3, progress=False, bridge=bridge)
    return out, s


def test_record_layout(recorded):
    out, s = recorded
    assert s["kept"] == 1 and s["attempts"] >= 1 and 0 < s["success_rate"] <= 1
    with h5py.File(out, "r") as f:
        data = f["data"]
        assert data.attrs["env"] == "button-press"
        assert data.attrs["env_name"] == "button-press-v3"
        assert data.attrs["level"] == "0" and data.attrs["seed"] == 100
        assert data.attrs["num_demos"] == 1
        assert json.loads(data.attrs["env_args"])["env_name"] == "button-press-v3"
        demos = sorted(data.keys())
        assert demos == ["demo_0"]
        total = 0
        for k in demos:
            g = data[k]
            L = int(g.attrs["num_samples"])
            total += L
            assert bool(g.attrs["success"])
            assert g["obs/state"].shape == (L, 39) and g["obs/state"].dtype == np.float32
            np.testing.assert_array_equal(g["obs/proprio"][:], g["obs/state"][:, :4])
            assert g["obs/camera"].shape == (L, 48, 64, 3) and g["obs/camera"].dtype == np.uint8
            assert g["actions"].shape == (L, 4) and g["actions"].dtype == np.float32
            a = g["actions"][:]
            assert np.all(np.abs(a) <= 1.0)
            assert g["dones"][-1] == 1 and g["dones"][:-1].sum() == 0
            assert L == int(g.attrs["success_step"]) + 3
            st = g["obs/state"][:]
            assert np.abs(np.diff(st[:, :3], axis=0)).max() < 0.05  # consecutive hand positions
            assert g["obs/camera"][:].std() > 1  # real images, not blanks
            jp = g["obs/camera_jpeg"]
            assert jp.shape == (L,)
            for i in (0, L - 1):  # the JPEG as streamed: the stored frame is its decoding
                img = np.asarray(Image.open(io.BytesIO(jp[i].tobytes())).convert("RGB"))
                np.testing.assert_array_equal(img, g["obs/camera"][i])
        assert data.attrs["total"] == total


def test_recorded_file_loads_in_training_toolkit(recorded):
    """Cross-check with the training toolkit's loader (training/energyflow/data.py)."""
    data = pytest.importorskip("energyflow.data", reason="training loader not present")
    out, _ = recorded
    demos, info = data.load_hdf5(out, obs_keys=["state"], image_keys=["camera"])
    assert len(demos) == 1
    d = demos[0]
    assert d.actions.shape[1] == 4 and d.length > 10
    assert d.obs["state"].shape == (d.length, 39) and d.obs["camera"].shape == (d.length, 48, 64, 3)
    assert info.env == "button-press" and info.total == d.length
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(d.actions, f["data/demo_0/actions"][:])
    demos, _ = data.load_hdf5(out, obs_keys=["proprio"], image_keys=["camera"])
    assert demos[0].obs["proprio"].shape == (demos[0].length, 4)


def test_add_proprio(tmp_path):
    from sim.record import add_proprio

    p = tmp_path / "old.hdf5"
    st = np.arange(5 * 39, dtype=np.float32).reshape(5, 39)
    with h5py.File(p, "w") as f:
        f.create_dataset("data/demo_0/obs/state", data=st)
    assert add_proprio(p) == 1 and add_proprio(p) == 0
    with h5py.File(p, "r") as f:
        np.testing.assert_array_equal(f["data/demo_0/obs/proprio"][:], st[:, :4])
