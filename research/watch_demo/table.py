"""The watched-demo runs (scripts/watch_demo.sh summaries, tracked here) as one Markdown table.

    .venv/bin/python -m research.watch_demo.table research/watch_demo/*.json.gz

Summaries are read plain or gzipped (the tracked ones are gzipped); a run is named by its file name
without ``.json``/``.json.gz``.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import List, Sequence


def row(s: dict, run: str) -> str:
    """One summary's row; run names it (the summary's file name, which says what set the run apart)."""
    v = s["viewer"]
    lo, hi = s["success_ci95"]
    n = s.get("stops_while_watched", len(s["stops"]))
    kinds = [x["reason"] for x in s["stops"][:n]]
    stops = f"{n} ({', '.join(kinds)})" if kinds else f"{n}"
    check = []
    if "unlatched_after_s" in v:
        check.append(f"unlatched by a new level-0 episode in {v['unlatched_after_s']:.1f} s")
    if "level_L" in v:
        # Before watch.mjs unlatched a stopped demo first, a stop latched while
        # watched was still standing at the check: its "L stop" is that one.
        void = any(x.get("message") and x["message"][:60] in v["level_L"].get("reason", "") for x in s["stops"][:n])
        check.append("L: not measured (the watched stop still latched)" if void
                     else f"L stopped after {v['level_L']['stopped_after_s']:.1f} s")
    if "level_0_again" in v:
        check.append(f"moving again {v['level_0_again']['moving_after_s']:.1f} s after the click")
    # the bundle, where the summary names it (runs before it did used the task's state bundle)
    bundle = s.get("bundle") or f"metaworld-{s['task']}"
    # Every run before stop 70 ran its browser as root, free to raise its
    # own priority (scripts/watch_demo.sh); those summaries lack the key.
    browser = "root's browser" if s.get("browser_may_raise_priority", True) else "user's browser"
    t = s.get("ticks")
    late = f"{t['overruns']}/{t['ticks']}" if t else "–"
    return (f"| {run} | {bundle} | {s['minutes']:g} min, {s['busy_loops']} busy loops, {browser} | {v['frames_decoded']} ({v['fps']:.1f}/s) "
            f"| {s['successes']}/{s['episodes_level0']} [{lo * 100:.1f}–{hi * 100:.1f} %] | **{stops}** | {late} | {'; '.join(check) or '–'} |")


def read(path: Path) -> dict:
    """A summary, plain or gzipped (``.gz``)."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def run_name(path: Path) -> str:
    """The run's name: the file name less ``.json`` or ``.json.gz``."""
    return path.name.removesuffix(".gz").removesuffix(".json")


def table(paths: Sequence[Path]) -> List[str]:
    out = ["| run | bundle | watched | video frames decoded | level-0 episodes succeeded [Wilson 95 %] | stops while watched "
           "| ticks past their deadline | level check (page) |",
           "|---|---|---|---|---|---|---|---|"]
    for p in paths:
        out.append(row(read(Path(p)), run_name(Path(p))))
    return out


if __name__ == "__main__":
    print("\n".join(table(sorted(Path(a) for a in sys.argv[1:]))))
