"""research.rtc.joins_null: the join statistic at pseudo-boundaries."""
from __future__ import annotations

import json
import math

from research.rtc import joins_null as J


def _trace(jump: float, episodes: int = 3, chunk: int = 8, ticks: int = 96) -> list[str]:
    """Commands along a slow sine, chunks of `chunk` ticks; each new chunk starts `jump` off in x."""
    out = []
    for e in range(episodes):
        for t in range(ticks):
            c = t // chunk
            x = math.sin(0.05 * t + e) + (jump if c % 2 else 0.0)
            out.append(json.dumps({"episode": e, "tick": t, "state": "RUNNING", "chunk": c, "chunk_first": t % chunk == 0,
                                   "command": None if t == 0 else [x, 0.0, 0.0]}))
        out.append(json.dumps({"episode": e, "tick": ticks, "state": "STOPPED"}))
    return out


def test_smooth_chunks_score_as_their_pseudo_boundaries():
    s = J.summarize(J.episodes(_trace(0.0)).values())
    assert s["episodes"] == 3 and s["offset"] == 4 and s["chunk_run_median"] == 8
    assert abs(s["largest_boundary_ratio"] - s["largest_pseudo_ratio"]) < 0.2
    assert s["median_boundary_ratio"] < 1.2


def test_a_jump_at_every_boundary_shows_against_the_pseudo_boundaries():
    s = J.summarize(J.episodes(_trace(0.3)).values())
    assert s["largest_boundary_ratio"] > 5 * s["largest_pseudo_ratio"]
    assert s["median_boundary_ratio"] > 5


def test_main_prints_a_row_per_file(tmp_path, capsys):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(_trace(0.3)) + "\n")
    assert J.main([str(f)]) == 0
    assert "| t | 3 | 8 |" in capsys.readouterr().out


def test_pack_keeps_what_it_reads(tmp_path, capsys):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(_trace(0.3)) + "\n")
    assert J.main([str(f), "--pack", str(tmp_path / "t.jsonl.gz")]) == 0
    capsys.readouterr()
    J.main([str(f)])
    plain = capsys.readouterr().out
    J.main([str(tmp_path / "t.jsonl.gz")])
    assert capsys.readouterr().out == plain
