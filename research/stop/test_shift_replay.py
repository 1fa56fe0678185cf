"""research/stop/shift_replay.py: the shipped stop replayed on traces recorded with it observing only."""
import json
from pathlib import Path

import pytest

from research.stop import shift_replay as sh


def write_cell(base: Path, traces, successes) -> str:
    """A cell as sim eval --observe-only writes it: per-tick JSONL and the summary's results."""
    lines = []
    for ep, trace in enumerate(traces):
        for tick, (state, x) in enumerate(trace, 1):
            lines.append(json.dumps({"episode": ep, "tick": tick, "state": state, "state_energy": x}))
    Path(str(base) + ".jsonl").write_text("\n".join(lines) + "\n")
    res = [{"episode": i, "success": s} for i, s in enumerate(successes)]
    Path(str(base) + ".json").write_text(json.dumps({"results": res}))
    return str(base)


@pytest.mark.parametrize("name,trace,success,want", [
    # a quiet episode: nothing trips, the success stands
    ("quiet", [("STOPPED", 1.0)] + [("RUNNING", 1.0)] * 10, True,
     {"start_above": 0, "tripped": 0, "successes_lost": 0}),
    # the start state already scores above: auto-start would wait, the success is lost
    ("start above", [("STOPPED", None), ("STOPPED", 9.0)] + [("RUNNING", 1.0)] * 10, True,
     {"start_above": 1, "tripped": 1, "successes_lost": 1}),
    # one tick above is not 2 of 5
    ("one spike", [("STOPPED", 1.0)] + [("RUNNING", 1.0)] * 3 + [("RUNNING", 9.0)] + [("RUNNING", 1.0)] * 5, True,
     {"start_above": 0, "tripped": 0, "successes_lost": 0}),
    # two of five above while running: a trip, in an episode that failed anyway
    ("trip in a failure", [("STOPPED", 1.0)] + [("RUNNING", 1.0)] * 3 + [("RUNNING", 9.0), ("RUNNING", 1.0), ("RUNNING", 9.0)], False,
     {"start_above": 0, "tripped": 1, "successes_lost": 0}),
    # scores above before arming do not feed the running rule, only the start check
    ("stale nan", [("STOPPED", float("nan")), ("STOPPED", 1.0)] + [("RUNNING", None)] * 4, True,
     {"start_above": 0, "tripped": 0, "successes_lost": 0}),
])
def test_replay(tmp_path, name, trace, success, want):
    cell = write_cell(tmp_path / "energyflow_button-press_S_K20", [trace], [success])
    got = sh.replay(cell, 5.0)
    assert got["episodes"] == 1 and got["successes"] == int(success), name
    assert {k: got[k] for k in want} == want, name
