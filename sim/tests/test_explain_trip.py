"""scripts/explain_trip.py: what the robot saw when the stop tripped, from a runtime recording."""
import importlib.util
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("explain_trip", ROOT / "scripts" / "explain_trip.py")
et = importlib.util.module_from_spec(spec)
sys.modules["explain_trip"] = et  # its dataclass looks its module up
spec.loader.exec_module(et)


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
