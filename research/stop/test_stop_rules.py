"""research/stop/stop_rules.py: stop rules replayed on sim eval traces as the safety gate applies them."""
import json
import sys

import pytest

from research.stop import stop_rules as sr


def lines(states_scores):
    return [(st, x) for st, x in states_scores]


@pytest.mark.parametrize("spec,scores,want", [
    ("n_of_m:2:5:5", [1, 9, 1, 1, 9, 1], 4),            # the second exceedance within five fresh scores
    ("n_of_m:2:5:5", [9, 1, 1, 1, 1, 9], None),         # five apart: never two in the window
    ("n_of_m:3:5:5", [9, 9, None, 1, 9], 4),            # a tick without a score is skipped
    ("n_of_m:1:1:8", [7.9, 8.1], 1),
    ("cusum:4:1:0.5:5", [10, 1], 0),                    # one spike limit·scale above trips at once
    ("cusum:4:1:0.5:5", [6, 6, 6, 6], 3),               # 1.5 per tick accumulates past 5 at the fourth
    ("n_of_m:2:5:5|n_of_m:1:1:50", [1, 70, 1], 1),      # a one-tick ceiling beside 2 of 5: the spike trips
    ("n_of_m:2:5:5", [1, 70, 1], None),                 # 2 of 5 alone lets it pass
    ("n_of_m:2:5:5|n_of_m:1:1:50", [9, 1, 1, 9], 3),    # under the ceiling the window rule decides
])
def test_first_trip(spec, scores, want):
    _, make = sr.parse_rule(spec)
    trace = [("STOPPED", None)] + [("RUNNING", x) for x in scores]
    got, _ = sr.first_trip(trace, make)
    assert got == (None if want is None else want + 1)


def test_the_stopping_tick_counts_and_pre_arming_ticks_do_not():
    _, make = sr.parse_rule("n_of_m:1:1:5")
    # the tick that decided a stop reads STOPPED; ticks before arming never count
    trace = [("STOPPED", 99.0), ("RUNNING", 1.0), ("RUNNING", 1.0), ("STOPPED", 7.0)]
    assert sr.first_trip(trace, make) == (3, 3)


def test_onset_line_follows_the_lockstep_bridge():
    # one environment step per line, one more when the gate arms (after line 2)
    trace = [("STOPPED", None)] * 3 + [("RUNNING", 1.0)] * 40
    assert sr.onset_line(trace, 30) == 28
    assert sr.onset_line(trace, 2) is None              # before arming
    assert sr.onset_line(trace[:10], 30) is None        # the trace ends first


def test_bad_rule_is_one_line():
    with pytest.raises(SystemExit, match="want n_of_m:N:M:T or cusum"):
        sr.parse_rule("median:3")
    with pytest.raises(SystemExit, match="want 1 <= N <= M"):
        sr.parse_rule("n_of_m:6:5:1")


def test_cli_counts_false_trips_and_detections(tmp_path, capsys, monkeypatch):
    def cell(name, eps):
        p = tmp_path / name
        rows = []
        for ep, scores in enumerate(eps):
            rows += [{"episode": ep, "tick": 0, "state": "STOPPED", "state_energy": None}]
            rows += [{"episode": ep, "tick": i + 1, "state": "RUNNING", "state_energy": x} for i, x in enumerate(scores)]
        p.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(p)
    neg = cell("zero", [[1.0] * 100, [1.0] * 50 + [9.0, 9.0] + [1.0] * 48])
    push = cell("push", [[1.0] * 29 + [9.0, 9.0] + [1.0] * 20, [1.0] * 60])
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["stop_rules.py", "--negatives", neg, "--faults", push,
                                      "--rule", "n_of_m:2:5:5", "--rule", "n_of_m:3:5:5", "--json", str(out)])
    sr.main()
    r = json.loads(out.read_text())
    assert r["n_of_m:2:5:5"]["false_trips"] == 1 and r["n_of_m:3:5:5"]["false_trips"] == 0
    assert r["n_of_m:2:5:5"]["episodes"] == 2 and r["n_of_m:2:5:5"]["running_hours"] == pytest.approx((100 + 52) / 20 / 3600)  # a trip ends its episode
    f = r["n_of_m:2:5:5"]["faults"][push]
    assert f["detected"] == 1 and f["of"] == 2
    assert r["n_of_m:3:5:5"]["faults"][push]["detected"] == 0
    assert "n_of_m:2:5:5" in capsys.readouterr().out


def test_all_trips_restarts_the_rule_after_each_trip():
    _, make = sr.parse_rule("n_of_m:2:5:5")
    trace = [("STOPPED", None)] + [("RUNNING", x) for x in [9, 9, 9, 1, 1, 1, 1, 1, 9, 1, 9]]
    # trips at the 2nd score; restarted, the 3rd score's 9 leaves the window before another comes,
    # and the 9th and 11th trip it again
    assert sr.all_trips(trace, make) == (2, 11)
    # re-armed only once a score is back at or below 5: the third 9 (still high) is skipped, and the
    # 1s clear the way; the 9th and 11th trip again
    assert sr.all_trips(trace, make, 5.0) == (2, 11)
    high = [("STOPPED", None)] + [("RUNNING", 9.0)] * 20 + [("RUNNING", 1.0)] + [("RUNNING", 9.0)] * 2
    assert sr.all_trips(high, make, 5.0) == (2, 23)
    assert sr.all_trips(high, make)[0] == 11  # without re-arming, a score that stays high trips every 2 ticks


@pytest.mark.parametrize("n,m,scores", [
    (2, 5, [1, 9, 1, 1, 9, 1, 3, 4]),
    (1, 1, [0.5, 7.25, 2]),
    (3, 5, [4, None, 8, 6, 1, 7, 2]),
])
def test_critical_is_the_boundary_of_the_rule(n, m, scores):
    trace = [("STOPPED", None)] + [("RUNNING", x) for x in scores]
    c = sr.critical(trace, n, m)
    _, at = sr.parse_rule(f"n_of_m:{n}:{m}:{c}")
    _, below = sr.parse_rule(f"n_of_m:{n}:{m}:{c - 1e-9}")
    assert sr.first_trip(trace, at)[0] is None
    assert sr.first_trip(trace, below)[0] is not None


def test_task_of_names():
    assert sr.task_of("build/hours/a/button-press_3000") == "button-press"
    assert sr.task_of("build/eval/energyflow_drawer-open_0_K20") == "drawer-open"


def test_cli_fit_prints_the_zero_trip_threshold(tmp_path, capsys, monkeypatch):
    rows = [{"episode": 0, "tick": 0, "state": "STOPPED", "state_energy": None}]
    rows += [{"episode": 0, "tick": i + 1, "state": "RUNNING", "state_energy": x} for i, x in enumerate([1, 6, 2, 7, 1])]
    p = tmp_path / "hammer_3000"
    p.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["stop_rules.py", "--negatives", str(p), "--fit", "2:5", "--json", str(out)])
    sr.main()
    g = json.loads(out.read_text())["fit"]["groups"]
    assert g["hammer"]["max"] == 6 and g["all"]["episodes"] == 1
    monkeypatch.setattr(sys, "argv", ["stop_rules.py", "--negatives", str(p)])
    with pytest.raises(SystemExit, match="at least one --rule"):
        sr.main()


def test_either_rule_feeds_every_rule_and_rearms_at_the_first():
    # 2 of 5 sees the 9 that the ceiling trips on, so 9 then 9 trips it: both rules saw every score
    _, make = sr.parse_rule("n_of_m:2:5:5|n_of_m:1:1:8.5")
    observe = make()
    assert [observe(x) for x in (1, 6, 1)] == [False, False, False]
    assert observe(6) is True
    assert sr.threshold_of("n_of_m:2:5:5|n_of_m:1:1:50") == 5.0
