"""research.delay.forward_labels on the real simulator and the shipped BinPicking bundle."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from research.delay.forward_labels import forward_expert, main, restore, scene, snapshot

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


@pytest.mark.parametrize("late", [True, False], ids=["late-network", "late-off"])
def test_labels_leave_the_drive_as_the_rollout_drives(world, expert, late) -> None:
    from energyflow.rollout import load_planner, rollout

    planner = load_planner(BUNDLE, threads=1, late=late)
    assert (planner.late is not None) == late  # the shipped bundle carries a late network
    calls = {"main": 0, "late": 0}
    plan, late_plan_ = planner.plan, planner.late

    def counted(name, f):
        def g(cond, z):
            calls[name] += 1
            return f(cond, z)
        return g

    planner.plan = counted("main", plan)
    if late:
        planner.late = counted("late", late_plan_)
    done = []
    step = world.step

    def recording_step(a):
        done.append(np.asarray(a, np.float32).copy())
        return step(a)

    world.step = recording_step
    try:
        states, chunks, delays, row = scene(planner, world, expert, 1000, 3, 5, max_steps=60)
        labelled_drive, labelled_calls = list(done), dict(calls)
        done.clear()
        calls.update(main=0, late=0)
        plain = rollout(planner, world, 1000, max_steps=60, min_late=3, max_late=5)
    finally:
        del world.step
    assert (row["steps"], row["success"]) == (plain["steps"], plain["success"])
    np.testing.assert_array_equal(np.stack(labelled_drive), np.stack(done))  # the same actions, step for step
    assert labelled_calls == calls
    assert (calls["late"] > 0) == late and calls["main"] >= 1  # the first plan is the main network's
    assert row["labels"] == len(states) == len(chunks) == len(delays) > 0
    assert set(delays) <= {3, 4, 5}
    assert np.stack(states).shape[1:] == (2, 39) and np.stack(chunks).shape[1:] == (16, 4)
    assert np.abs(np.stack(chunks)).max() <= 1


def test_the_label_is_the_last_action_then_the_committed_ones_then_the_expert(world, expert) -> None:
    from energyflow.rollout import load_planner

    planner = load_planner(BUNDLE, threads=1)
    done, plans_at = [], []
    step, plan = world.step, planner.plan_at

    def recording_step(a):
        done.append(np.clip(np.asarray(a, np.float32), -1, 1))
        return step(a)

    def recording_plan(cond, z, periods):
        plans_at.append(len(done))
        return plan(cond, z, periods)

    world.step, planner.plan_at = recording_step, recording_plan
    try:
        states, chunks, delays, row = scene(planner, world, expert, 1001, 3, 3, max_steps=60)
    finally:
        del world.step
    labelled = [t for t in plans_at if t > 0][:len(chunks)]  # every plan after the first runs a label
    assert len(labelled) == len(chunks) >= 5
    assert delays == [3] * len(chunks)
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
