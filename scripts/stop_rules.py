#!/usr/bin/env python3
"""Replay stop rules on the per-tick scores of `energyflow sim eval` cells, offline.

    .venv/bin/python scripts/stop_rules.py --score state_energy \\
        --negatives build/eval-trans/energyflow_button-press_0_K20 \\
        --faults build/eval-trans/energyflow_button-press_0_K20_push build/eval-trans/energyflow_button-press_0_K20_object \\
        --rule n_of_m:3:5:6.8 --rule n_of_m:1:1:12 --rule cusum:4.5:1.0:0.5:5

Chooses the threshold rule of a score on what the robot saw, the way the
safety gate applies it (safety/rule.go): every RUNNING tick of a cell's
traces (`--scores` JSONL, one line per control tick), the rule fed the
tick's fresh score and skipping ticks without one. Rules:

    n_of_m:N:M:T          trip when N of the last M fresh scores are above T
    cusum:T:SCALE:DRIFT:LIMIT   S <- max(0, S + (x - T)/SCALE - DRIFT), trip when S > LIMIT

For the --negatives cells (level 0): episodes with a trip (false trips),
the running hours observed (ticks / --rate) and false trips per hour. For
each --faults cell (the fault at --fault-step environment steps): episodes
whose rule trips within --within ticks of the fault's onset (20 = 1 s at 20
Hz) and the median delay. The onset tick follows the lockstep bridge: one
environment step per tick and one more when the gate arms
(cmd/energyflow/simstop_test.go, faultOnsetTick). A trace ends where the
cell's own stop ended the episode: a rule that would trip later is not
seen (counted as not detected, and the episode as censored when the trace
ended within the window).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

Line = Tuple[str, Optional[float]]  # (gate state, score or None)


def load(cell: str, score: str) -> Dict[int, List[Line]]:
    """Per episode, its trace lines in order: (state, score)."""
    eps: Dict[int, List[Line]] = defaultdict(list)
    for raw in Path(cell + ".jsonl").read_text().splitlines():
        t = json.loads(raw)
        v = t.get(score)
        eps[int(t["episode"])].append((t["state"], None if v is None else float(v)))
    return dict(eps)


def parse_rule(spec: str) -> Tuple[str, Callable[[], Callable[[float], bool]]]:
    """A rule spec as a factory of fresh per-episode rule states (observe(x) -> tripped)."""
    kind, *args = spec.split(":")
    try:
        vals = [float(a) for a in args]
    except ValueError:
        raise SystemExit(f"stop_rules.py: --rule {spec!r}: the parameters must be numbers")
    if kind == "n_of_m" and len(vals) == 3:
        n, m, thr = int(vals[0]), int(vals[1]), vals[2]
        if not 1 <= n <= m:
            raise SystemExit(f"stop_rules.py: --rule {spec!r}: want 1 <= N <= M")

        def nofm() -> Callable[[float], bool]:
            window: List[bool] = []

            def observe(x: float) -> bool:
                window.append(x > thr)
                del window[:-m]
                return sum(window) >= n
            return observe
        return spec, nofm
    if kind == "cusum" and len(vals) == 4:
        thr, scale, drift, limit = vals

        def cusum() -> Callable[[float], bool]:
            s = [0.0]

            def observe(x: float) -> bool:
                s[0] = max(0.0, s[0] + (x - thr) / scale - drift)
                return s[0] > limit
            return observe
        return spec, cusum
    raise SystemExit(f"stop_rules.py: --rule {spec!r}: want n_of_m:N:M:T or cusum:T:SCALE:DRIFT:LIMIT")


def first_trip(lines: List[Line], make: Callable[[], Callable[[float], bool]]) -> Tuple[Optional[int], int]:
    """Index of the first line whose score trips the rule, and the running lines seen. A line counts
    when the gate ran into its tick: the line is RUNNING, or the one before it was (the tick that
    decided a stop reads STOPPED)."""
    observe = make()
    running = 0
    for i, (state, x) in enumerate(lines):
        if state != "RUNNING" and (i == 0 or lines[i - 1][0] != "RUNNING"):
            continue
        running += 1
        if x is not None and math.isfinite(x) and observe(x):
            return i, running
    return None, running


def onset_line(lines: List[Line], fault_step: int) -> Optional[int]:
    """The line from which the fault is in the world (None: not armed before it, or the trace ended first)."""
    armed = next((i - 1 for i, (s, _) in enumerate(lines) if s == "RUNNING"), None)
    if armed is None:
        return None
    for i in range(len(lines)):
        steps = i + 1 + (1 if i >= armed else 0)
        if steps >= fault_step:
            return i if i > armed else None
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--score", default="state_energy", choices=["energy", "centered_energy", "state_energy"])
    ap.add_argument("--negatives", nargs="+", required=True, help="level-0 cells (paths without .jsonl)")
    ap.add_argument("--faults", nargs="*", default=[], help="fault cells (paths without .jsonl)")
    ap.add_argument("--rule", action="append", required=True, help="n_of_m:N:M:T or cusum:T:SCALE:DRIFT:LIMIT")
    ap.add_argument("--fault-step", type=int, default=30)
    ap.add_argument("--within", type=int, default=20, help="detection window after the onset, ticks")
    ap.add_argument("--rate", type=float, default=20.0, help="control rate of the cells, Hz")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rules = [parse_rule(r) for r in a.rule]
    neg = {c: load(c, a.score) for c in a.negatives}
    pos = {c: load(c, a.score) for c in a.faults}
    out: Dict[str, Dict] = {}
    head = f"{'rule':28s} {'level-0 false trips':>22s} {'per hour':>9s}" + "".join(
        f" {Path(c).name.split('_')[-1] + ' within ' + str(a.within):>24s}" for c in a.faults)
    print(f"score {a.score}; {sum(len(e) for e in neg.values())} level-0 episodes, "
          f"rate {a.rate:g} Hz; faults at step {a.fault_step}")
    print(head)
    for spec, make in rules:
        trips, ticks, eps = 0, 0, 0
        for cell in neg.values():
            for lines in cell.values():
                t, r = first_trip(lines, make)
                trips += t is not None
                ticks += r
                eps += 1
        hours = ticks / a.rate / 3600
        row = {"false_trips": trips, "episodes": eps, "running_hours": hours,
               "per_hour": trips / hours if hours else None, "faults": {}}
        cols = []
        for c, cell in pos.items():
            delays, censored, n = [], 0, 0
            for lines in cell.values():
                on = onset_line(lines, a.fault_step)
                if on is None:
                    continue
                n += 1
                t, _ = first_trip(lines, make)
                if t is not None and on <= t <= on + a.within:
                    delays.append(t - on)
                elif t is None and len(lines) <= on + a.within:
                    censored += 1
            row["faults"][c] = {"detected": len(delays), "of": n, "censored": censored, "delays": delays}
            med = f" med {statistics.median(delays):.0f}" if delays else ""
            cols.append(f" {f'{len(delays)}/{n}{med}' + (f' ({censored} cens.)' if censored else ''):>24s}")
        out[spec] = row
        per_h = f"{row['per_hour']:.1f}" if row["per_hour"] is not None else "-"
        print(f"{spec:28s} {f'{trips}/{eps} in {hours:.3f} h':>22s} {per_h:>9s}" + "".join(cols))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
