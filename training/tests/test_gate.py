"""energyflow.rollout / energyflow.gate: chunk smoothness against the
demonstrations, the gate's verdicts, and its end-to-end run on a real
(tiny, random) bundle."""
import h5py
import numpy as np
import pytest
import torch

from energyflow.export import write_bundle
from energyflow.config import ModelConfig, TINY_SIZE
from energyflow.data import Demo
from energyflow.gate import GateLimits, demo_scenes, judge, run_gate
from energyflow.model import EnergyUNet
from energyflow.rollout import Planner, Smoothness, chunk_smoothness, grip_level, load_planner, smoothness

torch.set_num_threads(1)


def test_smoothness_of_known_windows():
    # two dims moving 0.1 and 0.3 per step (std 1 and 2 -> 0.1 and 0.15 std), a 0/0.6 gripper flipping twice
    t = np.arange(4, dtype=float)
    w = np.stack([0.1 * t, 0.3 * t, [0.6, 0.0, 0.1, 0.6]], axis=1)[None]
    s = smoothness(w, np.array([1.0, 2.0, 1.0]), grip_level=0.3)
    assert s.step_change == pytest.approx(0.125)
    assert s.gripper_flips == 2 and s.windows == 1
    # without a gripper every dimension counts and nothing flips
    s = smoothness(w[..., :2], np.array([1.0, 2.0]))
    assert s.step_change == pytest.approx(0.125) and s.gripper_flips == 0


@pytest.mark.parametrize("commands,want", [([0.0, 0.6], 0.3), ([-1.0, 0.6], -0.2), ([0.0, 0.0], None)])
def test_grip_level_is_the_middle_of_the_demos_commands(commands, want):
    demos = [Demo("d", np.array([[0, 0, 0, c] for c in commands], np.float32), {})]
    got = grip_level(demos)
    assert got == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("policy,demos,success,failed", [
    (Smoothness(0.10, 0.0, 8), Smoothness(0.07, 0.0, 8), 1.0, []),
    (Smoothness(0.77, 0.0, 8), Smoothness(0.07, 0.0, 8), 1.0, ["step change"]),
    (Smoothness(0.03, 0.0, 8), Smoothness(0.01, 0.0, 8), 1.0, []),          # within the absolute slack
    (Smoothness(0.10, 0.36, 8), Smoothness(0.07, 0.0, 8), 1.0, ["gripper flips"]),
    (Smoothness(0.10, 0.0, 8), Smoothness(0.07, 0.0, 8), 0.85, ["training scenes"]),
    (Smoothness(0.10, 0.0, 8), Smoothness(0.07, 0.0, 8), None, []),          # rollouts skipped
])
def test_judge(policy, demos, success, failed):
    got = judge(policy, demos, success, GateLimits())
    assert [f.split(" ")[0] + " " + f.split(" ")[1] for f in got] == failed


def _demos(n=3, L=30):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        s = np.cumsum(rng.normal(size=(L, 4)), axis=0).astype(np.float32)
        a = np.stack([np.sin(np.arange(L) / 5 + i), np.where(np.arange(L) < L // 2, -1.0, 1.0)], 1).astype(np.float32)
        out.append(Demo(f"demo_{i}", a, {"state": s}))
    return out


def test_a_policy_that_replays_the_demos_is_as_smooth_as_they_are():
    demos = _demos()
    lookup = {demos[i].obs["state"][t].tobytes(): (i, t) for i in range(len(demos)) for t in range(30)}
    To, Ta = 2, 8

    def replay(cond, z):  # the demo's own chunk for the newest state in cond (a test double of a policy)
        out = np.zeros((len(cond), 16, 2), np.float32)
        for b, c in enumerate(cond):
            i, t = lookup[c[4:].astype(np.float32).tobytes()]
            out[b, To - 1:To - 1 + Ta] = demos[i].actions[t:t + Ta]
        return out
    pl = Planner({"obs_horizon": To, "action_horizon": Ta, "pred_horizon": 16, "action_dim": 2}, replay,
                 np.zeros(4, np.float32), np.ones(4, np.float32), np.ones(2, np.float32))
    sm = chunk_smoothness(pl, demos, n=40, seed=1)
    assert sm["policy"] == sm["demos"]
    assert sm["demos"].windows == 40 and sm["demos"].step_change > 0


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("g")
    torch.manual_seed(0)
    m = EnergyUNet(ModelConfig(action_dim=2, state_dim=4, **TINY_SIZE))
    write_bundle(d / "bundle", m, "gate-test", [0.0, 0.0], [1.0, 1.0], [0.0] * 4, [1.0] * 4)
    with h5py.File(d / "demos.hdf5", "w") as f:
        g = f.create_group("data")
        g.attrs["env"], g.attrs["level"] = "button-press", "0"
        for dm in _demos():
            x = g.create_group(dm.name)
            x.create_dataset("actions", data=dm.actions)
            x.create_dataset("obs/state", data=dm.obs["state"])
            x.attrs["num_samples"] = len(dm.actions)
            x.attrs["seed"] = 7 + int(dm.name.split("_")[1])
    return d


def test_gate_runs_on_a_real_bundle_and_reads_the_scenes(tiny):
    res = run_gate(tiny / "bundle", tiny / "demos.hdf5", episodes=0, windows=32)
    assert res.train_scenes is None
    assert res.policy["windows"] == res.demos["windows"] == 32
    # a random network's chunks are far rougher than the smooth demos: the gate says so
    assert not res.passed and "step change" in res.failures[0]
    assert demo_scenes(tiny / "demos.hdf5", 2) == [("button-press", "0", 7), ("button-press", "0", 8)]
    assert load_planner(tiny / "bundle").cond([np.ones(4)] * 2).shape == (1, 8)


def test_rollout_on_meta_world_records_seeds_and_steps(tmp_path):
    from energyflow.rollout import rollout, world_class

    torch.manual_seed(0)
    m = EnergyUNet(ModelConfig(action_dim=4, state_dim=39, **TINY_SIZE))
    write_bundle(tmp_path / "b", m, "mw", [0.0] * 4, [1.0] * 4, [0.0] * 39, [1.0] * 39)
    w = world_class()("button-press", camera_size=None)
    r = rollout(load_planner(tmp_path / "b", steps=2), w, seed=3, max_steps=10, policy_seed=11)
    assert (r["seed"], r["policy_seed"], r["steps"]) == (3, 11, 10)   # a random policy does not press the button
    assert r["success"] is False and r["success_step"] is None
