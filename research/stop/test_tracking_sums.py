"""research.stop.tracking_sums: the CUSUM of one-step tracking differences."""
import json

from research.stop.tracking_sums import peaks, table


def test_peaks_sum_beyond_drift_and_restart() -> None:
    ticks = [("RUNNING", 0.01), ("RUNNING", 0.01), ("STOPPED", None), ("RUNNING", 0.004), ("RUNNING", 0.012)]
    one, top, n = peaks(ticks, 0.006)
    assert n == 4 and abs(one - 0.012) < 1e-12
    assert abs(top - 0.008) < 1e-12  # 4 + 4 mm before the stop; after it 0, then 6


def test_table_reads_scores(tmp_path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text("\n".join(json.dumps({"episode": e, "state": "RUNNING", "tracking": x})
                           for e, x in [(0, 0.001), (0, 0.009), (1, 0.002)]))
    rows = table([("a", str(p))], 0.006)
    assert rows[-1] == "| a | 2 | 3 | 9.0 | 3.0 | – | – |"  # no summary beside: stops unknown
    (tmp_path / "a.json").write_text(json.dumps({"results": [{"stop_kind": "tracking"}, {"stop_kind": "energy"}, {}]}))
    assert table([("a", str(p))], 0.006)[-1].endswith("| 3.0 | – | 1 |")


def test_table_reads_the_runtimes_sum(tmp_path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text("\n".join(json.dumps({"episode": 0, "state": st, "tracking": 0.009, "tracking_sum": v})
                           for st, v in [("RUNNING", 0.001), ("RUNNING", 0.004), ("STOPPED", 0.02)]))
    assert table([("a", str(p))], 0.006)[-1].endswith("| 4.0 | – |")
