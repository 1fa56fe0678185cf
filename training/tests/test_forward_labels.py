"""energyflow.forward_labels on the real simulator and the shipped BinPicking bundle, and the
labelled windows ``energyflow train --labels`` adds (energyflow.data)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from energyflow import cli
from energyflow.config import ModelConfig
from energyflow.data import DataError, Demo, Normalizer, WindowDataset, load_labels, write_hdf5
from energyflow.forward_labels import forward_expert, main, restore, scene, snapshot
from test_train_cli import TINY_FLAGS, toy_demos

BUNDLE = Path(__file__).resolve().parents[2] / "bundles" / "metaworld-bin-picking"


@pytest.fixture(scope="module")
def world():
    from sim.world import World

    return World("bin-picking", camera_size=None)


@pytest.fixture(scope="module")
def expert():
    from sim.world import expert_policy

    return expert_policy("bin-picking").get_action


def test_snapshot_and_restore_leave_the_world_where_it_was(world, expert) -> None:
    world.reset(level="0", seed=1000)
    for _ in range(5):
        world.step(np.array([0.3, -0.2, 0.1, 0.5], np.float32))
    snap = snapshot(world.env)
    a = np.array([-0.4, 0.6, -0.3, -1.0], np.float32)
    want = world.env.step(a)[0]
    restore(world.env, snap)
    forward_expert(world.env, expert, [a, a], 6)  # moves the world on
    restore(world.env, snap)
    np.testing.assert_allclose(world.env.step(a)[0], want, rtol=0, atol=1e-9)  # MuJoCo round-off only


def test_labels_leave_the_drive_as_the_rollout_drives(world, expert) -> None:
    from energyflow.rollout import load_planner, rollout

    planner = load_planner(BUNDLE, threads=1)
    states, chunks, row = scene(planner, world, expert, 1000, 3, 5, max_steps=60)
    plain = rollout(planner, world, 1000, max_steps=60, min_late=3, max_late=5)
    assert (row["steps"], row["success"]) == (plain["steps"], plain["success"])
    assert row["labels"] == len(states) == len(chunks) > 0
    assert np.stack(states).shape[1:] == (2, 39) and np.stack(chunks).shape[1:] == (16, 4)
    assert np.abs(np.stack(chunks)).max() <= 1


def test_the_label_is_the_last_action_then_the_committed_ones_then_the_expert(world, expert) -> None:
    from energyflow.rollout import load_planner

    planner = load_planner(BUNDLE, threads=1)
    done, plans_at = [], []
    step, plan = world.step, planner.plan

    def recording_step(a):
        done.append(np.clip(np.asarray(a, np.float32), -1, 1))
        return step(a)

    def recording_plan(cond, z):
        plans_at.append(len(done))
        return plan(cond, z)

    world.step, planner.plan = recording_step, recording_plan
    try:
        states, chunks, row = scene(planner, world, expert, 1001, 3, 3, max_steps=60)
    finally:
        del world.step
    labelled = [t for t in plans_at if t > 0][:len(chunks)]  # every plan after the first runs a label
    assert len(labelled) == len(chunks) >= 5
    for t, c in zip(labelled, chunks):
        np.testing.assert_array_equal(c[0], done[t - 1])  # the action before the observation
        if t + 3 <= len(done):
            np.testing.assert_allclose(c[1:4], np.stack(done[t:t + 3]), atol=1e-7)  # the committed ones
    # the rest is the expert's from where the committed actions lead: replay the first label
    world.reset(level="0", seed=1001)
    for a in done[:labelled[0]]:
        world.step(a)
    want = forward_expert(world.env, expert, list(chunks[0][1:4]), 12)
    np.testing.assert_allclose(chunks[0][4:], want, atol=1e-6)


@pytest.mark.parametrize("argv, message", [
    (["--min-late", "0"], "--min-late must be 1"),
    (["--min-late", "4", "--max-late", "3"], "--min-late must be 1"),
    (["--max-late", "15"], "no room past that delay"),
])
def test_command_line_refuses_bad_lateness_in_one_line(argv, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--bundle", str(BUNDLE), "--seeds", "46000:46001", "--out", str(tmp_path / "l.npz"), *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
    assert not (tmp_path / "l.npz").exists()


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
