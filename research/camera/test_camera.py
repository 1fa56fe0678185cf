"""research.camera: the evaluation table and the probe's pieces."""
from __future__ import annotations

import json

import numpy as np

from research.camera import probe, table


def test_table_row_counts_the_far_half(tmp_path):
    res = [{"seed": s, "success": s != 1001, "end": "success"} for s in (1000, 1001, 1002, 1003)]
    summary = {"task": "button-press", "level": "0", "bundle": "bundles/x", "episodes": 4, "successes": 3,
               "trips": {"energy": 1}, "watch": ["state_energy"], "inference_p50_ms": 50.0,
               "inference_p90_ms": 80.0, "results": res}
    p = tmp_path / "cell.json"
    p.write_text(json.dumps(summary))
    dist = table.start_distances("button-press", "0", (1000, 1001, 1002, 1003))
    far = sorted(dist, key=dist.get)[2:]
    r = table.row(p)
    assert r["success"].startswith("3/4 = 75 %")
    assert r["far half"] == f"{sum(s != 1001 for s in far)}/2"
    assert r["stops"] == "energy 1"


def test_jpeg_round_trip_is_close_and_writable():
    img = np.zeros((32, 32, 3), np.uint8)
    img[8:24, 8:24] = (200, 40, 40)
    out = probe.jpeg(img)
    assert out.shape == img.shape and out.flags.writeable
    assert np.abs(out.astype(int) - img.astype(int)).mean() < 6


def test_critical_value_is_the_nth_largest_of_the_worst_window(tmp_path):
    from research.camera import critical
    assert critical.critical([1, 9, 1, 1, 1, 1, 8], n=2, m=5) == (1, 1)
    assert critical.critical([1, 9, 1, 8, 1, 1, 1], n=2, m=5) == (8, 3)
    lines = [{"state": "STOPPED", "seed": 7, "state_energy": 50.0}] + [
        {"state": "RUNNING", "seed": 7, "state_energy": x} for x in (1.0, 3.0, 2.0)]
    (tmp_path / "c_7.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    (tmp_path / "c_7.json").write_text(json.dumps({"inference_p50_ms": 80.0, "inference_p90_ms": 95.0}))
    (tmp_path / "c_9.jsonl").write_text(json.dumps({"state": "RUNNING", "seed": 9, "state_energy": 99.0}))  # unfinished
    assert critical.episodes([tmp_path]) == {7: [1.0, 3.0, 2.0]}
    assert critical.latency_range([tmp_path]) == {"p50": (80.0, 80.0), "p90": (95.0, 95.0)}
