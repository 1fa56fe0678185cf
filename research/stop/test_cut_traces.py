"""research.stop.cut_traces: what it keeps and how it packs."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from research.stop.cut_traces import KEEP, cut_line, pack


def test_cut_line_keeps_the_replay_fields_only() -> None:
    row = {"episode": 2, "seed": 7, "tick": 5, "state": "RUNNING", "state_energy": 3.5, "tracking": None,
           "tracking_sum": 0.001, "camera_unseen": 1, "energy": 12.0, "chunk": 3}
    got = json.loads(cut_line(json.dumps(row)))
    assert got == {k: row[k] for k in KEEP}


def test_pack_keeps_summaries_and_cuts_traces(tmp_path: Path) -> None:
    d = tmp_path / "build" / "hours" / "assembly"
    d.mkdir(parents=True)
    (d / "assembly_1.json").write_text('{"episodes": 1}')
    (d / "assembly_1.jsonl").write_text(json.dumps({"tick": 1, "energy": 9, "state_energy": 2}) + "\n\n")
    (d / "assembly_1.log").write_text("not packed")
    out = tmp_path / "t.tar.gz"
    assert pack([d], out, tmp_path / "build") == 2
    with tarfile.open(out) as tar:
        names = sorted(tar.getnames())
        assert names == ["hours/assembly/assembly_1.json", "hours/assembly/assembly_1.jsonl"]
        trace = tar.extractfile("hours/assembly/assembly_1.jsonl").read().decode()
    assert trace == '{"tick":1,"state_energy":2}\n'
