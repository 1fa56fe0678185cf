#!/usr/bin/env python3
"""What the shipped stop would have done in cells run with it observing only.

    .venv/bin/python -m research.stop.shift_replay build/eval-distill-obs/energyflow_bin-picking_{S,M,L}_K10 [--json FILE]

`scripts/evaluate.sh --observe` runs a cell with the energy stop observing only (sim eval
--observe-only): every score is traced per tick and nothing ends an episode on it, so the
cell measures the policy through the runtime. This replays, on those traces, the rule the
shipped bundle's stop applies by default (2 of 5 fresh state scores above its threshold:
the closed-loop calibration, else the state term's held-out q99.9; false_trips.py's
shipped_threshold) and prints, per cell: the successes as run, the episodes whose start
state already scores above the threshold (auto-start would wait for it to fall: the arm
would most likely never start), the episodes the rule trips while running, and the
successes the stop would have cost. A trip latches until an operator's reset, so a tripped
episode is counted as lost. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Dict, List

from research.stop import false_trips as ft
from research.stop import stop_rules as sr


def first_fresh(lines: List[sr.Line]) -> float:
    """The first finite score of a trace, in any gate state (the start state's score); nan if none."""
    for _, x in lines:
        if x is not None and math.isfinite(x):
            return x
    return math.nan


def replay(cell: str, threshold: float) -> Dict:
    """Per-cell counts of the 2-of-5 rule at threshold on the cell's state_energy traces."""
    results = json.loads(Path(cell + ".json").read_text())["results"]
    ok = {int(r["episode"]): bool(r["success"]) for r in results}
    _, make = sr.parse_rule(f"n_of_m:2:5:{threshold!r}")
    out = {"episodes": 0, "successes": 0, "start_above": 0, "tripped": 0, "successes_lost": 0}
    for ep, lines in sr.load(cell, "state_energy").items():
        at, _ = sr.first_trip(lines, make)
        above = first_fresh(lines) > threshold
        out["episodes"] += 1
        out["successes"] += ok.get(ep, False)
        out["start_above"] += above
        out["tripped"] += at is not None or above
        out["successes_lost"] += ok.get(ep, False) and (at is not None or above)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cells", nargs="+", help="cells run with --observe: path without .json/.jsonl")
    ap.add_argument("--json", help="write the table's numbers here too")
    a = ap.parse_args()
    rows = []
    print("| cell | threshold | success as run (stop observing) | start state above | "
          "stopped or kept from starting | success with the stop | successes the stop costs |")
    print("|---|---|---|---|---|---|---|")
    for c in a.cells:
        c = c.removesuffix(".json").removesuffix(".jsonl")
        if not Path(c + ".jsonl").exists() or not Path(c + ".json").exists():
            raise SystemExit(f"shift_replay.py: {c}: no .jsonl and .json (run it with scripts/evaluate.sh --observe)")
        task = sr.task_of(c)
        thr, source = ft.shipped_threshold(task, json.loads(Path(c + ".json").read_text()).get("rate_hz"))
        r = replay(c, thr)
        n = r["episodes"]
        kept = r["successes"] - r["successes_lost"]
        print(f"| {Path(c).name} | {thr:.4g} ({source}) | {r['successes']}/{n} | {r['start_above']}/{n} | "
              f"{r['tripped']}/{n} | {kept}/{n} | {r['successes_lost']} |")
        rows.append({"cell": c, "task": task, "threshold": thr, "source": source, **r})
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
