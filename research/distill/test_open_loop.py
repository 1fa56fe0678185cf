"""research.distill.open_loop: a plan that is the demonstration scores zero, an offset scores its square."""
import numpy as np
import pytest

from energyflow.data import Demo
from energyflow.rollout import Planner

from research.distill.open_loop import chunk_errors

TO, TA, TP, DS = 2, 4, 8, 3


def _planner(demo: Demo, offset: np.ndarray) -> Planner:
    """A planner whose plan is the demonstration's actions from the window's step (read back from the
    state's first entry, which holds the step index), plus ``offset``."""
    def plan(cond: np.ndarray, z: np.ndarray) -> np.ndarray:
        out = np.zeros((len(cond), TP, 2), np.float32)
        for b, c in enumerate(cond):
            t = int(round(c[DS]))                   # the newest frame's step
            for k in range(TP):
                out[b, k] = demo.actions[min(len(demo.actions) - 1, max(0, t - (TO - 1) + k))] + offset
        return out
    man = {"obs_horizon": TO, "action_horizon": TA, "pred_horizon": TP, "action_dim": 2}
    return Planner(man, plan, np.zeros(DS, np.float32), np.ones(DS, np.float32), np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("offset,want_xyz,want_grip", [((0.0, 0.0), 0.0, 0.0), ((0.5, 0.0), 0.25, 0.0),
                                                        ((0.0, 1.0), 0.0, 0.25)])
def test_chunk_errors(offset, want_xyz, want_grip):
    L = 20
    state = np.zeros((L, DS), np.float32)
    state[:, 0] = np.arange(L)
    actions = np.stack([np.sin(np.arange(L) / 3.0), np.cos(np.arange(L) / 5.0)], 1).astype(np.float32)
    demo = Demo("demo_0", actions, {"state": state})
    got = chunk_errors({"p": _planner(demo, np.asarray(offset, np.float32))}, demo, every=3,
                       rng=np.random.default_rng(0))
    assert got["p"]["xyz"] == pytest.approx(want_xyz, abs=1e-6)
    assert got["p"]["grip"] == pytest.approx(want_grip, abs=1e-6)
