"""sim.positions: the object each evaluation episode starts from."""
import json

import pytest

from sim import positions


def test_positions_are_a_function_of_the_seed(tmp_path):
    a = positions.initial_positions("button-press", "0", 1000, 3)
    b = positions.initial_positions("button-press", "0", 1001, 2)
    assert [p["seed"] for p in a] == [1000, 1001, 1002]
    assert a[1:] == b                                   # same seed, same scene, from a fresh world
    assert a[0]["object"] != a[1]["object"]             # the seeds move the button


def test_cli_writes_what_eval_report_reads(tmp_path):
    out = tmp_path / "positions_button-press_0.json"
    positions.main(["--task", "Button-Press-v3", "--level", "0", "--seed", "1000", "--episodes", "2", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert doc["task"] == "button-press" and doc["level"] == "0"
    assert [e["seed"] for e in doc["episodes"]] == [1000, 1001]
    assert all(len(e["object"]) == 3 and len(e["scene"]) == 3 for e in doc["episodes"])


def test_cli_refuses_no_episodes(tmp_path):
    with pytest.raises(SystemExit, match="at least 1"):
        positions.main(["--episodes", "0", "--json", str(tmp_path / "x.json")])


def test_the_scene_moves_where_the_object_does_not():
    # assembly's object is fixed; the reset moves the peg, which the scene vector carries
    a = positions.initial_positions("assembly", "0", 1000, 2)
    assert a[0]["object"] == a[1]["object"]
    assert a[0]["scene"] != a[1]["scene"]
