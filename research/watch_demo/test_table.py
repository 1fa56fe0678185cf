"""The watched-demo table reads scripts/watch_demo.sh's summary as written."""
import gzip
import json

from research.watch_demo.table import table


def test_table_row_from_a_summary(tmp_path):
    s = {"task": "button-press", "minutes": 30, "busy_loops": 0,
         "viewer": {"frames_decoded": 17000, "fps": 9.6, "level_L": {"stopped_after_s": 1.1},
                    "level_0_again": {"moving_after_s": 1.2}},
         "episodes_level0": 200, "successes": 200, "success_ci95": [0.981, 1.0],
         "stops_while_watched": 0, "stops": [{"tick": 1, "reason": "energy"}]}
    p = tmp_path / "bp.json"
    p.write_text(json.dumps(s))
    head, rule, r = table([p])
    assert head.startswith("| run | bundle |") and rule.startswith("|---")
    assert "| bp | metaworld-button-press | 30 min, 0 busy loops, root's browser | 17000 (9.6/s) | 200/200 [98.1–100.0 %] | **0** | – |" in r
    assert "L stopped after 1.1 s; moving again 1.2 s after the click" in r


def test_table_names_the_bundle_the_demo_ran(tmp_path):
    s = {"task": "button-press", "bundle": "metaworld-button-press-camera", "minutes": 30, "busy_loops": 0,
         "viewer": {"frames_decoded": 14000, "fps": 7.8},
         "episodes_level0": 270, "successes": 270, "success_ci95": [0.986, 1.0],
         "stops_while_watched": 0, "stops": []}
    p = tmp_path / "cam.json"
    p.write_text(json.dumps(s))
    assert table([p])[2].startswith("| cam | metaworld-button-press-camera | 30 min, 0 busy loops, root's browser |")


def test_a_run_with_a_users_browser_and_its_late_ticks(tmp_path):
    s = {"task": "hammer", "bundle": "metaworld-hammer-camera", "minutes": 1, "busy_loops": 0,
         "browser_may_raise_priority": False, "ticks": {"ticks": 1200, "overruns": 3},
         "viewer": {"frames_decoded": 500, "fps": 8.3},
         "episodes_level0": 12, "successes": 12, "success_ci95": [0.758, 1.0],
         "stops_while_watched": 0, "stops": []}
    p = tmp_path / "hc.json"
    p.write_text(json.dumps(s))
    assert "| hc | metaworld-hammer-camera | 1 min, 0 busy loops, user's browser | 500 (8.3/s) | 12/12 [75.8–100.0 %] | **0** | 3/1200 | – |" in table([p])[2]


def test_a_level_check_on_a_latched_stop_is_not_a_measurement(tmp_path):
    msg = "state_energy out of distribution: newest score 5.427, threshold 5.353"
    s = {"task": "button-press", "minutes": 30, "busy_loops": 0,
         "viewer": {"frames_decoded": 17000, "fps": 9.4, "level_L": {"stopped_after_s": 0.1, "reason": "energy: " + msg},
                    "level_0_again": {"moving_after_s": 4.1}},
         "episodes_level0": 117, "successes": 94, "success_ci95": [0.72, 0.87],
         "stops_while_watched": 1, "stops": [{"tick": 6057, "reason": "energy", "message": msg}]}
    p = tmp_path / "latched.json"
    p.write_text(json.dumps(s))
    r = table([p])[2]
    assert "L: not measured (the watched stop still latched); moving again 4.1 s" in r
    s["viewer"]["level_L"]["reason"] = "energy: state_energy out of distribution: newest score 41.2, threshold 5.353"
    s["viewer"]["unlatched_after_s"] = 3.9
    p.write_text(json.dumps(s))
    r = table([p])[2]
    assert "unlatched by a new level-0 episode in 3.9 s; L stopped after 0.1 s" in r


def test_a_gzipped_summary_reads_as_the_plain_one(tmp_path):
    s = {"task": "drawer-open", "minutes": 10, "busy_loops": 0,
         "viewer": {"frames_decoded": 5000, "fps": 8.0},
         "episodes_level0": 40, "successes": 39, "success_ci95": [0.871, 0.996],
         "stops_while_watched": 0, "stops": []}
    plain, packed = tmp_path / "do.json", tmp_path / "do-gz.json.gz"
    plain.write_text(json.dumps(s))
    packed.write_bytes(gzip.compress(json.dumps(s).encode()))
    a, b = table([plain, packed])[2:]
    assert a.startswith("| do | metaworld-drawer-open |") and b.startswith("| do-gz | metaworld-drawer-open |")
    assert a.split("|")[2:] == b.split("|")[2:]
