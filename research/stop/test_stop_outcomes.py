"""research/stop/stop_outcomes.py: what the energy stop did, counting episodes that never armed."""
import json

from research.stop import stop_outcomes as so


def test_window_means_count_every_scored_tick_from_the_start(tmp_path):
    f = tmp_path / "c.jsonl"
    ticks = [{"episode": 0, "tick": t, "state": "STOPPED", "energy": float(t)} for t in range(10)]
    ticks += [{"episode": 1, "tick": t, "state": "RUNNING", "energy": None if t % 2 else 100.0} for t in range(10)]
    f.write_text("".join(json.dumps(t) + "\n" for t in ticks))
    assert so.window_means(f, {}, window=4) == [1.5, 100.0]          # a never-armed episode counts
    assert so.window_means(f, {0: 6, 1: 6}, window=4) == [7.5, 100.0]  # from the fault step on


def test_auroc():
    assert so.auroc([1, 2], [3, 4]) == 1.0
    assert so.auroc([1, 2], [1, 2]) == 0.5
    assert so.auroc([], [1]) is None


def test_auroc_interval():
    lo, hi = so.auroc_interval(0.8, 50, 50)
    assert 0.70 < lo < 0.73 and 0.87 < hi < 0.90   # SE 0.044
    assert so.auroc_interval(1.0, 50, 50) == (1.0, 1.0)
    lo, hi = so.auroc_interval(0.5, 50, 50)
    assert abs((0.5 - lo) - (hi - 0.5)) < 1e-12                  # symmetric away from the bounds
    assert so.auroc_interval(0.5, 200, 200)[0] > lo              # narrower with more episodes
