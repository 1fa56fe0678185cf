#!/usr/bin/env python3
"""What the energy stop did, cell by cell, from `energyflow sim eval` cells.

    .venv/bin/python -m research.stop.stop_outcomes --negatives build/eval-den/energyflow_drawer-open_0_K20 \\
        build/eval-den20/energyflow_drawer-open_L_K20 build/eval-den20/energyflow_drawer-open_0_K20_push ...

For each cell (the path without .json/.jsonl): success, energy stops, episodes
never armed (auto-start refused on every tick: the stop kept the arm from
moving), the stop's delay after the fault step, and the AUROC of the
per-episode mean energy over the first WINDOW ticks with a score (any gate
state, so episodes that never armed count too) against the --negatives cell
(level 0), with its 95 % interval (Hanley and McNeil's standard error).
scripts/eval_report.py's tables use RUNNING ticks only and a fixed threshold; with
closed-loop bands and auto-start refusals this is the view that counts every
episode.
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

WINDOW = 60  # ticks: 3 s at 20 Hz


def window_means(jsonl: Path, start: Dict[int, int], window: int = WINDOW, score: str = "energy") -> List[float]:
    """Per episode: mean ``score`` of the first ``window`` scored ticks at or after start[episode]."""
    vals: Dict[int, List[float]] = defaultdict(list)
    for line in jsonl.read_text().splitlines():
        t = json.loads(line)
        ep, e = int(t["episode"]), t.get(score)
        if e is None or int(t["tick"]) < start.get(ep, 0) or len(vals[ep]) >= window:
            continue
        vals[ep].append(float(e))
    return [sum(v) / len(v) for v in vals.values() if v]


def auroc(neg: List[float], pos: List[float]) -> Optional[float]:
    if not neg or not pos:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def auroc_interval(a: float, n_neg: int, n_pos: int) -> tuple:
    """95 % interval of an AUROC from n_neg negatives and n_pos positives: Hanley and McNeil
    (1982), a ± 1.96 SE, clipped to [0, 1]. At a = 1 the SE is 0; the interval then reads
    [1, 1], which says only that no pair was misordered in these episodes."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    se = math.sqrt(max(var, 0.0))
    return max(0.0, a - 1.96 * se), min(1.0, a + 1.96 * se)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="+", help="cell paths without .json (energyflow sim eval --json/--scores)")
    ap.add_argument("--negatives", required=True, help="the level-0 cell the AUROC compares with")
    ap.add_argument("--score", default="energy", choices=["energy", "centered_energy", "state_energy"],
                    help="the per-tick score the AUROC reads (the stop's own trips are whatever it watched)")
    a = ap.parse_args()
    neg_base = Path(a.negatives)
    neg_summary = json.loads(neg_base.with_suffix(".json").read_text())
    print("| cell | episodes | success | energy stops | never armed | stopped or kept from starting | "
          f"stop delay after the fault (ticks) | AUROC vs level 0 (mean {a.score}, first {WINDOW} scored ticks) |")
    print("|---|---|---|---|---|---|---|---|")
    for base in [neg_base] + [Path(c) for c in a.cells]:
        s = json.loads(base.with_suffix(".json").read_text())
        rs = s["results"]
        stops = [r for r in rs if r.get("stop_kind") == "energy"]
        never = [r for r in rs if r.get("end") == "never_armed"]
        fault = bool(rs and rs[0].get("fault"))
        delays = sorted(r["stop_tick"] - r.get("fault_step", 0) for r in stops) if fault else []
        # faults: the window starts at the fault step, on both sides
        fstep = rs[0].get("fault_step", 0) if fault else 0
        neg = window_means(neg_base.with_suffix(".jsonl"), {int(r["episode"]): fstep for r in neg_summary["results"]}, score=a.score)
        pos = window_means(base.with_suffix(".jsonl"), {int(r["episode"]): fstep for r in rs}, score=a.score)
        au = None if base == neg_base else auroc(neg, pos)
        ci = "" if au is None else " [%.2f–%.2f]" % auroc_interval(au, len(neg), len(pos))
        print(f"| {base.name} | {len(rs)} | {sum(r['success'] for r in rs)} | {len(stops)} | {len(never)} | "
              f"{len(stops) + len(never)}/{len(rs)} | {', '.join(map(str, delays)) or '–'} | "
              f"{'–' if au is None else f'{au:.3f}{ci}'} |")


if __name__ == "__main__":
    main()
