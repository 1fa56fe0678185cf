"""The camera bundles' evaluation table, from tracked `energyflow sim eval --json` summaries.

For each summary: success with its Wilson 95 % interval, the far half of the
scenes (the 50 % of seeds whose object starts farthest from the hand, in
the horizontal plane; the first camera bundle failed exactly there), the
stops and the inference latency as the run measured it.

    python -m research.camera.table research/camera/results/*.json
"""
from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from energyflow.stats import wilson

#: the object's xyz in Meta-World's 39-wide observation
OBJECT = slice(4, 7)


@lru_cache(maxsize=None)
def start_distances(task: str, level: str, seeds: Tuple[int, ...]) -> Dict[int, float]:
    """Horizontal distance from the hand to the object at each seed's reset."""
    from sim.world import World  # mujoco: only when a table needs the scenes

    w = World(task, camera_size=None)
    try:
        out = {}
        for s in seeds:
            obs = w.reset(level=level, seed=s)
            out[s] = float(np.linalg.norm(obs[OBJECT][:2] - obs[0:2]))
        return out
    finally:
        w.close()


def row(path: Path) -> Dict[str, object]:
    d = json.loads(path.read_text())
    res: List[dict] = d["results"]
    seeds = tuple(int(r["seed"]) for r in res)
    dist = start_distances(d["task"], str(d["level"]), seeds)
    far_cut = float(np.median([dist[s] for s in seeds]))
    far = [r for r in res if dist[int(r["seed"])] > far_cut]
    k, n = int(d["successes"]), int(d["episodes"])
    lo, hi = wilson(k, n)
    fk = sum(bool(r["success"]) for r in far)
    trips = ", ".join(f"{kind} {c}" for kind, c in sorted((d.get("trips") or {}).items())) or "none"
    faults = sorted({r.get("fault", "") for r in res} - {""})
    return {"run": path.stem, "bundle": Path(d["bundle"]).name, "level": d["level"], "fault": ",".join(faults) or "-",
            "watch": "observe only" if d.get("observe_only") else ",".join(d.get("watch") or []),
            "success": f"{k}/{n} = {100 * k / n:.0f} % [{100 * lo:.0f}–{100 * hi:.0f}]",
            "far half": f"{fk}/{len(far)}", "stops": trips,
            "inference p50/p90 ms": f"{d['inference_p50_ms']:.0f} / {d['inference_p90_ms']:.0f}"}


def table(paths: Sequence[Path]) -> str:
    rows = [row(p) for p in paths]
    cols = list(rows[0].keys())
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m research.camera.table", description=__doc__.splitlines()[0])
    p.add_argument("summaries", nargs="+", type=Path)
    a = p.parse_args(argv)
    print(table(sorted(a.summaries)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
