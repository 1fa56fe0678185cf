"""research/stop/explain_trip.py: what the robot saw when the stop tripped, from a runtime recording."""
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from research.stop import explain_trip as et


def write_recording(path: Path, state: np.ndarray, state_energy: np.ndarray, events: object) -> None:
    """A recording in the runtime's layout (runtime/record)."""
    with h5py.File(path, "w") as h:
        d = h.create_group("data")
        d.attrs["env"] = "test-bundle"
        ep = d.create_group("demo_0")
        ep.attrs["stop_reason"] = "stopped: energy"
        ep.attrs["safety_events"] = json.dumps(events)
        ep.create_dataset("obs/state", data=state.astype(np.float32))
        ep.create_dataset("actions", data=np.zeros((len(state), 4), np.float32))
        ep.create_dataset("scores/state_energy", data=state_energy.astype(np.float32))


def write_bundle(d: Path, width: int) -> Path:
    d.mkdir()
    norm = {"mean": [0.5] * width, "std": [0.1] * width}
    (d / "manifest.json").write_text(json.dumps({"obs": [{"name": "state", "kind": "state", "shape": [width], "norm": norm}]}))
    return d


@pytest.mark.parametrize("width,bad_dim,want_name", [
    (39, 1, "hand.y"),        # a Meta-World state: named
    (39, 7, "obj.qw"),
    (5, 3, "state[3]"),       # any other width: indexed
])
def test_explain_names_the_farthest_dimension(tmp_path, width, bad_dim, want_name):
    state = np.full((4, width), 0.5)
    state[2, bad_dim] = 0.0                          # row 2: one dimension 5 σ below the mean
    state[3, 0] = 0.6                                # the last row: 1 σ off elsewhere
    rec = tmp_path / "ep.hdf5"
    trip = {"type": "trip", "tick": 9, "reason": "energy", "message": "state_energy out of distribution: newest score 7"}
    write_recording(rec, state, np.array([1.0, 1.0, 50.0, 3.0]), [trip])
    out = et.explain(rec, write_bundle(tmp_path / "b", width), top=2)
    lines = out.splitlines()
    assert "trip at tick 9: energy: state_energy out of distribution: newest score 7" in out
    assert "highest state_energy 50 at row 2 of 4" in out
    assert lines[-2].split()[0] == want_name and lines[-2].split()[-1] == "-5.0σ"


def test_explain_no_events(tmp_path):
    """A recording that ended without a trip stores events as JSON null."""
    rec = tmp_path / "ep.hdf5"
    write_recording(rec, np.full((2, 5), 0.5), np.array([1.0, 2.0]), None)
    out = et.explain(rec, write_bundle(tmp_path / "b", 5), top=1)
    assert "trip at" not in out and "highest state_energy 2 at row 1 of 2" in out


def test_main_reports_a_width_mismatch_in_one_line(tmp_path, capsys):
    rec = tmp_path / "ep.hdf5"
    write_recording(rec, np.full((2, 5), 0.5), np.array([1.0, 2.0]), [])
    assert et.main([str(rec), "--bundle", str(write_bundle(tmp_path / "b", 39))]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "state width 5, the bundle's norm 39" in err


def quat_state(q: list[float]) -> np.ndarray:
    """A 39-wide Meta-World state at the bundle's mean, with the object's quaternion q."""
    x = np.full(39, 0.5)
    x[7:11] = q
    return x


@pytest.mark.parametrize("q,turned,tilt", [
    ([1.0, 0.0, 0.0, 0.0], 0, 0),                                  # as it started
    ([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0], 90, 90),    # a quarter turn about x: on its side
    ([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)], 90, 0),     # a quarter turn about z: upright
    ([0.0, 1.0, 0.0, 0.0], 180, 180),                              # upside down
])
def test_object_pose(tmp_path, q, turned, tilt):
    state = np.stack([quat_state([1.0, 0.0, 0.0, 0.0]), quat_state(q)])
    rec = et.Recording("e", state, {"state_energy": np.array([1.0, 9.0])}, [], "")
    got = et.object_pose(rec, 1)
    assert got is not None
    assert got[0] == pytest.approx(turned, abs=1e-6) and got[1] == pytest.approx(tilt, abs=1e-6)


def test_object_pose_needs_a_metaworld_state():
    rec = et.Recording("e", np.full((2, 5), 0.5), {}, [], "")
    assert et.object_pose(rec, 1) is None


def test_summary_joins_outcomes_by_seed(tmp_path):
    ep = tmp_path / "recordings" / "bin-picking_4242"
    ep.mkdir(parents=True)
    side = [np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]
    state = np.stack([quat_state([1.0, 0.0, 0.0, 0.0]), quat_state(side), quat_state([1.0, 0.0, 0.0, 0.0])])
    write_recording(ep / "episode.hdf5", state, np.array([1.0, 400.0, 2.0]), None)
    res = tmp_path / "chunk.json"
    res.write_text(json.dumps({"task": "bin-picking", "results": [{"seed": 4242, "success": False, "end": "timeout"},
                                                                  {"seed": 4243, "success": True, "end": "success"}]}))
    # another task's chunk with the same seeds, as in one folder of level0_hours.sh
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"task": "button-press", "results": [{"seed": 4242, "success": True, "end": "success"}]}))
    peak = et.summarize(ep / "episode.hdf5", write_bundle(tmp_path / "b", 39), et.read_outcomes([res, other]))
    out = et.summary_line(peak)
    f = out.split()
    assert f[0] == "bin-picking_4242" and f[1] == "timeout" and "max state_energy 400 at row 1" in " ".join(out.split())
    assert "turned 90° tilt 90°" in " ".join(out.split())
    assert et.read_outcomes([other, res])[("bin-picking", 4242)] == "timeout"


@pytest.mark.parametrize("files,want", [
    ([{"results": [{"seed": 7, "end": "truncated"}]}], "truncated"),           # no task in the file: by seed
    ([{"task": "hammer", "results": [{"seed": 7, "end": "success"}]}], "?"),   # another task's episode
    ([], "?"),
])
def test_outcome_of_matches_task_and_seed(tmp_path, files, want):
    paths = []
    for i, f in enumerate(files):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(f))
    rec = tmp_path / "recordings" / "bin-picking_7" / "episode.hdf5"
    assert et.outcome_of(rec, et.read_outcomes(paths)) == want


def test_main_outcomes_error_is_one_line(tmp_path, capsys):
    rec = tmp_path / "ep.hdf5"
    write_recording(rec, np.full((2, 5), 0.5), np.array([1.0, 2.0]), [])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert et.main([str(rec), "--summary", "--outcomes", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("explain_trip.py: --outcomes:")


@pytest.mark.parametrize("spec,want", [
    ("", []),
    ("3", [3]),
    ("1-3,7", [1, 2, 3, 7]),
    (" 2 , 4-4 ", [2, 4]),
])
def test_parse_rows(spec, want):
    assert et.parse_rows(spec) == want


@pytest.mark.parametrize("spec,msg", [("a", "is not a row"), ("5-2", "ends before it starts"), ("1-", "is not a row")])
def test_parse_rows_refuses(spec, msg):
    with pytest.raises(ValueError, match=msg):
        et.parse_rows(spec)


def test_rows_table(tmp_path):
    side = [np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]
    state = np.stack([quat_state([1.0, 0.0, 0.0, 0.0]), quat_state(side)])
    rec = et.Recording("e", state, {"state_energy": np.array([1.5, 400.0])}, [], "")
    lines = et.rows_table(rec, [1]).splitlines()
    assert lines[1].split()[:4] == ["1", "400", "90°", "90°"]
    with pytest.raises(ValueError, match="row 2, the recording has 2"):
        et.rows_table(rec, [2])


def test_tally():
    peaks = [et.Peak("a", "success", 90, 2.0, 5, (1.0, 0.0), ("hand.z", 1.0)),
             et.Peak("b", "success", 90, 4.0, 5, (3.0, 0.0), ("hand.z", 1.0)),
             et.Peak("c", "truncated", 500, 6000.0, 9, (58.0, 58.0), ("obj.qy", 108.0)),
             et.Peak("d", "truncated", 500, 7.0, 9, (0.0, 0.0), ("hand.y", 2.0)),
             et.Peak("e", "truncated", 500)]                     # no state_energy: left out
    rows = et.tally(peaks).splitlines()[2:]
    assert rows == ["| success | 2 | 3 / 4 | 0 | – |", "| truncated | 2 | 3004 / 6000 | 1 | 6000 / 6000 |"]
