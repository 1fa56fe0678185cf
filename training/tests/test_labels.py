"""Labelled windows: ``energyflow.data.load_labels``, ``WindowDataset.add_windows`` and
``energyflow train --labels`` (research/delay/forward_labels.py writes such files)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from energyflow import cli
from energyflow.config import ModelConfig
from energyflow.data import DataError, Demo, Normalizer, WindowDataset, load_labels, write_hdf5
from test_train_cli import TINY_FLAGS, toy_demos


def _toy_dataset(rng: np.random.Generator) -> WindowDataset:
    demos = [Demo(f"demo_{i}", rng.standard_normal((20, 2)).astype(np.float32),
                  {"state": rng.standard_normal((20, 3)).astype(np.float32)}) for i in range(3)]
    a_norm = Normalizer.fit(np.concatenate([d.actions for d in demos]))
    s_norm = Normalizer.fit(np.concatenate([d.obs["state"] for d in demos]))
    return WindowDataset(demos, "state", [], 2, 6, 2, a_norm, s_norm)


def test_add_windows_appends_one_normalised_window_per_label() -> None:
    rng = np.random.default_rng(0)
    ds = _toy_dataset(rng)
    n0 = len(ds)
    before = ds.batch(np.arange(n0))["actions"].copy()
    states = rng.standard_normal((4, 2, 3)).astype(np.float32)
    chunks = rng.standard_normal((4, 6, 2)).astype(np.float32)
    assert ds.add_windows(states, chunks) == n0 + 4
    got = ds.batch(np.arange(n0, n0 + 4))
    np.testing.assert_allclose(got["state"], ds.state_norm(states), rtol=1e-6)
    np.testing.assert_allclose(got["actions"], ds.action_norm(chunks), rtol=1e-6)
    np.testing.assert_array_equal(ds.batch(np.arange(n0))["actions"], before)  # the demos' windows unchanged
    with pytest.raises(DataError, match="T_p"):
        ds.add_windows(states, chunks[:, :5])


def test_load_labels_joins_files_and_refuses_bad_ones(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    s, a = rng.standard_normal((5, 2, 3)).astype(np.float32), rng.standard_normal((5, 6, 2)).astype(np.float32)
    np.savez(tmp_path / "a.npz", states=s[:3], chunks=a[:3])
    np.savez(tmp_path / "b.npz", states=s[3:], chunks=a[3:])
    got_s, got_a = load_labels([tmp_path / "a.npz", tmp_path / "b.npz"])
    np.testing.assert_array_equal(got_s, s)
    np.testing.assert_array_equal(got_a, a)
    bad_a = a.copy()
    bad_a[1, 2, 0] = np.nan
    np.savez(tmp_path / "nan.npz", states=s, chunks=bad_a)
    np.savez(tmp_path / "nokey.npz", states=s)
    np.savez(tmp_path / "short.npz", states=s[:2], chunks=a)
    np.savez(tmp_path / "wide.npz", states=rng.standard_normal((2, 2, 4)).astype(np.float32), chunks=a[:2])
    for files, message in [(["nan.npz"], "NaN"), (["nokey.npz"], "'states' and 'chunks'"),
                           (["short.npz"], "want"), (["a.npz", "wide.npz"], "differ"), (["none.npz"], "not a labels")]:
        with pytest.raises(DataError, match=message) as e:
            load_labels([tmp_path / f for f in files])
        assert "\n" not in str(e.value)


def test_train_adds_the_labels_as_training_windows(tmp_path: Path) -> None:
    """``energyflow train --labels``: one window per label joins the training set; a label whose
    window is not the model's is refused in one line."""
    write_hdf5(tmp_path / "toy.hdf5", toy_demos(), env="toy-env")
    cfg = ModelConfig()
    rng = np.random.default_rng(2)
    labels = tmp_path / "labels.npz"
    np.savez(labels, states=rng.standard_normal((7, cfg.obs_horizon, 3)).astype(np.float32) * 0.1,
             chunks=np.tanh(rng.standard_normal((7, cfg.pred_horizon, 2))).astype(np.float32))
    common = ["--data", str(tmp_path / "toy.hdf5"), "--steps", "2", "--batch-size", "8", "--warmup-steps", "1",
              "--val-every", "0", "--no-progress", "--no-export", "--val-fraction", "0.34", "--threads", "1"] + TINY_FLAGS
    assert cli.main(["train", "--out", str(tmp_path / "plain"), *common]) == 0
    assert cli.main(["train", "--out", str(tmp_path / "lab"), "--labels", str(labels), *common]) == 0
    plain = json.loads((tmp_path / "plain" / "summary.json").read_text())["windows"]
    lab = json.loads((tmp_path / "lab" / "summary.json").read_text())["windows"]
    assert lab == {"train": plain["train"] + 7, "val": plain["val"], "labels": 7}
    np.savez(tmp_path / "wrong.npz", states=rng.standard_normal((2, cfg.obs_horizon, 3)).astype(np.float32),
             chunks=rng.standard_normal((2, cfg.pred_horizon - 1, 2)).astype(np.float32))
    with pytest.raises(DataError, match="the model's windows") as e:
        cli.main(["train", "--out", str(tmp_path / "wrong"), "--labels", str(tmp_path / "wrong.npz"), *common])
    assert "\n" not in str(e.value)


def test_add_windows_refuses_a_camera_policys_dataset() -> None:
    rng = np.random.default_rng(3)
    demos = [Demo("demo_0", rng.standard_normal((20, 2)).astype(np.float32),
                  {"state": rng.standard_normal((20, 3)).astype(np.float32),
                   "cam": rng.integers(0, 255, (20, 8, 8, 3), dtype=np.uint8)})]
    a_norm = Normalizer.fit(demos[0].actions)
    s_norm = Normalizer.fit(demos[0].obs["state"])
    ds = WindowDataset(demos, "state", ["cam"], 2, 6, 2, a_norm, s_norm)
    with pytest.raises(DataError, match="state policies"):
        ds.add_windows(np.zeros((1, 2, 3), np.float32), np.zeros((1, 6, 2), np.float32))
