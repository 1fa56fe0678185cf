"""The camera bundles' level-0 driving with their watch cameras: what the watch camera's unseen-colour count read.

    research/stop/level0_hours.sh --out build/wc-hammer-a --hours 0.5 --seed 210000 --tasks hammer \\
        --bundle bundles/metaworld-hammer-camera --rate 20            # and lane b, seed 215000
    .venv/bin/python -m research.camera.watch_hours build/wc-hammer-a build/wc-hammer-b \\
        --json research/camera/watch-hours/hammer.json
    .venv/bin/python -m research.camera.watch_hours --table research/camera/watch-hours/*.json

Reads each lane's chunks (`level0_hours.sh`: DIR/<task>_<seed>.json and .jsonl)
and keeps what the watch camera's stop needs, small enough to track: per
chunk the episodes, successes, running ticks, the stops by kind, and the
histogram of `camera_unseen` (the larger of the two cameras' two-frame
counts) over the running ticks. The traces themselves stay in build/ (2 MB
an hour); the command above regenerates them.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any, Dict, List, Optional, Sequence, Tuple

from energyflow.stats import wilson


def chunk(summary: Path) -> Dict[str, Any]:
    """One chunk: its summary's counts and its trace's running ticks and unseen counts."""
    s = json.loads(summary.read_text())
    ticks, hist = 0, Counter()
    with open(summary.with_suffix(".jsonl")) as f:
        for line in f:
            d = json.loads(line)
            if d.get("state") != "RUNNING":
                continue
            ticks += 1
            if "camera_unseen" in d:
                hist[int(d["camera_unseen"])] += 1
    stops = Counter(r["stop_kind"] for r in s["results"] if r.get("stop_kind"))
    return {"chunk": summary.stem, "bundle": s["bundle"], "task": s["task"], "rate_hz": s["rate_hz"],
            "episodes": s["episodes"], "successes": s["successes"], "inference_p50_ms": s["inference_p50_ms"],
            "running_ticks": ticks, "stops": dict(stops), "camera_unseen": {str(k): v for k, v in sorted(hist.items())}}


def lanes(dirs: Sequence[Path]) -> Dict[str, Any]:
    chunks: List[Dict[str, Any]] = []
    for d in dirs:
        got = sorted(d.glob("*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[-1]))
        if not got:
            raise SystemExit(f"watch_hours: no chunk summaries in {d}")
        for p in got:
            if not p.with_suffix(".jsonl").exists():
                raise SystemExit(f"watch_hours: {p} has no trace beside it")
            c = chunk(p)
            c["lane"] = d.name
            chunks.append(c)
    if len({(c["bundle"], c["task"], c["rate_hz"]) for c in chunks}) != 1:
        raise SystemExit("watch_hours: the lanes drove different bundles, tasks or rates")
    return {"bundle": chunks[0]["bundle"], "task": chunks[0]["task"], "rate_hz": chunks[0]["rate_hz"], "chunks": chunks}


def row(name: str, r: Dict[str, Any]) -> str:
    cs = r["chunks"]
    n = sum(c["episodes"] for c in cs)
    k = sum(c["successes"] for c in cs)
    ticks = sum(c["running_ticks"] for c in cs)
    hist: Counter = Counter()
    stops: Counter = Counter()
    for c in cs:
        hist.update({int(u): v for u, v in c["camera_unseen"].items()})
        stops.update(c["stops"])
    lo, hi = wilson(k, n)
    read = sum(hist.values())
    most = max(hist) if hist else None
    st = ", ".join(f"{s} {v}" for s, v in sorted(stops.items())) or "none"
    plans = median(c["inference_p50_ms"] for c in cs)
    return (f"| {name} | {r['task']} | {len({c['lane'] for c in cs})} | {ticks / r['rate_hz'] / 3600:.3f} | {k}/{n} [{100 * lo:.1f}–{100 * hi:.1f} %] | "
            f"{st} | {read} of {ticks} | {most if most is not None else '–'} | {plans:.0f} |")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="*", type=Path, help="level0_hours.sh lanes of one bundle")
    p.add_argument("--json", type=Path, help="write the lanes' compact summary here")
    p.add_argument("--table", nargs="*", type=Path, default=None, help="print the table of these compact summaries")
    a = p.parse_args(argv)
    rows: List[Tuple[str, Dict[str, Any]]] = []  # (the summary's name, the summary)
    if a.dirs:
        r = lanes(a.dirs)
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps(r, indent=1) + "\n")
        rows.append((a.json.stem if a.json else " ".join(d.name for d in a.dirs), r))
    for f in a.table or []:
        rows.append((f.stem, json.loads(f.read_text())))
    if not rows:
        p.error("give lane folders, or --table with compact summaries")
    print("| summary | task | lanes | running hours | episodes succeeded [Wilson 95 %] | stops | ticks with a watch count | "
          "most unseen pixels, two frames running | plans p50, median chunk (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(row(name, r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
