"""Where level-0 state scores run high: per-episode critical values of the 2-of-5 rule.

    .venv/bin/python -m research.camera.critical build/hours-cam build/hours-cam2

Reads research/stop/level0_hours.sh folders (each chunk's `--scores` JSONL
with its `--json` summary beside it) and prints, for the rule "n of the
last m fresh scores over T", each episode's critical value (the lowest T
at which it trips: the n-th largest score of its worst window), the
largest ones with the running tick where they fall, the quantiles, the
chunks' episodes that succeeded, and the range of the chunks' inference
p50 and p90. research/camera/hours/README.md
quotes it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from energyflow.stats import wilson


def episodes(folders: Sequence[Path], score: str = "state_energy") -> Dict[int, List[float]]:
    """The fresh running-tick scores of every finished chunk's episodes, by seed."""
    out: Dict[int, List[float]] = {}
    for d in folders:
        for f in sorted(Path(d).glob("*.jsonl")):
            if not f.with_suffix(".json").exists():
                continue  # an unfinished chunk
            for line in f.open():
                r = json.loads(line)
                if r["state"] == "RUNNING" and r.get(score) is not None:
                    out.setdefault(int(r["seed"]), []).append(float(r[score]))
    return out


def critical(scores: Sequence[float], n: int = 2, m: int = 5) -> Tuple[float, int]:
    """The episode's critical value and the index of the tick it is reached at."""
    best, at = float("-inf"), -1
    for i in range(len(scores)):
        w = sorted(scores[max(0, i - m + 1): i + 1], reverse=True)
        if len(w) >= n and w[n - 1] > best:
            best, at = w[n - 1], i
    return best, at


def summaries(folders: Sequence[Path]) -> Iterator[Dict[str, Any]]:
    """The ``--json`` summary beside each chunk's trace, for the chunks that finished."""
    for d in folders:
        for f in Path(d).glob("*.jsonl"):
            summary = f.with_suffix(".json")
            if summary.exists():
                yield json.loads(summary.read_text())


def latency_range(folders: Sequence[Path]) -> Optional[Dict[str, Tuple[float, float]]]:
    """Smallest and largest inference p50 and p90 (ms) over the finished chunks'
    summaries that have them (the demo's --scores summary has none): None if none do."""
    p50, p90 = [], []
    for s in summaries(folders):
        if s.get("inference_p50_ms") is not None and s.get("inference_p90_ms") is not None:
            p50.append(s["inference_p50_ms"])
            p90.append(s["inference_p90_ms"])
    if not p50:
        return None
    return {"p50": (min(p50), max(p50)), "p90": (min(p90), max(p90))}


def successes(folders: Sequence[Path]) -> Tuple[int, int]:
    """Episodes and successes over the finished chunks' summaries."""
    n = ok = 0
    for s in summaries(folders):
        n, ok = n + int(s.get("episodes", 0)), ok + int(s.get("successes", 0))
    return n, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--seeds", type=int, nargs="*", default=[], help="also print these episodes' critical value and largest score")
    a = ap.parse_args()
    eps = episodes(a.folders)
    rows = sorted(((*critical(v), len(v), s) for s, v in eps.items()), reverse=True)
    print(f"{len(rows)} episodes; 2-of-5 critical values, the largest {a.top}:")
    last = 0
    for c, at, n, seed in rows[: a.top]:
        where = "last running tick" if at == n - 1 else f"running tick {at} of {n}"
        last += at == n - 1
        print(f"  {c:7.3f}  seed {seed}  {where}")
    print(f"{last} of the largest {a.top} on the episode's last running tick")
    for seed in a.seeds:
        if seed in eps:
            print(f"  seed {seed}: critical value {critical(eps[seed])[0]:.3f}, largest score {max(eps[seed]):.3f}")
        else:
            print(f"  seed {seed}: not in these folders")
    q = np.quantile([r[0] for r in rows], [0.5, 0.9, 0.99])
    print(f"median {q[0]:.2f}, 90th percentile {q[1]:.2f}, 99th {q[2]:.2f}, largest {rows[0][0]:.3f}")
    n, ok = successes(a.folders)
    if n:
        lo, hi = wilson(ok, n)
        print(f"{ok} of {n} episodes succeeded [Wilson 95 % {100 * lo:.1f}–{100 * hi:.1f} %] (the chunks' summaries)")
    lat = latency_range(a.folders)
    if lat is None:
        print("no chunk summary records its inference latency (the demo's --scores summary does not)")
    else:
        print(f"chunks' inference p50 {lat['p50'][0]:.0f}–{lat['p50'][1]:.0f} ms, p90 {lat['p90'][0]:.0f}–{lat['p90'][1]:.0f} ms")


if __name__ == "__main__":
    main()
