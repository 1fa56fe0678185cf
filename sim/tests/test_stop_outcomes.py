"""scripts/stop_outcomes.py: what the energy stop did, counting episodes that never armed."""
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("stop_outcomes", ROOT / "scripts" / "stop_outcomes.py")
so = importlib.util.module_from_spec(spec)
sys.modules["stop_outcomes"] = so
spec.loader.exec_module(so)


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
