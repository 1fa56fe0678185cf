"""The traced runs cut their lines as the README's jq cut does, the scripted expert runs through them
on the real simulator, and the table reads their summaries."""
import gzip
import json

import pytest

from research.interventions.trace_stands import run, table, table_row, trace_line

PHYSICS = {"hand": [0.0123456, 0.7, 0.1], "target": [0.0, 0.7, 0.07], "object": [-0.04, 0.66, 0.02],
           "contacts": ["leftclaw_it|binA", "objA|binA", "rightpad_geom|objA"]}


@pytest.mark.parametrize("name, step, has_object", [
    ("the reset keeps the object", 0, True),
    ("the first step keeps the object", 1, True),
    ("later steps drop it", 2, False),
])
def test_trace_line(name, step, has_object):
    r = trace_line(7, step, PHYSICS)
    assert ("object" in r) == has_object, name
    assert r["contacts"] == ["leftclaw_it|binA", "rightpad_geom|objA"], name
    assert r["hand"][0] == 0.01235 and r["seed"] == 7 and r["episode_step"] == step, name


def test_expert_run_traces_every_step(tmp_path):
    out = tmp_path / "t.jsonl.gz"
    res, horizon = run("bin-picking", range(4, 6), out)
    assert horizon is None   # the expert has no plans
    assert [r["seed"] for r in res] == [4, 5]
    assert all(r["success"] for r in res)
    lines = [json.loads(x) for x in gzip.open(out, "rt")]
    assert len(lines) == sum(r["steps"] + 1 for r in res)   # the reset and every step
    assert res[0]["object"] == [round(lines[0]["object"][0], 4), round(lines[0]["object"][1], 4)]


def test_table(tmp_path):
    s = {"who": "bundles/metaworld-bin-picking", "max_late": 1, "action_horizon": 4, "results": [
        {"seed": 0, "success": True, "stand": 0, "bin_contact_steps": 2},
        {"seed": 1, "success": False, "stand": 12, "bin_contact_steps": 40}]}
    assert table_row(s) == "| metaworld-bin-picking | 4 | 0–1 | 0–1 | 1/2 [9–91 %] | 1 | 2 |"
    assert table_row(dict(s, who="expert")).startswith("| scripted expert | – | – |")
    p = tmp_path / "s.json.gz"
    with gzip.open(p, "wt") as f:
        json.dump(s, f)
    assert table([p]).splitlines()[2] == table_row(s)
