import math

import pytest

from sim.regmap import MapError, decode_raw, encode_raw, load_map, parse_duration, parse_map
from sim.client import REPO

MAP = REPO / "examples" / "maps" / "metaworld.yaml"


def test_metaworld_map_parses_with_documented_layout():
    m = load_map(MAP)
    assert m.unit_id == 1 and m.word_order == "high_first"
    assert m.heartbeat_timeout == pytest.approx(1.0)
    want = {
        "velocity_command": ("holding", 0, "float32", 3),
        "gripper_command": ("holding", 6, "float32", 1),
        "heartbeat": ("holding", 8, "uint16", 1),
        "enable": ("holding", 9, "uint16", 1),
        "position": ("input", 0, "float32", 3),
        "gripper_state": ("input", 6, "float32", 1),
        "status": ("input", 8, "uint16", 1),
        "enabled_state": ("input", 8, "uint16", 1),
        "fault": ("input", 9, "uint16", 1),
        "observation": ("input", 10, "float32", 39),
    }
    assert set(m.signals) == set(want)
    for name, (fn, addr, typ, count) in want.items():
        s = m.signal(name)
        assert (s.function, s.address, s.type, s.count) == (fn, addr, typ, count), name
    assert m.signal("enabled_state").bit == 3
    assert m.decode(m.signal("enabled_state"), [0x0008 | 0x0001]) == [1.0]
    v = m.signal("velocity_command")
    assert (v.min, v.max) == (-1, 1)
    assert m.span("holding") == (0, 10)
    assert m.span("input") == (0, 10 + 78)


def test_encode_decode_roundtrip_both_word_orders():
    for order in ("high_first", "low_first"):
        for x in (0.0, 1.5, -0.25, 3.0e-7):
            w = encode_raw("float32", x, order)
            assert decode_raw("float32", w, order) == pytest.approx(x, rel=1e-7)
        assert decode_raw("int32", encode_raw("int32", -5, order), order) == -5
    assert encode_raw("float32", 1.0, "high_first") == [0x3F80, 0x0000]
    assert encode_raw("float32", 1.0, "low_first") == [0x0000, 0x3F80]
    m = load_map(MAP)
    s = m.signal("velocity_command")
    assert m.decode(s, m.encode(s, [0.5, -1.0, 0.25])) == [0.5, -1.0, 0.25]


def test_durations():
    assert parse_duration("500ms") == pytest.approx(0.5)
    assert parse_duration("1m30s") == pytest.approx(90)
    assert parse_duration("250us") == pytest.approx(250e-6)
    for bad in ("", "5", "1x", 5):
        with pytest.raises(MapError):
            parse_duration(bad)


def _base():
    return {"format": 1, "heartbeat_timeout": "500ms", "signals": {
        "velocity_command": {"function": "holding", "address": 0, "type": "float32", "count": 3},
        "enable": {"function": "holding", "address": 6, "type": "uint16"},
        "heartbeat": {"function": "holding", "address": 7, "type": "uint16"},
        "status": {"function": "input", "address": 0, "type": "uint16"},
        "fault": {"function": "input", "address": 1, "type": "uint16"},
    }}


def test_invalid_maps_rejected():
    parse_map(_base())
    d = _base(); del d["signals"]["heartbeat"]
    with pytest.raises(MapError, match="heartbeat"):
        parse_map(d)
    d = _base(); d["signals"]["enable"]["address"] = 5  # overlaps velocity_command[2]
    with pytest.raises(MapError, match="overlaps"):
        parse_map(d)
    d = _base(); d["format"] = 2
    with pytest.raises(MapError):
        parse_map(d)
    d = _base(); d["signals"]["status"]["max"] = 70000  # not representable as uint16
    with pytest.raises(MapError, match="representable"):
        parse_map(d)
    d = _base(); d["word_order"] = "middle"
    with pytest.raises(MapError):
        parse_map(d)
    assert not math.isnan(parse_map(_base()).heartbeat_timeout)
