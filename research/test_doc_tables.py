"""research/doc_tables.py: which documented commands are taken, and every one runs."""
from __future__ import annotations

import pytest

from research import doc_tables


@pytest.mark.parametrize("text, want", [
    ("```sh\n.venv/bin/python -m research.rtc.table research/rtc/results/*.json\n```",
     [("research.rtc.table", "research/rtc/results/*.json")]),
    ("python -m research.faults.table research/faults/results \\\n    research/camera/faults\n",
     [("research.faults.table", "research/faults/results research/camera/faults")]),
    ("R=research/a\nR=research/b\npython -m research.x.table $R/*.json.gz\n",
     [("research.x.table", "research/b/*.json.gz")]),
    ("python -m research.x.table --json research/out.json research/in/*.json", []),
    ("python -m research.x.table --out=research/o research/in/*.json", []),
    ("python -m research.x.table build/eval/*.json", []),
    ("python -m research.stop.explain_trip FILE", []),
    ("python -m research.stop.explain_trip REC/*/*.hdf5", []),
    ("python -m research.x.table research/$t/*.json", []),
    ("python -m research.x.table --list", []),
    ("`python -m research.x.table research/a.json`; then `python -m research.y.table research/b.json`",
     [("research.x.table", "research/a.json"), ("research.y.table", "research/b.json")]),
])
def test_commands_taken_and_left_out(text: str, want: list) -> None:
    assert [(c.module, c.args) for c in doc_tables.commands(text)] == want


def test_finds_the_docs_tables() -> None:
    found = doc_tables.all_commands()
    sources = {c.source for c in found}
    assert "docs/evaluation.md" in sources and "docs/engines.md" in sources
    assert len(found) >= 30


@pytest.mark.parametrize("command", doc_tables.all_commands(), ids=lambda c: f"{c.source}:{c.module}")
def test_documented_command_runs(command: doc_tables.Command) -> None:
    r = doc_tables.run(command)
    assert r.returncode == 0, f"{command.source}: `{command.line()}` exited {r.returncode}:\n{r.stderr[-2000:]}"
