"""The unseen-colour count on level-0 driving: how near the policy's own episodes come to the stop.

    .venv/bin/python -m research.camera.unseen.driving build/hours-unseen-a build/hours-unseen-b [--threshold 4]

Reads research/stop/level0_hours.sh folders (each chunk's `--scores` JSONL,
with `camera_unseen` per tick: the smaller count of the two newest frames,
what safety watchdog.camera_unseen compares) and prints, over the running
ticks, the distribution of the count, each episode's largest, and how many
episodes would have stopped at the threshold.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Dict, Optional, Sequence

from energyflow.stats import wilson
from research.camera.critical import episodes


def largest_per_episode(folders: Sequence[Path]) -> tuple[Dict[int, int], Counter]:
    """Each finished chunk's episodes' largest running-tick count, by seed, and the counts of every tick."""
    per: Dict[int, int] = {}
    ticks: Counter = Counter()
    for seed, counts in episodes(folders, score="camera_unseen").items():
        ticks.update(int(n) for n in counts)
        per[seed] = int(max(counts))
    return per, ticks


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--threshold", type=int, default=4, help="safety watchdog.camera_unseen (4, sim's default)")
    a = p.parse_args(argv)
    per, ticks = largest_per_episode(a.folders)
    if not per:
        print("no running ticks with camera_unseen")
        return 1
    n = len(per)
    stops = sum(v >= a.threshold for v in per.values())
    lo, hi = wilson(stops, n)
    print(f"{sum(ticks.values())} running ticks, {n} episodes")
    print("| unseen pixels (two frames running) | ticks |")
    print("|---|---|")
    for k in sorted(ticks):
        print(f"| {k} | {ticks[k]} |")
    print(f"largest in an episode: {max(per.values())}; episodes at or over {a.threshold}: {stops}/{n} "
          f"[Wilson 95 %: {100 * lo:.1f}–{100 * hi:.1f} %]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
