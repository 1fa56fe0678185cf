"""Wall stands in a bridge physics trace (``energyflow sim --trace`` / ``$ENERGYFLOW_SIM_TRACE``): per
episode, the longest run of steps the hand stood held on a bin's wall, the way the tracking kicks
begin (README, "The tracking kicks").

A step counts when a claw or pad touches a bin, the hand moved less than ``metres`` over the last
``steps`` steps, and it stands at least ``gap`` from its controller's target (the same stillness and
gap as ``energyflow.takeovers --held-steps``).

    .venv/bin/python -m research.interventions.stands TRACE.jsonl[.gz] ...
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np


def on_bin(contacts: Iterable[str]) -> bool:
    """Whether a claw or pad touches a bin (``rightclaw_it|binA``)."""
    return any(("claw" in c or "pad" in c) and "bin" in c for c in contacts)


def longest_stand(steps: List[dict], window: int = 5, metres: float = 0.01, gap: float = 0.025) -> int:
    """The longest run of consecutive steps (trace lines of one episode, in order) the hand stood
    held on a bin's wall."""
    run = best = 0
    for i, r in enumerate(steps):
        hand = np.asarray(r["hand"])
        still = i >= window and float(np.linalg.norm(hand - np.asarray(steps[i - window]["hand"]))) < metres
        held = float(np.linalg.norm(hand - np.asarray(r["target"]))) >= gap
        run = run + 1 if (still and held and on_bin(r["contacts"])) else 0
        best = max(best, run)
    return best


def start_object(steps: List[dict]) -> Optional[Tuple[float, float]]:
    """The object's x, y at the episode's first line that carries it (the cut traces keep it on the
    first steps only), or None."""
    for r in steps:
        if "object" in r:
            return float(r["object"][0]), float(r["object"][1])
    return None


def episodes(path: Path) -> Dict[Tuple[int, int], List[dict]]:
    """A trace's lines by episode: (order of first appearance, scene seed)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: Dict[Tuple[int, int], List[dict]] = {}
    last = None
    with opener(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            if last is None or r["seed"] != last[1] or r["episode_step"] <= out[last][-1]["episode_step"]:
                last = (len(out), r["seed"])
                out[last] = []
            out[last].append(r)
    return out


def main(argv: List[str]) -> None:
    for a in argv:
        eps = episodes(Path(a))
        hit = []
        for (_, seed), rs in eps.items():
            n = longest_stand(rs)
            if n:
                xy = start_object(rs)
                hit.append(f"scene {seed} {n} steps" + (f" (object at x {xy[0]:.3f}, y {xy[1]:.3f})" if xy else ""))
        print(f"{a}: {len(eps)} episodes, {len(hit)} with a wall stand" + (": " + ", ".join(hit) if hit else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
