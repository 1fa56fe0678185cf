"""research.delay.told: the widened network, its training windows and its rollout."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from energyflow.data import DataError, Demo, Normalizer, WindowDataset
from energyflow.rollout import load_planner, rollout
from research.delay.told import DELAY_SCALE, told_datasets, told_rollout, widen

BUNDLE = Path(__file__).resolve().parents[2] / "bundles" / "metaworld-bin-picking"


@pytest.fixture(scope="module")
def shipped():
    from energyflow.from_bundle import policy_from_bundle

    return policy_from_bundle(BUNDLE)[0]


def test_the_widened_network_is_the_shipped_one_at_delay_zero(shipped) -> None:
    wide = widen(shipped)
    ds, to = shipped.cfg.state_dim, shipped.cfg.obs_horizon
    assert wide.cfg.state_dim == ds + 1
    g = torch.Generator().manual_seed(0)
    a, c, t = torch.randn(4, 16, 4, generator=g), torch.randn(4, to * ds, generator=g), torch.rand(4, generator=g)
    steps = c.reshape(4, to, ds)
    told0 = torch.cat([steps, torch.zeros(4, to, 1)], 2).reshape(4, -1)
    with torch.no_grad():
        want, got = shipped.energy(a, c, t), wide.energy(a, told0, t)
        assert torch.allclose(got, want, rtol=1e-5)
        wide.energy.net.enc_lin1.weight[:, ds] = 1.0  # the delay's weights, once trained, change it
        told1 = torch.cat([steps, torch.ones(4, to, 1)], 2).reshape(4, -1)
        assert not torch.allclose(wide.energy(a, told1, t), want, rtol=1e-3)


def _dataset(n_demos: int = 3, length: int = 30, ds: int = 5, da: int = 2) -> WindowDataset:
    rng = np.random.default_rng(0)
    demos = [Demo(name=f"d{i}", actions=rng.uniform(-1, 1, (length, da)).astype(np.float32),
                  obs={"state": rng.normal(2, 3, (length, ds)).astype(np.float32)}) for i in range(n_demos)]
    a_norm = Normalizer.fit(np.concatenate([d.actions for d in demos]))
    s_norm = Normalizer.fit(np.concatenate([d.obs["state"] for d in demos]))
    return WindowDataset(demos, "state", [], 2, 16, 8, a_norm, s_norm)


def test_labels_join_the_demonstrations_at_their_delay(tmp_path) -> None:
    train, val = _dataset(), _dataset(n_demos=1)
    n_demo_windows, norm = len(train), train.state_norm
    rng = np.random.default_rng(1)
    states = rng.normal(2, 3, (6, 2, 5)).astype(np.float32)
    chunks = rng.uniform(-1, 1, (6, 16, 2)).astype(np.float32)
    delays = np.array([1, 2, 3, 4, 5, 3], np.int8)
    np.savez(tmp_path / "l.npz", states=states, chunks=chunks, delays=delays)
    train, val, added = told_datasets(train, val, [tmp_path / "l.npz"])
    assert added == 6 and len(train) == n_demo_windows + 6
    # the demonstrations' normaliser, widened by the delay's (mean 0, std DELAY_SCALE), in both sets
    for ds in (train, val):
        np.testing.assert_array_equal(ds.state_norm.mean, np.append(norm.mean, 0))
        np.testing.assert_array_equal(ds.state_norm.std, np.append(norm.std, DELAY_SCALE))
    demo = train.batch(np.arange(n_demo_windows))["state"]
    assert demo.shape[-1] == 6 and np.all(demo[..., 5] == 0)
    assert np.all(val.batch(np.arange(len(val)))["state"][..., 5] == 0)
    lab = train.batch(np.arange(n_demo_windows, len(train)))
    np.testing.assert_allclose(lab["state"][..., 5], np.repeat(delays[:, None] / DELAY_SCALE, 2, 1))
    np.testing.assert_allclose(lab["state"][..., :5], norm(states.reshape(-1, 5)).reshape(6, 2, 5), rtol=1e-6)
    np.testing.assert_allclose(lab["actions"], train.action_norm(chunks.reshape(-1, 2)).reshape(6, 16, 2), rtol=1e-6)


def test_labels_without_their_delays_are_refused(tmp_path) -> None:
    np.savez(tmp_path / "old.npz", states=np.zeros((2, 2, 5), np.float32), chunks=np.zeros((2, 16, 2), np.float32))
    with pytest.raises(DataError, match="no 'delays'"):
        told_datasets(_dataset(), None, [tmp_path / "old.npz"])


def test_the_told_rollout_draws_as_the_rollout_does() -> None:
    """A planner that ignores the delay column drives exactly as the shipped one through
    energyflow.rollout: the same scene, noise and lateness draws in the same order."""
    from sim.world import World

    plain = load_planner(BUNDLE, threads=1)
    seen = []

    def plan(cond: np.ndarray, z: np.ndarray) -> np.ndarray:
        steps = cond.reshape(cond.shape[0], plain.obs_horizon, -1)
        seen.append(float(steps[0, -1, -1]))
        return plain.plan(steps[..., :-1].reshape(cond.shape[0], -1), z)

    told = replace(plain, plan=plan, state_mean=np.append(plain.state_mean, 0), state_std=np.append(plain.state_std, 1))
    world = World("bin-picking", camera_size=None)
    want = rollout(plain, world, 1000, max_steps=60, min_late=3, max_late=5)
    got = told_rollout(told, world, 1000, 3, 5, max_steps=60)
    assert (got["steps"], got["success"]) == (want["steps"], want["success"])
    assert seen and set(seen) <= {3.0, 4.0, 5.0}


def test_labels_under_the_fewest_steps_late_are_left_out_and_the_scale_is_kept(tmp_path) -> None:
    train = _dataset()
    n_demo_windows = len(train)
    np.savez(tmp_path / "l.npz", states=np.zeros((5, 2, 5), np.float32), chunks=np.zeros((5, 16, 2), np.float32),
             delays=np.array([1, 2, 3, 4, 5], np.int8))
    train, _, added = told_datasets(train, None, [tmp_path / "l.npz"], scale=1.0, min_delay=3)
    assert added == 3 and len(train) == n_demo_windows + 3
    lab = train.batch(np.arange(n_demo_windows, len(train)))["state"]
    np.testing.assert_array_equal(lab[:, :, 5], [[3, 3], [4, 4], [5, 5]])
