"""energyflow.takeovers: when the operator takes over, and where the takeovers land."""
import argparse
import json

import numpy as np
import pytest

from energyflow.data import Demo, load_rollouts

from energyflow.takeovers import Held, Stall, Takeover, parse_seeds, write_takeovers


def _hands(moves):
    """Hand positions from a list of per-step x displacements, starting at the origin."""
    x = np.concatenate([[0.0], np.cumsum(moves)])
    return [np.array([v, 0.0, 0.0]) for v in x]


@pytest.mark.parametrize("moves,due", [
    ([0.0] * 9, False),                 # still, but fewer steps than the window
    ([0.0] * 10, True),                 # still for the whole window
    ([0.002] * 10, False),              # 2 cm over the window: moving
    ([0.0005] * 10, True),              # 5 mm over the window: under 1 cm
    ([0.05] + [0.0] * 9, False),        # the window still holds the 5 cm move
    ([0.0015] * 29, False),             # moving 1.5 mm a step never stalls (1.5 cm per window)
    ([0.0015] * 30, True),              # moving, but the latest step reached
])
def test_stall_due(moves, due):
    stall = Stall(steps=10, metres=0.01, latest=30)
    assert stall.due(_hands(moves)) is due


@pytest.mark.parametrize("kw", [dict(steps=0), dict(metres=0.0), dict(metres=float("nan")), dict(latest=0)])
def test_stall_refuses_bad_rules(kw):
    with pytest.raises(ValueError, match="stall rule"):
        Stall(**kw)


def _track(zs, target_z):
    """Hands at heights zs (x = y = 0) and their targets at target_z (one per step, or a constant)."""
    tz = target_z if isinstance(target_z, list) else [target_z] * len(zs)
    return [np.array([0.0, 0.0, z]) for z in zs], [np.array([0.0, 0.0, z]) for z in tz]


@pytest.mark.parametrize("zs,target_z,due", [
    ([0.105] * 6, 0.070, True),                               # stands 3.5 cm above its target: a claw on the wall
    ([0.105] * 5, 0.070, False),                              # not yet for the whole window
    ([0.071] * 6, 0.070, False),                              # stands at its target: a grasp at the floor
    ([0.20 - 0.008 * i for i in range(6)], [0.17 - 0.01 * i for i in range(6)], False),  # free motion, trailing 3 cm
    ([0.105] * 5 + [0.090], 0.070, False),                    # moved 1.5 cm in the window: let go
    ([0.105] * 6, [0.070] * 3 + [0.085] * 3, False),          # still, but the gap closed to 2 cm
])
def test_held_due(zs, target_z, due):
    hands, targets = _track(zs, target_z)
    assert Held(steps=5, metres=0.01, gap=0.025).due(hands, targets) is due


@pytest.mark.parametrize("kw", [dict(steps=0), dict(metres=0.0), dict(gap=-0.01), dict(gap=float("nan"))])
def test_held_refuses_bad_rules(kw):
    with pytest.raises(ValueError, match="held rule"):
        Held(**kw)


def test_parse_seeds():
    assert parse_seeds("5:8") == range(5, 8)
    for bad in ("5", "8:5", "a:b"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_seeds(bad)


def test_takeovers_load_as_recorded_episodes(tmp_path):
    """What write_takeovers writes, energyflow train --rollouts reads back: the kept takeovers only."""
    def demo(n, v):
        s = np.full((n, 6), v, np.float32)
        return Demo("takeover", np.full((n, 2), v, np.float32), {"state": s, "proprio": s[:, :4].copy()})

    got = [Takeover(7, True, None, False, None), Takeover(8, False, 40, True, demo(3, 2.0)),
           Takeover(9, False, 60, False, None), Takeover(10, False, 50, True, demo(5, 1.0))]
    write_takeovers(tmp_path / "tk", "bin-picking", got, {"takeovers": 3})
    demos, counts = load_rollouts([tmp_path / "tk"], ["state"])
    assert counts["successes"] == 2 and counts["episodes"] == 2
    assert [d.length for d in demos] == [3, 5]
    np.testing.assert_array_equal(demos[1].actions, got[3].demo.actions)
    s = json.loads((tmp_path / "tk" / "summary.json").read_text())
    assert s["takeovers"] == 3
    assert [r["takeover_step"] for r in s["results"]] == [40, 50]


def test_command_line_refuses_min_late_above_max_late(capsys):
    """``--min-late`` past ``--max-late`` is refused in one line before anything loads."""
    from energyflow.takeovers import main

    with pytest.raises(SystemExit) as e:
        main(["--bundle", "no-such-bundle", "--seeds", "0:1", "--out", "x", "--max-late", "1", "--min-late", "2"])
    assert e.value.code == 2
    assert "--min-late must be 0..--max-late (1), got 2" in capsys.readouterr().err
