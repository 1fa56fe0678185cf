"""The runtime's lateness as ``energyflow.rollout`` imitates it (``late_plan``, used by
``research/ood/rnd_rollouts.py``), and the Wilson interval its command line prints."""
import numpy as np
import pytest

from energyflow.rollout import late_plan, wilson


def chunk(base: int, n: int = 16) -> np.ndarray:
    """A plan whose action i is the 1-vector [base + i]."""
    return np.arange(base, base + n, dtype=np.float64)[:, None]


@pytest.mark.parametrize("pending, d, want_run, want_pending", [
    # on time: the chunk from T_o - 1 for T_a steps, the rest kept
    ([], 0, [101, 102, 103, 104], list(range(105, 116))),
    # 2 late at the start (nothing to run meanwhile): the first 2 actions are skipped
    ([], 2, [103, 104], list(range(105, 116))),
    # 2 late: the previous chunk's next 2 run, then the new one 2 steps in
    ([[50], [51], [52]], 2, [50, 51, 103, 104], list(range(105, 116))),
    # 3 late with 1 pending: it is held for the 3 steps
    ([[50]], 3, [50, 50, 50, 104], list(range(105, 116))),
    # 5 late, past T_a: 5 pending run, none of the new chunk; the next plan (5 steps on) takes it from 5 in
    ([[50], [51], [52], [53], [54], [55]], 5, [50, 51, 52, 53, 54], list(range(106, 116))),
])
def test_late_plan(pending, d, want_run, want_pending) -> None:
    run, rest = late_plan(chunk(100), [np.array(p, np.float64) for p in pending], To=2, Ta=4, d=d)
    assert [float(a[0]) for a in run] == want_run
    assert [float(a[0]) for a in rest] == want_pending


@pytest.mark.parametrize("k,n,lo,hi", [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (0, 0, 0.0, 1.0)])
def test_wilson_matches_the_textbook_values(k, n, lo, hi):
    a, b = wilson(k, n)
    assert a == pytest.approx(lo, abs=1e-3) and b == pytest.approx(hi, abs=1e-3)


def test_command_line_refuses_negative_lateness(capsys) -> None:
    """``--max-late`` below 0 is refused in one line before anything loads."""
    from energyflow.rollout import main

    with pytest.raises(SystemExit) as e:
        main(["no-such-bundle", "--task", "bin-picking", "--max-late", "-1"])
    assert e.value.code == 2
    assert "--max-late must be 0 or more, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--max-late", "2", "--min-late", "3"], "--min-late must be 0..--max-late (2), got 3"),
    (["--max-late", "2", "--min-late", "-1"], "--min-late must be 0..--max-late (2), got -1"),
])
def test_command_line_refuses_min_late_out_of_range(args, message, capsys) -> None:
    from energyflow.rollout import main

    with pytest.raises(SystemExit) as e:
        main(["no-such-bundle", "--task", "bin-picking"] + args)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


class _World:
    """A one-value world that records the actions it was given and succeeds after ``n`` steps."""

    def __init__(self, n: int) -> None:
        self.n, self.acts, self.success, self.success_step = n, [], False, None

    def reset(self, level: str, seed: int) -> np.ndarray:
        self.acts, self.success = [], False
        return np.zeros(1, np.float32)

    def step(self, act: np.ndarray):
        self.acts.append(float(act[0]))
        self.success = len(self.acts) >= self.n
        return type("Step", (), {"obs": np.zeros(1, np.float32)})()


@pytest.mark.parametrize("min_late, max_late, late_from, first_late", [
    (3, 5, 2, False),   # plans 3-5 late: every plan after the first on the late network
    (0, 1, 2, None),    # plans 0-1 late: never
    (0, 0, 1, True),    # from 1 period: always, the first plan too (the runtime's latency counts at least 1)
])
def test_rollout_plans_on_the_late_network_when_the_plan_before_was_late(min_late, max_late, late_from, first_late) -> None:
    """The main network plans 0s, the late one 1s: which ran shows in the actions executed."""
    from energyflow.rollout import Planner, rollout

    man = {"obs_horizon": 2, "action_horizon": 4, "pred_horizon": 16, "action_dim": 1}
    planner = Planner(man, lambda c, z: np.zeros((1, 16, 1)), np.zeros(1, np.float32), np.ones(1, np.float32),
                      np.ones(1, np.float32), late=lambda c, z: np.ones((1, 16, 1)), late_from=late_from)
    world = _World(40)
    rollout(planner, world, seed=0, max_late=max_late, min_late=min_late)
    if first_late is None:
        assert set(world.acts) == {0.0}
        return
    assert world.acts[0] == float(first_late)  # the first plan: no latency measured yet, 1 period
    assert world.acts[-1] == 1.0 and set(world.acts) == ({1.0} if first_late else {0.0, 1.0})
    plain = Planner(man, planner.plan, planner.state_mean, planner.state_std, planner.action_std)
    rollout(plain, world, seed=0, max_late=max_late, min_late=min_late)
    assert set(world.acts) == {0.0}  # no late network: the main one throughout


def test_load_planner_takes_the_shipped_late_network_unless_told_not_to() -> None:
    """bundles/metaworld-bin-picking carries a late network from 2 periods; --late-off leaves it out."""
    from pathlib import Path

    from energyflow.rollout import load_planner

    bundle = Path(__file__).resolve().parents[2] / "bundles" / "metaworld-bin-picking"
    with_late = load_planner(bundle)
    assert with_late.late is not None and with_late.late_from == 2
    assert load_planner(bundle, late=False).late is None
