"""research/stop/false_trips.py: the per-hour interval it prints beside the shipped stop's false trips."""
import json
from pathlib import Path

import pytest

from research.stop import false_trips as ft

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("k,hours,lo,hi", [
    (0, 1.0, 0.0, 3.689),      # no trip in an hour: the rate may still be up to 3.7 per hour
    (0, 2.0, 0.0, 1.844),      # the upper bound falls as 1/hours
    (1, 1.0, 0.0253, 5.572),   # Garwood's exact interval for one event
    (27, 1.096, 16.2, 35.8),   # the shipped stop over set B (docs/evaluation.md)
    (2000, 10.0, 191.3, 209.0),  # many trips: no underflow (e^-mu alone is 0 for mu > 745)
])
def test_poisson_interval(k, hours, lo, hi):
    got = ft.poisson_interval(k, hours)
    assert got == pytest.approx((lo, hi), abs=0.05)


@pytest.mark.parametrize("k,hours,digits,want", [
    (4, 2.474, (1, 2), "4 / 2.474 h = 1.6 [0.44–4.14]"),    # BinPicking's fresh 10 Hz check (docs/evaluation.md)
    (0, 3.769, (1, 1), "0 / 3.769 h = 0.0 [0.0–1.0]"),      # a task row of the --split-p50 table
    (4, 9.884, (2, 2), "4 / 9.884 h = 0.40 [0.11–1.04]"),   # its totals: two decimals
    (0, 0.0, (1, 2), "0 / 0.000 h = –"),                    # nothing driven: no rate
])
def test_rate_cell(k, hours, digits, want):
    assert ft.rate_cell(k, hours, *digits) == want

@pytest.mark.parametrize("p50s,ms,light,heavy", [
    ([90.0, 130.0, 170.0], 130.0, ["c0", "c1"], ["c2"]),  # at the limit counts as light
    ([90.0, 95.0], 50.0, [], ["c0", "c1"]),
    ([], 100.0, [], []),
])
def test_by_load(tmp_path, p50s, ms, light, heavy):
    cells = []
    for i, p in enumerate(p50s):
        (tmp_path / f"c{i}.json").write_text('{"inference_p50_ms": %r, "results": []}' % p)
        cells.append(tmp_path / f"c{i}")
    lo, hi = ft.by_load(cells, ms)
    assert [c.name for c in lo] == light
    assert [c.name for c in hi] == heavy


def _loop(rate: float, k: int, thr: float) -> dict:
    return {"score": "state_energy", "alpha": 0.05, "rule": {"kind": "n_of_m", "n": 2, "m": 5},
            "rate_hz": rate, "steps_k": k, "bands": [{"from": 0, "mean": 0, "std": 1, "threshold": thr}]}


@pytest.mark.parametrize("others,rate,want", [
    ([], None, 100.0),                         # no rate asked: closed_loop
    ([], 10.0, 100.0),                         # nothing at 10 Hz: closed_loop, as the runtime does
    ([_loop(10, 10, 7.0)], 10.0, 7.0),         # the one certified at the loop's rate and K
    ([_loop(10, 10, 7.0)], 20.0, 100.0),
    ([_loop(10, 20, 7.0)], 10.0, 100.0),       # at 10 Hz but another K than the bundle's 10
])
def test_default_threshold_per_rate(others, rate, want):
    m = {"sampler": {"steps": 10}, "state_energy": {"calibration": {"quantiles": {"99.9": 5.0}}},
         "calibration": {"closed_loop": _loop(20, 10, 100.0), "closed_loop_others": others}}
    assert ft.default_threshold(m, rate)[0] == want


def test_default_ceiling():
    with_ceiling = dict(_loop(20, 10, 100.0), ceiling={"alpha": 0.02, "q": 130.0})
    m = {"sampler": {"steps": 10}, "calibration": {"closed_loop": with_ceiling, "closed_loop_others": [_loop(10, 10, 7.0)]}}
    assert ft.default_ceiling(m, 20.0) == 130.0
    assert ft.default_ceiling(m, 10.0) is None          # the 10 Hz calibration has none
    assert ft.rule_spec(100.0, 130.0) == "n_of_m:2:5:100.0|n_of_m:1:1:130.0"
    assert ft.rule_spec(100.0) == "n_of_m:2:5:100.0"


def test_default_threshold_without_closed_loop():
    m = {"sampler": {"steps": 10}, "state_energy": {"calibration": {"quantiles": {"99.9": 5.0}}}, "calibration": None}
    assert ft.default_threshold(m, 10.0) == (5.0, "held-out q99.9")


def test_split_below():
    cells = {"assembly": [Path("d/assembly_60000"), Path("d/assembly_60470"), Path("d/assembly_60480"), Path("d/assembly_64000")],
             "hammer": [Path("d/hammer_70000")]}
    fit, chk = ft.split_below(cells, 60480)
    assert fit == {"assembly": [Path("d/assembly_60000"), Path("d/assembly_60470")]}
    assert chk == {"assembly": [Path("d/assembly_60480"), Path("d/assembly_64000")], "hammer": [Path("d/hammer_70000")]}


def test_check_sets_pools_folders(tmp_path):
    # two folders; in the second only the chunks from seed 60480 on are fresh
    for d, names in {"f": ["button-press_62000", "drawer-open_62010"],
                     "e": ["assembly_60000", "assembly_60480", "assembly_64000"]}.items():
        (tmp_path / d).mkdir()
        for n in names:
            (tmp_path / d / f"{n}.jsonl").write_text("")
            (tmp_path / d / f"{n}.json").write_text("{}")
    (tmp_path / "e" / "assembly_64010.jsonl").write_text("")  # unfinished: no .json summary yet
    got = ft.check_sets([str(tmp_path / "f"), f"{tmp_path / 'e'}:60480"])
    assert got == {"button-press": [tmp_path / "f" / "button-press_62000"],
                   "drawer-open": [tmp_path / "f" / "drawer-open_62010"],
                   "assembly": [tmp_path / "e" / "assembly_60480", tmp_path / "e" / "assembly_64000"]}
    # a folder given twice counts its chunks once
    assert ft.check_sets([str(tmp_path / "f"), str(tmp_path / "f")])["button-press"] == [tmp_path / "f" / "button-press_62000"]
    with pytest.raises(SystemExit, match="is not a folder"):
        ft.check_sets([str(tmp_path / "missing")])


def test_conformal_hours_counts_like_sim_calibrate(tmp_path):
    # two episodes: the first succeeds (arming tick + 3 running), the second fails (IDLE, arming + 1)
    states = [(0, "IDLE"), (0, "RUNNING"), (0, "RUNNING"), (0, "RUNNING"), (0, "RUNNING"),
              (1, "IDLE"), (1, "RUNNING"), (1, "RUNNING"), (1, "STOPPED")]
    cell = tmp_path / "bin-picking_63000"
    cell.with_suffix(".jsonl").write_text("".join(
        f'{{"episode": {e}, "state": "{s}", "state_energy": 1.0}}\n' for e, s in states))
    cell.with_suffix(".json").write_text('{"results": [{"episode": 0, "success": true}, {"episode": 1, "success": false}]}')
    hour = 10.0 * 3600
    assert ft.conformal_hours([cell], 10.0) == pytest.approx((3 + 1) / hour)  # the arming ticks are not counted
    assert ft.conformal_hours([cell], 10.0, successful_only=True) == pytest.approx(3 / hour)
    assert ft.running_hours([cell], 10.0) == pytest.approx((4 + 3) / hour)  # arming tick, and the STOPPED tick after RUNNING


def test_bundle_dir_candidate_or_shipped(tmp_path):
    assert ft.bundle_dir("hammer") == ROOT / "bundles" / "metaworld-hammer"
    assert ft.bundle_dir("hammer", tmp_path) == tmp_path
    # a candidate's manifest is read, not the shipped one's
    (tmp_path / "manifest.json").write_text('{"state_energy": {"calibration": {"quantiles": {"99.9": 6.5}}}, '
                                            '"sampler": {"steps": 10}}')
    thr, _ = ft.shipped_threshold("hammer", 10.0, tmp_path)
    assert thr == 6.5
    assert ft.shipped_ceiling("hammer", 10.0, tmp_path) is None


def test_per_chunk(tmp_path, capsys):
    """One row per chunk at the threshold, and the statistic's quantiles per task."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "manifest.json").write_text('{"state_energy": {"calibration": {"quantiles": {"99.9": 10.0}}}}')
    traces = {  # episode 0 holds two readings of 50 within five ticks: over 10; episode 1 one reading only
        "assembly_70000": [[1, 50, 1, 50, 1], [1, 50, 1, 1, 1, 1, 1, 50]],
        "assembly_70010": [[2, 3, 2, 3]],
    }
    for name, eps in traces.items():
        cell = tmp_path / name
        cell.with_suffix(".jsonl").write_text("".join(
            f'{{"episode": {e}, "state": "RUNNING", "state_energy": {x}}}\n' for e, xs in enumerate(eps) for x in xs))
        cell.with_suffix(".json").write_text(
            '{"inference_p50_ms": 80, "inference_p90_ms": 120, "results": [%s]}'
            % ", ".join('{"episode": %d, "success": %s}' % (e, "false" if e else "true") for e in range(len(eps))))
    a = ft.argparse.Namespace(rate=10.0, bundle=bundle)
    res: dict = {}
    ft.per_chunk(a, ["assembly"], {"assembly": [tmp_path / "assembly_70010", tmp_path / "assembly_70000"]}, res)
    rows = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| assembly")]
    assert rows[0] == "| assembly_70000 | 80 / 120 | 1 | 1 | 50 |"     # sorted by first seed
    assert rows[1] == "| assembly_70010 | 80 / 120 | 0 | 0 | 3 |"
    assert rows[2].startswith("| assembly | 80 (80–80) / 120 (120–120) | 3 | ") and rows[2].endswith(" / 50 |")
    assert res["per_chunk"][str(tmp_path / "assembly_70000")]["statistics"] == [50.0, 1.0]


def test_split_late(tmp_path, capsys):
    """Each episode goes with the runtime's own word on its plans: warned late, in time, or no limit."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "manifest.json").write_text('{"state_energy": {"calibration": {"quantiles": {"99.9": 10.0}}}}')
    chunks = {  # (limit, [(late_spells, success, trace)])
        "assembly_80000": (1.54, [(0, True, [1, 2, 1, 2]), (2, False, [1, 50, 1, 50, 1])]),
        "assembly_80010": (None, [(0, True, [1, 50, 50, 1])]),
    }
    for name, (limit, eps) in chunks.items():
        cell = tmp_path / name
        cell.with_suffix(".jsonl").write_text("".join(
            f'{{"episode": {e}, "state": "RUNNING", "state_energy": {x}}}\n' for e, (_, _, xs) in enumerate(eps) for x in xs))
        cell.with_suffix(".json").write_text(json.dumps({"plan_late_limit_periods": limit, "results": [
            {"episode": e, "success": ok, "late_spells": n} for e, (n, ok, _) in enumerate(eps)]}))
    a = ft.argparse.Namespace(rate=10.0, bundle=bundle)
    res: dict = {}
    ft.split_late(a, ["assembly"], {"assembly": [tmp_path / "assembly_80000", tmp_path / "assembly_80010"]}, res)
    rows = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| assembly")]
    assert rows[0].startswith("| assembly | in time | 1/1 | 0 / ") and rows[0].endswith("(0, 0) |")
    assert rows[1].startswith("| assembly | warned | 0/1 | 1 / ") and rows[1].endswith("(0, 1) |")
    assert rows[2].startswith("| assembly | no limit | 1/1 | 1 / ") and rows[2].endswith("(1, 0) |")
    assert {g: c["episodes"] for g, c in ((g, t["assembly"]) for g, t in res["split_late"].items())} == \
        {"in time": 1, "warned": 1, "no limit": 1}
    # a chunk driven before the runtime warned of late plans is refused with one line
    old = tmp_path / "assembly_80020"
    old.with_suffix(".json").write_text('{"results": []}')
    with pytest.raises(SystemExit, match="has no plan_late_limit_periods: driven before the runtime warned"):
        ft.late_groups([old])
