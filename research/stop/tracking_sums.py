"""The tracking monitor's sustained rule on recorded traces: per group of
`sim eval --scores` traces, the largest one-step tracking difference of any
running tick and the largest CUSUM max(0, S + x − drift) reached, in mm
(docs/safety.md, "Sustained"; the pushes' detection is
`research.stop.stop_rules --score tracking --rule cusum:DRIFT:1:0:LIMIT`).

    .venv/bin/python -m research.stop.tracking_sums --drift 0.006 \\
        'drawer-open=build/tracking/drawer-open-level0.jsonl' 'camera hour=build/hours-cam*/*.jsonl'

A group is NAME=GLOB; the tracking stops are counted from the `--json` summaries beside the
traces ("–" when one is missing). The sum restarts wherever a tick is not RUNNING or has
no tracking value (the monitor's model restarted), as the gate's does.
"""
from __future__ import annotations

import argparse
import glob
import json
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

Tick = Tuple[str, Optional[float]]


def episodes(path: str) -> Dict[int, List[Tick]]:
    """Per episode, its ticks in order: (gate state, tracking difference or None)."""
    eps: Dict[int, List[Tick]] = defaultdict(list)
    with open(path) as f:
        for raw in f:
            t = json.loads(raw)
            eps[int(t["episode"])].append((t["state"], t.get("tracking")))
    return dict(eps)


def peaks(ticks: Iterable[Tick], drift: float) -> Tuple[float, float, int]:
    """(largest one-step difference, largest sum, running ticks) of one episode."""
    s = one = top = 0.0
    n = 0
    for state, x in ticks:
        if state != "RUNNING" or x is None:
            s = 0.0
            continue
        n += 1
        s = max(0.0, s + x - drift)
        one, top = max(one, x), max(top, s)
    return one, top, n


def runtime_peak(path: str) -> Optional[float]:
    """The largest sum the runtime's own sustained rule reached on a running tick (`tracking_sum`;
    it also discounts a held-back arm's catching up, which the one-step norms cannot), None when the
    traces do not carry it."""
    top: Optional[float] = None
    with open(path) as f:
        for raw in f:
            t = json.loads(raw)
            v = t.get("tracking_sum")
            if t["state"] == "RUNNING" and v is not None:
                top = max(top or 0.0, float(v))
    return top


def tracking_stops(path: str) -> Optional[int]:
    """The episodes the tracking monitor stopped, from the `--json` summary beside the traces
    (PATH less its final l), None when there is none."""
    try:
        with open(path[:-1] if path.endswith(".jsonl") else path + ".json") as f:
            summary = json.load(f)
    except FileNotFoundError:
        return None
    return sum(r.get("stop_kind") == "tracking" for r in summary.get("results", []))


def table(groups: Sequence[Tuple[str, str]], drift: float) -> List[str]:
    out = [f"| traces | episodes | running ticks | largest one-step difference (mm) | largest sum beyond {drift * 1e3:g} mm a step (mm) "
           "| the runtime's largest sum (mm) | tracking stops |",
           "|---|---|---|---|---|---|---|"]
    for name, pattern in groups:
        files = sorted(glob.glob(pattern))
        if not files:
            raise SystemExit(f"tracking_sums: {name}: no file matches {pattern}")
        rows = [peaks(t, drift) for f in files for t in episodes(f).values()]
        rt = [v for v in (runtime_peak(f) for f in files) if v is not None]
        stops = [tracking_stops(f) for f in files]
        nstops = "–" if None in stops else str(sum(s for s in stops if s is not None))
        out.append(f"| {name} | {len(rows)} | {sum(r[2] for r in rows)} | {max(r[0] for r in rows) * 1e3:.1f} "
                   f"| {max(r[1] for r in rows) * 1e3:.1f} | {f'{max(rt) * 1e3:.1f}' if rt else '–'} | {nstops} |")
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("groups", nargs="+", help="NAME=GLOB of --scores JSONL files")
    ap.add_argument("--drift", type=float, default=0.006, help="the rule's drift per step, m (0.006)")
    a = ap.parse_args(argv)
    groups = []
    for g in a.groups:
        name, sep, pattern = g.partition("=")
        if not sep:
            ap.error(f"{g!r}: want NAME=GLOB")
        groups.append((name, pattern))
    print("\n".join(table(groups, a.drift)))


if __name__ == "__main__":
    main()
