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
    (tmp_path / "c_7.json").write_text(json.dumps({"inference_p50_ms": 80.0, "inference_p90_ms": 95.0,
                                                "episodes": 2, "successes": 1}))
    (tmp_path / "c_9.jsonl").write_text(json.dumps({"state": "RUNNING", "seed": 9, "state_energy": 99.0}))  # unfinished
    assert critical.episodes([tmp_path]) == {7: [1.0, 3.0, 2.0]}
    assert critical.latency_range([tmp_path]) == {"p50": (80.0, 80.0), "p90": (95.0, 95.0)}
    assert critical.successes([tmp_path]) == (2, 1)
    demo = tmp_path / "demo"  # the demo's --scores: a summary without latency, a watch summary beside it
    demo.mkdir()
    (demo / "scores.jsonl").write_text(json.dumps({"state": "RUNNING", "seed": 5000, "state_energy": 4.0}))
    (demo / "scores.json").write_text(json.dumps({"inference_p50_ms": None, "inference_p90_ms": None}))
    (demo / "summary.json").write_text(json.dumps({"minutes": 60}))
    assert critical.episodes([demo]) == {5000: [4.0]}
    assert critical.latency_range([demo]) is None
    assert critical.successes([demo]) == (0, 0)


def test_unseen_two_frame_count_stays_within_episodes():
    from research.camera.unseen import table as unseen

    u = np.zeros(2 * unseen.STEPS, int)
    u[5], u[6] = 9, 3  # two frames running: the stop's count is the smaller
    u[unseen.STEPS - 1], u[unseen.STEPS] = 8, 8  # the last of one episode, the first of the next
    t = unseen.two(u)
    assert t.shape == (2, unseen.STEPS - 1)
    assert t[0, 5] == 3 and t[0, 4] == 0 and t[0, 6] == 0
    assert t.max() == 3  # no pair across the two episodes


def test_unseen_driving_reads_running_ticks_of_finished_chunks(tmp_path):
    from research.camera.unseen import driving

    rows = [{"seed": 1, "state": "STOPPED", "camera_unseen": 9}, {"seed": 1, "state": "RUNNING", "camera_unseen": 2},
            {"seed": 2, "state": "RUNNING", "camera_unseen": 5}, {"seed": 2, "state": "RUNNING"}]
    (tmp_path / "c_1.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "c_1.json").write_text("{}")
    (tmp_path / "c_9.jsonl").write_text(json.dumps({"seed": 9, "state": "RUNNING", "camera_unseen": 50}) + "\n")  # unfinished
    per, ticks = driving.largest_per_episode([tmp_path])
    assert per == {1: 2, 2: 5} and ticks == {2: 1, 5: 1}


def _camera_bundle(root, name: str, vision: bytes, outputs=((-1, 3),)):
    from energyflow.bundle import file_hashes

    b = root / name
    b.mkdir()
    (b / "vision.onnx").write_bytes(vision)
    (b / "policy.onnx").write_bytes(b"policy " + name.encode())
    m = {"graphs": {"vision": {"file": "vision.onnx", "inputs": [{"name": "image", "shape": [-1, 3, 96, 96]}],
                               "outputs": [{"name": "features", "shape": list(o)} for o in outputs]}},
         "localiser": {"label": "success", "held_out": {"first_frames": {"mean_cm": len(name)}}}}
    m["files"] = file_hashes(b)
    (b / "manifest.json").write_text(json.dumps(m))
    return b


def test_swap_localiser_moves_the_graph_and_its_record(tmp_path):
    import pytest

    from energyflow.bundle import file_hashes
    from research.camera.swap_localiser import SwapError, swap

    a = _camera_bundle(tmp_path, "a", b"vision a")
    b = _camera_bundle(tmp_path, "bb", b"vision b")
    m = swap(a, b, tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "vision.onnx").read_bytes() == b"vision b"
    assert (out / "policy.onnx").read_bytes() == b"policy a"
    assert m["localiser"]["held_out"]["first_frames"]["mean_cm"] == 2 and m["localiser"]["swapped_from"] == str(b)
    assert m["files"] == file_hashes(out)
    wide = _camera_bundle(tmp_path, "wide", b"vision w", outputs=((-1, 6),))
    with pytest.raises(SwapError, match="differ in inputs or outputs"):
        swap(a, wide, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


def test_visible_counts_the_box_and_refuses_other_scenes():
    import pytest

    from research.camera.unseen import visible

    base = np.zeros((2, visible.STEPS, 8, 8, 3), np.int16)
    box = base.copy()
    box[0, visible.ONSET:, 2:4, 2:5, 2] = 200       # 6 pixels from the onset in episode 0
    box[1, visible.ONSET + 5, 0, 0, 0] = 30          # under the threshold: not a change
    n = visible.changed(box, base)
    assert n[0, visible.ONSET:].min() == 6 and n[0, :visible.ONSET].max() == 0
    assert n[1].max() == 0
    other = base.copy()
    other[1, 3, 0, 0, 1] = 255                      # a different scene before the onset
    with pytest.raises(SystemExit, match="before the onset"):
        visible.changed(other, base)


def test_watch_hours_counts_the_watch_cameras_reading(tmp_path, capsys):
    import json

    from research.camera import watch_hours as W

    lane = tmp_path / "lane-a"
    lane.mkdir()
    results = [{"stop_kind": "camera_unseen"}, {}]
    (lane / "hammer_100.json").write_text(json.dumps({"bundle": "b", "task": "hammer", "rate_hz": 20, "episodes": 2,
                                                     "successes": 1, "inference_p50_ms": 60.0, "results": results}))
    ticks = [{"state": "STOPPED", "camera_unseen": 9}] + [{"state": "RUNNING", "camera_unseen": u} for u in (0, 0, 7)]
    (lane / "hammer_100.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ticks))
    out = tmp_path / "s.json"
    assert W.main([str(lane), "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["chunks"][0]["running_ticks"] == 3 and s["chunks"][0]["camera_unseen"] == {"0": 2, "7": 1}
    assert "| s | hammer | 1 | 0.000 | 1/2 [" in capsys.readouterr().out
    assert W.main(["--table", str(out)]) == 0
    assert "camera_unseen 1 | 3 of 3 | 7 | 60 |" in capsys.readouterr().out
