"""The fault table's counting rules."""
import gzip
import json

from research.faults import table as ft


def test_caught_counts_stops_within_the_window():
    s = {"results": [{"end": "safety_stop", "steps": 34, "fault_step": 30},
                     {"end": "safety_stop", "steps": 45, "fault_step": 30},
                     {"end": "success", "steps": 60, "fault_step": 30}]}
    assert ft.caught(s, "push") == (1, 3, [4, 15])


def test_auroc_and_episode_means(tmp_path):
    assert ft.auroc([1, 2], [3, 4]) == 1.0 and ft.auroc([1, 2], [1, 2]) == 0.5
    p = tmp_path / "x.jsonl"
    p.write_text("\n".join(json.dumps(l) for l in [
        {"episode": 0, "state": "STOPPED", "state_energy": 100},
        {"episode": 0, "state": "RUNNING", "state_energy": 1},
        {"episode": 0, "state": "RUNNING", "state_energy": 3},
        {"episode": 1, "state": "RUNNING", "state_energy": None}]))
    assert ft.episode_means(p) == [2.0]


def test_episode_means_reads_gzipped_traces(tmp_path):
    lines = "\n".join(json.dumps(l) for l in [
        {"episode": 0, "state": "RUNNING", "state_energy": 1},
        {"episode": 0, "state": "RUNNING", "state_energy": 5},
        {"episode": 1, "state": "RUNNING", "state_energy": 7}])
    p = tmp_path / "t-level0.jsonl.gz"
    p.write_bytes(gzip.compress(lines.encode()))
    assert ft.episode_means(p) == [3.0, 7.0]
    assert ft.episode_means(p, ticks=1) == [1.0, 7.0]
