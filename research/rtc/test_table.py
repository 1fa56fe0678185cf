"""The real-time chunking table reads sim eval's summary as written."""
import gzip
import json

from research.rtc.table import table


def summary(**kw):
    s = {"task": "assembly", "rate_hz": 20, "steps_k": 0, "episodes": 20, "successes": 19, "delay_periods": 2,
         "chunking": "denoised", "chunking_strength": 1, "join_max_median": 0.25, "join_inside_median": 0.05,
         "join_ratio": 5.0, "switch_max_median": 0.1, "switch_median_median": 0.02, "inference_p50_ms": 131.2,
         "inference_p90_periods": 3.14,
         "trips": {"energy": 1}}
    s.update(kw)
    return s


def test_rows_sorted_and_formatted(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(summary()))
    b.write_text(json.dumps(summary(chunking="off", join_ratio=None, trips={})))
    head, rule, off, on = table([a, b])
    assert head.startswith("| task |") and rule.startswith("|---")
    assert off.startswith("| assembly | 20 Hz, K=– | 2 | off | cold | 19/20 [76–99 %] | 0.250 / 0.050 (–) |")
    assert on.endswith("| 0.100 / 0.020 | 131 / 3.14 | energy 1 |")
    assert "| denoised 1 |" in on



def test_hand_over_column(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(summary(chunking="off", handover=4)))
    assert "| hand-over 4 | cold |" in table([a])[2]


def test_warm_start_column(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(summary(chunking="off", warm_sigma=1.0, warm_steps=5)))
    assert "| off | warm σ 1, 5 steps | 19/20" in table([a])[2]
    b = tmp_path / "b.json"
    s = summary(chunking="off", warm_sigma=1.0, warm_steps=5, warm_max_age=2)
    s["results"] = [{"replans": 30, "warm_plans": 29}, {"replans": 10, "warm_plans": 1}]
    b.write_text(json.dumps(s))
    assert "| off | warm σ 1, 5 steps, ≤ 2 periods old (75 % warm) | 19/20" in table([b])[2]


def test_late_network_share(tmp_path):
    a = tmp_path / "a.json"
    s = summary(chunking="off")
    s["results"] = [{"inferences": 30, "late_net_plans": 29}, {"inferences": 10, "late_net_plans": 0}]
    a.write_text(json.dumps(s))
    assert "| off | cold; late network 72 % | 19/20" in table([a])[2]
    s["results"] = [{"inferences": 30, "late_net_plans": 0}]
    a.write_text(json.dumps(s))
    assert "| off | cold | 19/20" in table([a])[2]


def test_planners_column(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(summary(chunking="off", planners=3)))
    assert "| off | cold, 3 in flight | 19/20" in table([a])[2]
    a.write_text(json.dumps(summary(chunking="off", predict_state=True)))
    assert "| off | cold, from the predicted state | 19/20" in table([a])[2]


def test_bench_table(tmp_path):
    from research.rtc.bench_table import table as bench_table
    (tmp_path / "dp-ddim20.json").write_text(json.dumps({"bundle": "x/dp", "steps": 20, "p50_ms": 20.0, "p90_ms": 22.0}))
    (tmp_path / "a.json").write_text(json.dumps({"bundle": "b/metaworld-a", "steps": 10, "p50_ms": 30.0, "p90_ms": 31.0,
                                                 "references": 16}))
    (tmp_path / "b.json").write_text(json.dumps({"bundle": "b/metaworld-a", "steps": 10, "p50_ms": 15.0, "p90_ms": 16.0,
                                                 "references": 0, "planner": True}))
    lines = bench_table(sorted(tmp_path.glob("*.json")))
    assert lines[0].startswith("Diffusion Policy, DDIM S=20 (same trunk): p50 20.0 ms")
    assert lines[4] == "| metaworld-a | 10 | full: K steps, energy at γ, 16 references | 30.0 | 31.0 | 1.50 |"
    assert lines[5] == "| metaworld-a | 10 | planner: the K steps | 15.0 | 16.0 | 0.75 |"


def test_other_bundles_rows_are_marked(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(summary(bundle="bundles/metaworld-assembly-dp", chunking="off")))
    b.write_text(json.dumps(summary(bundle="bundles/metaworld-assembly", chunking="off")))
    c = tmp_path / "c.json"
    c.write_text(json.dumps(summary(bundle="/elsewhere/assembly-candidate", chunking="off")))
    ours, dp, candidate = table([a, b, c])[2:]
    assert ours.startswith("| assembly | 20 Hz")
    assert candidate.startswith("| assembly (assembly-candidate) | 20 Hz")
    assert dp.startswith("| assembly (Diffusion Policy) | 20 Hz")


def test_gzipped_summary_reads_as_the_plain_one(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json.gz"
    a.write_text(json.dumps(summary()))
    b.write_bytes(gzip.compress(json.dumps(summary()).encode()))
    assert table([a])[2] == table([b])[2]
