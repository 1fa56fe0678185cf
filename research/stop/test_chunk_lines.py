"""Tests for research.stop.chunk_lines: packing level-0 chunks and their table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.stop import chunk_lines


def summary(rate: float, results: list[dict]) -> dict:
    """A ``sim eval --json`` summary with the fields chunk_lines reads."""
    return {"rate_hz": rate, "episodes": len(results), "successes": sum(r["success"] for r in results),
            "inference_p50_ms": 20.0 + len(results), "inference_p90_periods": 0.5 + len(results) / 10,
            "results": results}


def ep(seed: int, end: str, steps: int, stop_kind: str | None = None) -> dict:
    r = {"seed": seed, "success": end == "success", "steps": steps, "end": end}
    if stop_kind:
        r["stop_kind"] = stop_kind
    return r


@pytest.mark.parametrize("result,want", [
    (ep(1, "success", 100), "success"),
    (ep(2, "truncated", 500), "truncated"),
    (ep(3, "safety_stop", 54, "tracking"), "stop:tracking"),
    (ep(4, "safety_stop", 54), "stop:unknown"),
])
def test_end_of(result: dict, want: str) -> None:
    assert chunk_lines.end_of(result) == want


def test_pack_and_table(tmp_path: Path) -> None:
    a, b = tmp_path / "lane1", tmp_path / "lane2"
    a.mkdir()
    b.mkdir()
    (a / "bin-picking_100.json").write_text(json.dumps(summary(20, [ep(100, "success", 200), ep(101, "safety_stop", 54, "tracking")])))
    (b / "bin-picking_200.json").write_text(json.dumps(summary(20, [ep(200, "success", 100), ep(201, "truncated", 500),
                                                                    ep(202, "success", 146)])))
    (b / "bin-picking_210.jsonl").write_text("{}\n")  # a trace: not a chunk summary
    out = tmp_path / "chunks.jsonl.gz"
    assert chunk_lines.pack(out, "warm", [a, b]) == 2
    rows = chunk_lines.read([out])
    assert [r["chunk"] for r in rows] == ["bin-picking_100", "bin-picking_200"]
    assert rows[0]["failed_seeds"] == {"101": "stop:tracking"}
    assert rows[1]["failed_seeds"] == {"201": "truncated"}
    assert rows[1]["ends"] == {"success": 2, "truncated": 1}
    t = chunk_lines.table(rows).splitlines()
    assert len(t) == 3
    # 3 of 5 succeeded; 1000 steps at 20 Hz; p50 median of 22 and 23 ms
    assert "| warm | 2 | 5 | stop:tracking 1, success 3, truncated 1 | 3/5 [23.1–88.2 %] | 0.014 | 22 / 0.75 |" == t[2]


def test_cli_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        chunk_lines.main(["--pack", str(tmp_path / "o.jsonl.gz"), str(tmp_path)])  # no --label
    assert "--label" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        chunk_lines.main(["--pack", str(tmp_path / "o.jsonl.gz"), "--label", "x", str(tmp_path / "nope")])
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        chunk_lines.main(["--pack", str(tmp_path / "o.jsonl.gz"), "--label", "x", str(tmp_path)])
    assert "no finished chunk" in capsys.readouterr().err
