"""``research/rollouts/hold_probe.py``: how a late plan is bridged, and the gate's statistic it reports."""
from pathlib import Path

import numpy as np
import pytest

from research.rollouts import hold_probe as hp

ROOT = Path(__file__).resolve().parents[2]

# a plan of T_p = 6 actions of width 4 (xyz velocity, gripper): action i reads i everywhere
PLAN = np.repeat(np.arange(6, dtype=np.float32)[:, None], 4, axis=1)


@pytest.mark.parametrize("how,late,want", [
    ("on time", 2, []),
    ("hold", 2, [[0, 0, 0, 3], [0, 0, 0, 3]]),     # zero velocity, the window's last gripper (index 1+3-1)
    ("tail", 1, [[4, 4, 4, 4]]),                     # the first action past the window 1..3
    ("tail", 3, [[4, 4, 4, 4], [5, 5, 5, 5], [5, 5, 5, 5]]),  # the tail runs out: its last repeated
    ("hold", 0, []),
])
def test_bridge_actions(how, late, want):
    got = hp.bridge_actions(PLAN, start=1, ta=3, late=late, how=how)
    assert [list(a) for a in got] == want


def test_bridge_actions_unknown():
    with pytest.raises(ValueError, match="unknown bridge"):
        hp.bridge_actions(PLAN, 1, 3, 1, "wait")


@pytest.mark.parametrize("x,want", [
    ([1, 9, 1, 1, 1, 1, 1], 1.0),       # one tick alone does not count
    ([1, 9, 1, 8, 1, 1, 1], 8.0),       # two within five: the smaller of them
    ([9, 1, 1, 1, 1, 8], 1.0),          # six apart: never two in one window
    ([3, 5], 3.0),                      # shorter than a window
])
def test_two_of_five(x, want):
    assert hp.two_of_five(np.asarray(x, float)) == want


def test_episode_bridges_only_after_the_late_plan():
    """On Meta-World with the shipped Assembly policy: the same scene and noise read the same
    until the late plan is due, and the held arm reads differently after it."""
    from energyflow.rollout import load_planner
    from sim.world import World

    planner = load_planner(ROOT / "bundles" / "metaworld-assembly")
    world = World("assembly", camera_size=None)
    hand = lambda hist: {"hand_x": float(hist[-1][0])}  # noqa: E731
    on = hp.episode(planner, world, hand, 53000, 10, 2, "on time", 24)
    held = hp.episode(planner, world, hand, 53000, 10, 2, "hold", 24)
    assert on["due"] == held["due"] == 16      # T_a = 8: plans at steps 0, 8, 16
    d = on["due"]
    assert np.array_equal(on["reads"]["hand_x"][:d], held["reads"]["hand_x"][:d])
    assert not np.allclose(on["reads"]["hand_x"][d:d + 2], held["reads"]["hand_x"][d:d + 2])
    assert len(held["reads"]["hand_x"]) == 24
