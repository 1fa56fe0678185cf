"""scripts/eval_report.py: the statistics behind docs/evaluation.md."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("eval_report", ROOT / "scripts" / "eval_report.py")
er = importlib.util.module_from_spec(spec)
sys.modules["eval_report"] = er  # dataclasses look their module up there
spec.loader.exec_module(er)


@pytest.mark.parametrize("neg,pos,want", [
    ([0, 1, 2], [3, 4], 1.0),
    ([3, 4], [0, 1, 2], 0.0),
    ([1, 1], [1, 1], 0.5),
    ([0, 2], [1, 3], 0.75),
])
def test_auroc(neg, pos, want):
    assert er.auroc(neg, pos) == pytest.approx(want)


@pytest.mark.parametrize("k,n,lo,hi", [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634)])
def test_wilson_matches_the_textbook_values(k, n, lo, hi):
    a, b = er.wilson(k, n)
    assert a == pytest.approx(lo, abs=1e-3) and b == pytest.approx(hi, abs=1e-3)


def test_detect_delay_is_three_of_five_after_onset():
    ep = er.Episode(True, 10, "", 0, [(t, "RUNNING", v, None) for t, v in
                                      enumerate([1, 9, 1, 1, 1, 9, 9, 1, 9, 1])])
    assert er.detect_delay(ep, 5.0, 0) == 8       # ticks 5, 6, 8 above: fires at tick 8
    assert er.detect_delay(ep, 5.0, 9) == 0       # ticks 5, 6, 8 still in the window at tick 9
    assert er.detect_delay(ep, 5.0, 10) is None   # no tick at or after 10
    assert er.detect_delay(ep, 10.0, 0) is None


def _write(d: Path, name: str, results, ticks):
    (d / f"{name}.json").write_text(json.dumps({"episodes": len(results), "results": results, "trips": {}}))
    (d / f"{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ticks))


def test_report_separates_what_is_separable(tmp_path):
    def ticks(ep, energy):
        return [{"episode": ep, "tick": t, "state": "RUNNING", "energy": energy + t * 0.01,
                 "centered_energy": energy - 5} for t in range(20)]
    _write(tmp_path, "energyflow_button-press_0_K20",
           [{"success": True, "steps": 50}, {"success": False, "steps": 200}], ticks(0, 1.0) + ticks(1, 3.0))
    _write(tmp_path, "energyflow_button-press_L_K20",
           [{"success": False, "steps": 200}], ticks(0, 10.0))
    cells = er.load(tmp_path)
    assert {(c.level, len(c.episodes)) for c in cells} == {("0", 2), ("L", 1)}
    table, head = er.safety_tables(cells, rate=20.0)
    assert head["auroc"]["button-press K=20 level L"] == 1.0
    rt, rh = er.reward_table(cells)
    assert rh["button-press"] == 1.0               # the success had the higher reward


def test_image_policy_is_evaluated_on_its_own(tmp_path):
    # an image policy's level-0 and occlusion cells: its own rows and keys,
    # never pooled with the state policy's episodes
    def ticks(ep, energy, n=40):
        return [{"episode": ep, "tick": t, "state": "RUNNING", "energy": energy + (20.0 if t >= 30 and energy > 1 else 0),
                 "centered_energy": energy} for t in range(n)]
    _write(tmp_path, "energyflow_button-press_0_K20", [{"success": True, "steps": 50}], ticks(0, 1.0))
    _write(tmp_path, "image_button-press_0_K20",
           [{"success": True, "steps": 40}, {"success": False, "steps": 40}], ticks(0, 1.0) + ticks(1, 1.0))
    _write(tmp_path, "image_button-press_0_K20_occlusion",
           [{"success": False, "steps": 40, "fault_step": 10}], ticks(0, 2.0))
    cells = er.load(tmp_path)
    assert {c.policy for c in cells} == {"energyflow", "image"}
    table, head = er.safety_tables(cells, rate=20.0)
    assert head["auroc"]["image button-press K=20 fault occlusion"] == 1.0
    assert not any(k.endswith("occlusion") and not k.startswith("image") for k in head["auroc"])
    assert "EnergyFlow, camera + proprioception | button-press | 20 | fault occlusion | 2 / 1" in table
    st = er.success_table(cells)
    assert st.index("| EnergyFlow |") < st.index("| EnergyFlow, camera")


def test_the_deciding_stopped_tick_counts():
    # the gate logs its deciding tick as STOPPED: the replay must still see it
    states = ["RUNNING"] * 4 + ["STOPPED", "STOPPED"]
    ep = er.Episode(False, 6, "energy", 0, [(t, s, v, None) for t, (s, v) in
                                              enumerate(zip(states, [1, 9, 9, 1, 9, 9]))])
    assert [t for t, _, _ in ep.running()] == [0, 1, 2, 3, 4]
    assert er.detect_delay(ep, 5.0, 0) == 4


def test_reward_within_a_cell_on_a_matched_window(tmp_path):
    # The success ends at tick 30; the failure runs to 100 and its late ticks
    # have a high reward. The whole-episode means rank the failure higher; on
    # the first 20 ticks the success is higher, as it is tick for tick.
    def ticks(ep, n, early, late):
        return [{"episode": ep, "tick": t, "state": "RUNNING", "energy": 0.0,
                 "centered_energy": -(early if t < 30 else late)} for t in range(n)]
    _write(tmp_path, "energyflow_button-press_0_K20",
           [{"success": True, "steps": 30}, {"success": False, "steps": 100}],
           ticks(0, 30, 2.0, 2.0) + ticks(1, 100, 1.0, 5.0))
    cells = er.load(tmp_path)
    table, head = er.reward_cell_table(cells, window=20)
    got = head["button-press K=20 level 0"]
    assert got == {"whole": 0.0, "window": 1.0}
    assert "first 20 ticks" in table


def test_reward_window_needs_half_the_window():
    short = er.Episode(True, 5, "", 0, [(t, "RUNNING", 0.0, -1.0) for t in range(5)])
    assert er._mean_reward(short) == 1.0
    assert er._mean_reward(short, window=20) is None
    assert er._mean_reward(short, window=10) == 1.0


def test_safety_auroc_on_a_matched_window(tmp_path):
    # The shifted episode has the higher energy tick for tick, but it fails and
    # runs on into a low-energy phase the short successful episode never
    # reaches: its whole-episode mean is lower, its first-60-tick mean higher.
    def ticks(n, early, late):
        return [{"episode": 0, "tick": t, "state": "RUNNING", "energy": early if t < 60 else late,
                 "centered_energy": 0.0} for t in range(n)]
    _write(tmp_path, "energyflow_button-press_0_K20", [{"success": True, "steps": 40}], ticks(40, 1.0, 1.0))
    _write(tmp_path, "energyflow_button-press_L_K20", [{"success": False, "steps": 100}], ticks(100, 2.0, -10.0))
    table, head = er.safety_tables(er.load(tmp_path), rate=20.0)
    assert head["auroc"]["button-press K=20 level L"] == 1.0              # max: 2 > 1
    assert head["auroc_window_mean"]["button-press K=20 level L"] == 1.0
    assert "first 60 ticks" in table
    row = next(r for r in table.splitlines() if "level L" in r).split("|")
    assert row[8].strip() == "0.00"   # whole-episode mean energy: -2.8 < 1


def test_a_fault_at_another_step_is_its_own_group(tmp_path):
    def ticks(energy):
        return [{"episode": 0, "tick": t, "state": "RUNNING", "energy": energy, "centered_energy": 0.0}
                for t in range(40)]
    _write(tmp_path, "image_button-press_0_K20", [{"success": True, "steps": 40}], ticks(1.0))
    _write(tmp_path, "image_button-press_0_K20_occlusion", [{"success": True, "steps": 40, "fault_step": 30}],
           ticks(1.0))
    _write(tmp_path, "image_button-press_0_K20_occlusion-at0", [{"success": False, "steps": 40, "fault_step": 0}],
           ticks(5.0))
    cells = er.load(tmp_path)
    assert sorted(c.fault for c in cells) == ["", "occlusion", "occlusion-at0"]
    table, head = er.safety_tables(cells, rate=20.0)
    assert head["auroc"]["image button-press K=20 fault occlusion from step 0"] == 1.0
    assert head["auroc"]["image button-press K=20 fault occlusion"] == 0.5


@pytest.mark.parametrize("fault,want", [("push", "push"), ("occlusion-at0", "occlusion from step 0"),
                                        ("object-at12", "object from step 12")])
def test_fault_label(fault, want):
    assert er.fault_label(fault) == want


def test_success_by_where_the_scene_is(tmp_path):
    # Seeds 0-4: objects at x = -1, 0, 1, -10, 10 cm (mean 0, median distance 1 cm);
    # the policy succeeds on the three near the middle. A cell with no success at
    # all says nothing and is left out.
    objs = {0: [-0.01, 0.7, 0.1], 1: [0.0, 0.7, 0.1], 2: [0.01, 0.7, 0.1], 3: [-0.1, 0.7, 0.1], 4: [0.1, 0.7, 0.1]}
    (tmp_path / "positions_button-press_0.json").write_text(json.dumps(
        {"task": "button-press", "level": "0", "episodes": [{"seed": s, "object": o, "scene": o} for s, o in objs.items()]}))
    _write(tmp_path, "energyflow_button-press_0_K20",
           [{"seed": s, "success": s < 3, "steps": 50} for s in objs], [])
    _write(tmp_path, "diffusion_button-press_0_K20", [{"seed": s, "success": False, "steps": 50} for s in objs], [])
    table = er.position_table(er.load(tmp_path), tmp_path)
    rows = [r for r in table.splitlines() if r.startswith("| EnergyFlow")]
    assert rows == ["| EnergyFlow | button-press | 0 | 20 | 3/3 | 0/2 | 1.0 cm |"]
    assert "Diffusion" not in table


def test_what_a_fault_changed_is_counted_seed_by_seed(tmp_path):
    _write(tmp_path, "energyflow_button-press_0_K20",
           [{"seed": s, "success": ok, "steps": 50} for s, ok in [(1, True), (2, True), (3, False)]], [])
    _write(tmp_path, "energyflow_button-press_0_K20_push",   # seed order differs: matched by seed
           [{"seed": s, "success": ok, "steps": 50} for s, ok in [(3, True), (2, True), (1, False)]], [])
    table = er.fault_outcome_table(er.load(tmp_path))
    assert "| EnergyFlow | button-press | 20 | push | 2/3 | 2/3 | 1/3 |" in table


def test_energy_of_the_late_phase_of_failures(tmp_path):
    # success: 50 ticks at energy 300; failure: 100 ticks at 300, then 20 at -200
    def ticks(ep, energies):
        return [{"episode": ep, "tick": t, "state": "RUNNING", "energy": v, "centered_energy": v - 250.0}
                for t, v in enumerate(energies)]
    _write(tmp_path, "energyflow_button-press_L_K20",
           [{"success": True, "steps": 50}, {"success": False, "steps": 120}],
           ticks(0, [300.0] * 50) + ticks(1, [300.0] * 100 + [-200.0] * 20))
    table, _ = er.reward_cell_table(er.load(tmp_path))
    row = next(r for r in table.splitlines() if "| L |" in r)
    assert row.endswith("| 300 | -200 |")


def test_steps_to_success_prefer_the_simulators_success_step():
    assert er.Episode(True, 80, "", 0, success_step=74).steps_to_success() == 74
    assert er.Episode(True, 80, "", 0).steps_to_success() == 80      # older cells: the episode length
    assert er.Episode(False, 500, "", 0, success_step=None).steps_to_success() is None
    assert er.median_steps([er.Episode(True, 9, "", 0, success_step=s) for s in (70, 90)]
                           + [er.Episode(False, 500, "", 0)]) == 80
    assert er.median_steps([er.Episode(False, 500, "", 0)]) is None


def test_rollouts_are_paired_with_the_runtime_cell_seed_by_seed(tmp_path):
    rt = [{"seed": 1000, "success": True, "steps": 84, "success_step": 80},
          {"seed": 1001, "success": True, "steps": 99, "success_step": 95},
          {"seed": 1002, "success": False, "steps": 500}]
    _write(tmp_path, "diffusion_assembly_0_K20", rt, [])
    direct = [{"seed": 1000, "success": True, "steps": 70, "success_step": 70},
              {"seed": 1001, "success": False, "steps": 500, "success_step": None},
              {"seed": 1002, "success": True, "steps": 60, "success_step": 60}]
    (tmp_path / "rollout_diffusion_assembly_0_K20.json").write_text(json.dumps({"episodes": 3, "results": direct}))
    # an older rollout name (no level) still loads, as level 0, unpaired
    (tmp_path / "rollout_energyflow_assembly_K10.json").write_text(json.dumps({"episodes": 1, "results": direct[:1]}))
    t = er.rollout_table(tmp_path, er.load(tmp_path))
    def cols(k):
        row = next(r for r in t.splitlines() if f"| assembly | 0 | {k} |" in r)
        return [c.strip() for c in row.strip().strip("|").split("|")][4:]
    # seed 1000 solved both ways (80 vs 70 steps); 1001 only through the runtime, 1002 only directly
    assert cols(20) == ["2/3", "21–94%", "2/3", "+0", "65 / 88", "+10 (n = 1)"]
    assert cols(10) == ["1/1", "21–100%", "–", "–", "70 / –", "–"]


def test_threshold_sweep_skips_a_closed_loop_only_calibration(tmp_path):
    """A bundle calibrated only in closed loop (energyflow sim calibrate) has no held-out
    quantiles to sweep: the sweep leaves it out instead of failing the report."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text(json.dumps({"calibration": {"closed_loop": {"score": "energy"}}}))
    ticks = [{"episode": 0, "tick": t, "state": "RUNNING", "energy": 1.0, "centered_energy": 0.0} for t in range(20)]
    (tmp_path / "energyflow_button-press_0_K20.json").write_text(json.dumps(
        {"episodes": 1, "bundle": str(bundle), "results": [{"success": True, "steps": 20}], "trips": {}}))
    (tmp_path / "energyflow_button-press_0_K20.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ticks))
    table, head = er.threshold_sweep(er.load(tmp_path), rate=20.0)
    assert head == {} and "button-press" not in table


@pytest.mark.parametrize("summary,want", [
    # what sim eval's summary says the stop watched, and the never-armed episodes
    ({"watch": ["state_energy"], "never_armed": 2, "inference_p50_ms": 31.4}, "| state_energy | 2 | none | 31 ms |"),
    ({"never_armed": 0}, "| off | 0 | none | – |"),  # a policy without an energy: the stop was off
    ({}, "| – | – | none | – |"),                     # a cell from before these were recorded
])
def test_success_table_says_what_the_stop_watched(tmp_path, summary, want):
    name = "energyflow_button-press_S_K20"
    (tmp_path / f"{name}.json").write_text(json.dumps(
        {"episodes": 2, "results": [{"success": True, "steps": 50}, {"success": False, "steps": 500}], **summary}))
    row = [r for r in er.success_table(er.load(tmp_path)).splitlines() if r.startswith("| EnergyFlow |")]
    assert len(row) == 1 and row[0].endswith(want), row


def test_the_stop_on_a_fault(tmp_path):
    # fault at step 30, 20 Hz: stopped 5 and 25 steps after it, once before it, once not at all
    eps = [{"seed": s, "success": False, "steps": n, "end": "safety_stop", "stop_kind": "energy", "fault": "push",
            "fault_step": 30} for s, n in [(1, 35), (2, 55), (3, 12)]]
    eps.append({"seed": 4, "success": True, "steps": 80, "fault": "push", "fault_step": 30})
    _write(tmp_path, "energyflow_button-press_0_K20_push", eps, [])
    table = er.fault_stop_table(er.load(tmp_path), 20)
    assert "| EnergyFlow | button-press | 20 | push | 2/4 | 1/4 | 15 | 1/4 |" in table
