"""HDF5 loading, validation errors, windows and normalisation."""
import h5py
import numpy as np
import pytest

from energyflow.data import DataError, Demo, Normalizer, WindowDataset, load_hdf5, split_demos, window_indices, write_hdf5


def make_file(path, n=3, L=12, ds=4, da=2, image=False):
    rng = np.random.default_rng(0)
    demos = []
    for i in range(n):
        obs = {"state": rng.standard_normal((L + i, ds)).astype(np.float32)}
        if image:
            obs["camera"] = rng.integers(0, 255, (L + i, 8, 8, 3), dtype=np.uint8)
        demos.append(Demo(f"demo_{i}", rng.uniform(-1, 1, (L + i, da)).astype(np.float32), obs))
    write_hdf5(path, demos, env="toy")
    return demos


def test_load_roundtrip(tmp_path):
    p = tmp_path / "d.hdf5"
    make_file(p, image=True)
    demos, info = load_hdf5(p, ["state"], ["camera"])
    assert [d.name for d in demos] == ["demo_0", "demo_1", "demo_2"]
    assert info.env == "toy" and info.action_dim == 2 and info.obs_shapes == {"state": (4,), "camera": (8, 8, 3)}
    assert demos[1].length == 13 and demos[0].obs["camera"].dtype == np.uint8


def _corrupt(p, fn):
    with h5py.File(p, "a") as f:
        fn(f)


@pytest.mark.parametrize("fn,pattern", [
    (lambda f: f["data/demo_1/obs"].__delitem__("state"), r"demo_1/obs/state: missing key"),
    (lambda f: f["data/demo_2"].__delitem__("actions"), r"demo_2: missing key 'actions'"),
    (lambda f: (f["data/demo_0/obs"].__delitem__("state"),
                f["data/demo_0/obs"].create_dataset("state", data=np.zeros((5, 4), np.float32))),
     r"demo_0/obs/state: ragged lengths, 5 steps but 'actions' has 12"),
    (lambda f: f["data/demo_1/actions"].__setitem__((3, 1), np.nan), r"demo_1/actions: contains NaN .*step 3"),
    (lambda f: f["data/demo_2/obs/state"].__setitem__((0, 0), np.inf), r"demo_2/obs/state: contains Inf"),
    (lambda f: (f["data/demo_0/obs"].__delitem__("state"),
                f["data/demo_0/obs"].create_dataset("state", data=np.zeros((12, 4), np.int32))),
     r"demo_0/obs/state: expected a float array, got dtype int32"),
    (lambda f: f["data/demo_1"].attrs.__setitem__("num_samples", 99), r"demo_1: attribute num_samples=99"),
])
def test_validation_errors(tmp_path, fn, pattern):
    p = tmp_path / "d.hdf5"
    make_file(p)
    _corrupt(p, fn)
    with pytest.raises(DataError, match=pattern):
        load_hdf5(p, ["state"])


def test_validation_image_dtype_and_missing_file(tmp_path):
    p = tmp_path / "d.hdf5"
    make_file(p, image=True)

    def f(h):
        del h["data/demo_0/obs/camera"]
        h["data/demo_0/obs"].create_dataset("camera", data=np.zeros((12, 8, 8, 3), np.float32))

    _corrupt(p, f)
    with pytest.raises(DataError, match=r"demo_0/obs/camera: image observations must be uint8"):
        load_hdf5(p, ["state"], ["camera"])
    with pytest.raises(DataError, match="file not found"):
        load_hdf5(tmp_path / "nope.hdf5", ["state"])
    with h5py.File(tmp_path / "empty.hdf5", "w") as h:
        h.create_group("other")
    with pytest.raises(DataError, match="missing group 'data'"):
        load_hdf5(tmp_path / "empty.hdf5", ["state"])


def test_windows_pad_like_diffusion_policy():
    obs_idx, act_idx = window_indices([5], T_o=2, T_p=4, T_a=2)
    # current steps 0..L-T_a = 0..3
    np.testing.assert_array_equal(obs_idx, [[0, 0], [0, 1], [1, 2], [2, 3]])   # first obs repeated
    # chunk starts at the oldest observation (Diffusion Policy): actions[T_o-1] belongs to the newest obs
    np.testing.assert_array_equal(act_idx, [[0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 4]])  # edges repeated
    o2, a2 = window_indices([3, 2], 2, 2, 1)
    assert o2.min() == 0 and a2.max() == 4 and o2[3].tolist() == [3, 3]


def test_split_by_demo_and_dataset(tmp_path):
    p = tmp_path / "d.hdf5"
    make_file(p, n=10)
    demos, _ = load_hdf5(p, ["state"])
    tr, va = split_demos(demos, 0.2, seed=0)
    assert len(tr) == 8 and len(va) == 2 and not {d.name for d in tr} & {d.name for d in va}
    an = Normalizer.fit(np.concatenate([d.actions for d in tr]))
    sn = Normalizer.fit(np.concatenate([d.obs["state"] for d in tr]))
    ds = WindowDataset(tr, "state", [], 2, 16, 8, an, sn)
    b = ds.batch(np.arange(5))
    assert b["actions"].shape == (5, 16, 2) and b["state"].shape == (5, 2, 4)
    allact = np.concatenate([d.actions for d in tr])
    np.testing.assert_allclose(an(allact).mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(an(allact).std(0), 1, atol=1e-4)


def test_normalizer_constant_dims():
    x = np.ones((10, 3), np.float32)
    x[:, 0] = np.arange(10)
    n = Normalizer.fit(x)
    assert n.std[1] == 1.0 and n.std[2] == 1.0 and n.std[0] > 1
