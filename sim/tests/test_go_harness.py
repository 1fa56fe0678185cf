"""What the Go harness (sim/harness: `energyflow sim`, `sim eval`) relies on from the bridge."""

import logging
import re

import pytest

from sim import ood
from sim.bridge import F_HEARTBEAT, Bridge
from sim.client import REPO
from sim.regmap import load_map
from sim.world import FAULTS, TASKS, World

GO_SIM = REPO / "sim" / "harness" / "flags.go"
FC_WRITE = 16


@pytest.mark.parametrize("const, want", [
    ("simTasks", list(TASKS)),
    ("simLevels", list(ood.LEVELS)),
    ("simFaults", list(FAULTS)),
])
def test_go_vocabulary_matches_the_bridge(const, want):
    # The Go side refuses a bad --task/--level/--fault before starting the bridge,
    # from its own copy of these lists: the copy must stay equal to the bridge's.
    m = re.search(rf'^\s*{const}\s*=\s*"([^"]*)"', GO_SIM.read_text(), re.MULTILINE)
    assert m, f"{GO_SIM} defines no {const} string constant (moved? update this test)"
    assert m.group(1).split() == want, f"{const} in {GO_SIM.name} differs from the bridge's list"


@pytest.fixture()
def core():
    m = load_map(REPO / "examples" / "maps" / "metaworld.yaml")
    w = World("button-press", camera_size=None, max_steps=30)
    w.reset(seed=3)
    b = Bridge(w, m, lockstep=True, heartbeat_timeout=0.5)
    b._publish_obs()
    yield b, m
    w.close()


@pytest.mark.parametrize("enable_at_end, level", [
    (1, logging.WARNING),  # the controller went quiet with the arm enabled: a fault
    (0, logging.INFO),  # it dropped enable first (the runtime's halt at episode end): on purpose
])
def test_heartbeat_lapse_is_a_warning_only_while_enabled(core, caplog, enable_at_end, level):
    b, m = core
    en = m.signal("enable").address
    hb = m.signal("heartbeat")
    assert b.write(FC_WRITE, en, [1]) is None
    assert b.write(FC_WRITE, hb.address, m.encode(hb, [1])) is None  # a command arms the watchdog
    assert b.write(FC_WRITE, hb.address, m.encode(hb, [2]) + [enable_at_end]) is None  # last command (+ enable)
    t = b._last_hb_time
    with caplog.at_level(logging.INFO, logger="sim.bridge"):
        assert not b.check_heartbeat(t + 0.4)
        assert b.check_heartbeat(t + 0.6)
    lapses = [r for r in caplog.records if "heartbeat lapsed" in r.getMessage()]
    assert [r.levelno for r in lapses] == [level]
    assert b.fault & F_HEARTBEAT and b.hb_lapses == 1 and not b.enabled  # same effect either way
