"""The bridge's register logic in-process (no sockets): fast checks of the semantics."""

import argparse
import io
import json
import math

import numpy as np
import pytest

from sim.bridge import F_BAD_COMMAND, F_HEARTBEAT, ST_ENABLED, ST_READY, ST_SUCCESS, ST_TRUNCATED, Bridge, camera_size_arg, parse_size
from sim.client import REPO
from sim.regmap import load_map
from sim.world import World, expert_policy

FC_WRITE, FC_READ_IN, FC_READ_HOLD = 16, 4, 3


@pytest.fixture()
def core():
    m = load_map(REPO / "examples" / "maps" / "metaworld.yaml")
    w = World("button-press", camera_size=None, max_steps=30)
    w.reset(seed=3)
    b = Bridge(w, m, lockstep=True, auto_reset=False)
    b._publish_obs()
    yield b, m
    w.close()


def _cmd(b, m, action, hb):
    regs = []
    for name, vals in (("velocity_command", action[:3]), ("gripper_command", action[3:4]), ("heartbeat", [hb])):
        regs += m.encode(m.signal(name), list(vals))
    assert b.write(FC_WRITE, 0, regs) is None


def _status(b, m):
    return b.read(FC_READ_IN, m.signal("status").address, 2)


def test_truncation_ignores_commands_and_reset_clears(core):
    b, m = core
    assert b.write(FC_WRITE, m.signal("enable").address, [1]) is None
    for hb in range(1, 36):
        _cmd(b, m, [0.0, 0.0, 0.1, 0.0], hb)
    st, fault = _status(b, m)
    assert b.world.step_count == 30 and st & ST_TRUNCATED and not st & ST_READY
    assert b.ignored_commands == 5
    b.reset(seed=4)
    st, _ = _status(b, m)
    assert st & ST_READY and not st & ST_TRUNCATED and b.world.step_count == 0


def test_non_finite_command_is_zero_and_flagged(core):
    b, m = core
    b.write(FC_WRITE, m.signal("enable").address, [1])
    p0 = b.world.obs[:3].copy()
    _cmd(b, m, [math.nan, 0.0, 0.0, 0.0], 1)
    assert _status(b, m)[1] & F_BAD_COMMAND
    assert np.abs(b.world.obs[:3] - p0).max() < 2e-3
    _cmd(b, m, [0.0, 0.0, 0.0, 0.0], 2)
    assert _status(b, m)[1] == 0


def test_enable_refused_while_faulted_and_illegal_addresses(core):
    b, m = core
    b.fault |= F_HEARTBEAT
    b.write(FC_WRITE, m.signal("enable").address, [1])
    assert b.read(FC_READ_HOLD, m.signal("enable").address, 1) == [0]
    assert not _status(b, m)[0] & ST_ENABLED
    _cmd(b, m, [0.0, 0.0, 0.0, 0.0], 1)  # fresh heartbeat clears the lapse
    assert _status(b, m)[1] == 0
    b.write(FC_WRITE, m.signal("enable").address, [1])
    assert _status(b, m)[0] & ST_ENABLED
    assert isinstance(b.read(FC_READ_IN, 0, 88), list)
    assert not isinstance(b.read(FC_READ_IN, 80, 20), list)  # past the last input register
    assert b.write(FC_WRITE, 9, [1, 1]) is not None  # past the last holding register


def test_auto_reset_after_success(core):
    b, m = core
    b.world.max_steps_override = None
    b.auto_reset = True
    b.auto_reset_hold = 3
    b.reset(seed=3)
    b.write(FC_WRITE, m.signal("enable").address, [1])
    pol = expert_policy("button-press")
    ep0 = b.world.episode
    hb = 0
    for _ in range(300):
        hb += 1
        obs = m.decode(m.signal("observation"), b.read(FC_READ_IN, 10, 78))
        _cmd(b, m, list(np.clip(pol.get_action(np.asarray(obs)), -1, 1)), hb)
        if b.world.episode != ep0:
            break
    assert b.world.episode == ep0 + 1 and b.world.seed == 4 and b.world.step_count == 0
    assert not _status(b, m)[0] & ST_SUCCESS


def test_reset_opens_the_held_gripper(core):
    """A new episode starts with the gripper as Meta-World's reset leaves it
    (open): the previous episode's last gripper command, held while enable
    is 0, must not squeeze it before the controller commands again. (It did:
    every runtime episode after the first of a grasping cell started with
    the gripper closing, 1/6 Assembly successes instead of 6/6.)"""
    b, m = core
    b.write(FC_WRITE, m.signal("enable").address, [1])
    for hb in range(1, 6):
        _cmd(b, m, [0.0, 0.0, 0.0, 1.0], hb)           # close the gripper
    b.write(FC_WRITE, m.signal("enable").address, [0])  # the controller halts at the episode's end
    b.reset(seed=4)
    g0 = b.world.obs[3]                                  # gripper opening right after the reset
    for hb in range(6, 11):                              # a new controller, not yet enabled
        _cmd(b, m, [0.0, 0.0, 0.0, 1.0], hb)
    assert b.world.step_count == 5
    assert b.world.obs[3] == pytest.approx(g0, abs=1e-3), "the gripper moved while disabled after a reset"


def test_trace_writes_a_line_per_step():
    """--trace: one JSON line per world step, with the action as applied (zero while disabled)
    and what only the simulator knows: hand, controller target, object, contacts."""
    m = load_map(REPO / "examples" / "maps" / "metaworld.yaml")
    w = World("button-press", camera_size=None, max_steps=30)
    w.reset(seed=3)
    out = io.StringIO()
    b = Bridge(w, m, lockstep=True, auto_reset=False, trace=out)
    b._publish_obs()
    try:
        _cmd(b, m, [1.0, 0.0, 0.0, 0.5], 1)                 # not enabled: the arm holds
        b.write(FC_WRITE, m.signal("enable").address, [1])
        for hb in range(2, 5):
            _cmd(b, m, [1.0, 0.0, 0.0, 0.5], hb)
    finally:
        w.close()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["episode_step"] for r in rows] == [1, 2, 3, 4] and {r["seed"] for r in rows} == {3}
    assert rows[0]["action"][:3] == [0.0, 0.0, 0.0] and rows[1]["action"][:3] == [1.0, 0.0, 0.0]
    for r in rows:
        assert len(r["hand"]) == len(r["target"]) == len(r["object"]) == 3
        assert all(isinstance(c, str) and "|" in c for c in r["contacts"])
    assert rows[-1]["target"][0] > rows[1]["target"][0]      # the commanded +x moved the target
    assert rows[-1]["object"] == pytest.approx(list(w.obs[4:7]), abs=1e-5)


@pytest.mark.parametrize("arg,want", [("96x96", (96, 96)), ("320X240", (320, 240)), (" 64x48", (64, 48))])
def test_parse_size(arg: str, want: tuple[int, int]) -> None:
    assert parse_size(arg) == want
    assert camera_size_arg(arg) == f"{want[0]}x{want[1]}"


@pytest.mark.parametrize("arg", ["96", "96x", "x96", "0x96", "96x-1", "axb", "96x96x3", ""])
def test_parse_size_refuses_in_one_line(arg: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="want WIDTHxHEIGHT") as e:
        parse_size(arg)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("view_size, made", [((160, 120), True), (None, False)])
def test_reset_makes_the_display_views_renderer(view_size: tuple[int, int] | None, made: bool) -> None:
    """A display view's renderer is made at reset, between episodes, not on the step after a
    viewer connects: its first render (most of a second on a slow 2-core host) held that step's
    Modbus reply back and the runtime's loop_late watchdog stopped the watched demo."""
    m = load_map(REPO / "examples" / "maps" / "metaworld.yaml")
    w = World("button-press", camera_size=(64, 48), max_steps=30)
    b = Bridge(w, m, lockstep=True, auto_reset=False, view_size=view_size)
    assert not w.has_renderer((160, 120))
    b.reset(seed=3)
    assert w.has_renderer((160, 120)) is made
    assert w.has_renderer((64, 48))                    # the policy's own frame, as before
    w.close()
