"""research.delay.expert_delay on the real simulator: the expert sees the observation d steps old."""
from __future__ import annotations

import numpy as np
import pytest

from research.delay.expert_delay import episode


@pytest.fixture(scope="module")
def world():
    from sim.world import World

    return World("bin-picking", camera_size=None)


@pytest.mark.parametrize("late", [0, 3])
def test_each_action_comes_from_the_observation_late_steps_old(world, late: int) -> None:
    from sim.world import expert_policy

    expert = expert_policy("bin-picking").get_action
    seen, obs = [], []
    step = world.step

    def recording_step(a):
        r = step(a)
        obs.append(r.obs.copy())
        return r

    def recording_expert(o):
        seen.append(o.copy())
        return expert(o)

    world.step = recording_step
    try:
        r = episode(world, recording_expert, seed=1000, late=late, max_steps=12)
    finally:
        del world.step
    first = world.reset(level="0", seed=1000)
    history = [first] * (late + 1) + obs  # history[t + late] is the observation after t steps
    assert r["steps"] == 12 and len(seen) == 12
    for t, o in enumerate(seen):
        np.testing.assert_array_equal(o, history[t].astype(np.float64))


def test_fresh_expert_succeeds(world) -> None:
    from sim.world import expert_policy

    r = episode(world, expert_policy("bin-picking").get_action, seed=1000, late=0)
    assert r["success"] and r["steps"] < 500
