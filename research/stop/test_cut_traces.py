"""research.stop.cut_traces: what it keeps and how it packs."""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from research.stop.cut_traces import KEEP, cut_line, pack, write_mode


def test_cut_line_keeps_the_replay_fields_only() -> None:
    row = {"episode": 2, "seed": 7, "tick": 5, "state": "RUNNING", "state_energy": 3.5, "tracking": None,
           "tracking_sum": 0.001, "camera_unseen": 1, "energy": 12.0, "chunk": 3}
    got = json.loads(cut_line(json.dumps(row)))
    assert got == {k: row[k] for k in KEEP}


#: --out's suffix, the tarfile mode it writes with, the file's first bytes, the mode that reads it
SUFFIXES = [
    ("t.tar.xz", "w:xz", b"\xfd7zXZ\x00", "r:xz"),
    ("t.tar.gz", "w:gz", b"\x1f\x8b", "r:gz"),
]


@pytest.mark.parametrize("name,mode,magic,read", SUFFIXES, ids=[s[0] for s in SUFFIXES])
def test_pack_keeps_summaries_and_cuts_traces(tmp_path: Path, name: str, mode: str, magic: bytes,
                                              read: str) -> None:
    d = tmp_path / "build" / "hours" / "assembly"
    d.mkdir(parents=True)
    (d / "assembly_1.json").write_text('{"episodes": 1}')
    (d / "assembly_1.jsonl").write_text(json.dumps({"tick": 1, "energy": 9, "state_energy": 2}) + "\n\n")
    (d / "assembly_1.log").write_text("not packed")
    out = tmp_path / name
    assert write_mode(out) == mode
    assert pack([d], out, tmp_path / "build") == 2
    assert out.read_bytes().startswith(magic)
    with tarfile.open(out, read) as tar:
        names = sorted(tar.getnames())
        assert names == ["hours/assembly/assembly_1.json", "hours/assembly/assembly_1.jsonl"]
        trace = tar.extractfile("hours/assembly/assembly_1.jsonl").read().decode()
    assert trace == '{"tick":1,"state_energy":2}\n'
