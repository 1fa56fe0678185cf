"""The stop's fault table through the runtime: faults caught in time, and level L against level 0.

Reads ``energyflow sim eval --json`` summaries (and, for the AUROC, their
``--scores`` JSON lines) written by the commands in research/faults/README.md:

* ``<task>-<fault>.json``: an episode is caught when it ended in a safety stop
  within ``--within`` environment steps of the fault's onset (push and object:
  10 steps, 1 s at 10 Hz; zero_state: 5, 0.5 s);
* ``<task>-level0.jsonl`` / ``<task>-levelL.jsonl`` (``--observe-only``; or
  gzipped, ``.jsonl.gz``, as the grasping tasks' longer traces are kept): each
  episode's mean state score over its first 60 running ticks, and the AUROC
  of level L against level 0 on it (the probability that an L episode reads
  higher than a level-0 one).

    .venv/bin/python -m research.faults.table research/faults/results
"""
from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

from energyflow.stats import wilson

WITHIN = {"push": 10, "object": 10, "zero_state": 5,
          # the camera's faults (camera bundles, research/camera): 1 s at 10 Hz
          "occlusion": 10, "blackout": 10, "freeze": 10, "camera_shift": 10,
          "watch_shift": 10}


def caught(summary: dict, fault: str) -> Tuple[int, int, List[int]]:
    """Episodes stopped within WITHIN[fault] steps of the onset, of all, and each stop's delay in steps."""
    delays = []
    k = 0
    for r in summary["results"]:
        onset = r.get("fault_step", summary.get("fault_step", 0))
        if r["end"] == "safety_stop":
            d = r["steps"] - onset
            delays.append(d)
            k += 0 <= d <= WITHIN[fault]
    return k, len(summary["results"]), delays


def episode_means(path: Path, ticks: int = 60) -> List[float]:
    """Mean state score over each episode's first `ticks` running ticks with a score."""
    per: Dict[int, List[float]] = defaultdict(list)
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    for line in text.splitlines():
        t = json.loads(line)
        x = t.get("state_energy")
        if t["state"] == "RUNNING" and x is not None and len(per[t["episode"]]) < ticks:
            per[t["episode"]].append(x)
    return [sum(v) / len(v) for v in per.values() if v]


def auroc(neg: List[float], pos: List[float]) -> float:
    """P(pos > neg) + ½ P(tie)."""
    s = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return s / (len(pos) * len(neg))


def main(folder: str) -> None:
    d = Path(folder)
    print("| task | fault | caught in time [Wilson 95 %] | stop delay, steps (median) |")
    print("|---|---|---|---|")
    for p in sorted(d.glob("*-*.json")):
        task, fault = p.stem.rsplit("-", 1)
        if fault not in WITHIN:
            continue
        k, n, delays = caught(json.loads(p.read_text()), fault)
        lo, hi = wilson(k, n)
        med = sorted(delays)[len(delays) // 2] if delays else None
        print(f"| {task} | {fault} (within {WITHIN[fault]} steps) | {k}/{n} [{lo * 100:.0f}–{hi * 100:.0f} %] | {med} |")
    for p in sorted([*d.glob("*-levelL.jsonl"), *d.glob("*-levelL.jsonl.gz")]):
        task, ext = p.name.split("-levelL", 1)
        zero = d / f"{task}-level0{ext}"
        if zero.exists():
            neg, pos = episode_means(zero), episode_means(p)
            print(f"\n{task}: AUROC level L vs 0 (mean state score, first 60 ticks) = {auroc(neg, pos):.3f} "
                  f"({len(pos)} vs {len(neg)} episodes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "research/faults/results")
