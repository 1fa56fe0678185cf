#!/usr/bin/env python3
"""Replay stop rules on the per-tick scores of `energyflow sim eval` cells, offline.

    .venv/bin/python -m research.stop.stop_rules --score state_energy \\
        --negatives build/eval-trans/energyflow_button-press_0_K20 \\
        --faults build/eval-trans/energyflow_button-press_0_K20_push build/eval-trans/energyflow_button-press_0_K20_object \\
        --rule n_of_m:3:5:6.8 --rule n_of_m:1:1:12 --rule cusum:4.5:1.0:0.5:5

Chooses the threshold rule of a score on what the robot saw, the way the
safety gate applies it (safety/rule.go): every RUNNING tick of a cell's
traces (`--scores` JSONL, one line per control tick), the rule fed the
tick's fresh score and skipping ticks without one. Rules:

    n_of_m:N:M:T          trip when N of the last M fresh scores are above T
    cusum:T:SCALE:DRIFT:LIMIT   S <- max(0, S + (x - T)/SCALE - DRIFT), trip when S > LIMIT
    RULE|RULE             trip when either trips, e.g. n_of_m:2:5:T|n_of_m:1:1:C (a closed-loop
                          calibration's rule with its one-tick ceiling C, as the gate runs them)

For the --negatives cells (level 0): episodes with a trip (false trips),
the running hours observed (ticks / --rate) and false trips per hour. For
each --faults cell (the fault at --fault-step environment steps): episodes
whose rule trips within --within ticks of the fault's onset (20 = 1 s at 20
Hz) and the median delay. The onset tick follows the lockstep bridge: one
environment step per tick and one more when the gate arms
(sim/harness/eval/stop_test.go, faultOnsetTick). A trace ends where the
cell's own stop ended the episode: a rule that would trip later is not
seen (counted as not detected, and the episode as censored when the trace
ended within the window).

Traces recorded with the stop observing only (`sim eval --observe-only`,
research/stop/level0_hours.sh) run on past a trip: for them the table adds every
trip of the whole traces per running hour, the rule started afresh after
each as after an operator's reset, once a score is back at or below the
threshold (the gate refuses a reset before). --fit N:M prints, per task (from the
cell names) and pooled, the lowest threshold at which n_of_m:N:M trips on
none of the --negatives: under exchangeable episodes, a threshold fitted so
on H running hours keeps the expected false trips of fresh driving at most
1/H per hour (docs/safety.md, "Per hour").
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
    if "|" in spec:
        parts = [parse_rule(p)[1] for p in spec.split("|")]

        def either() -> Callable[[float], bool]:
            states = [make() for make in parts]

            def observe(x: float) -> bool:
                return any([o(x) for o in states])  # a list: every rule sees every score
            return observe
        return spec, either
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


def trip_lines(lines: List[Line], make: Callable[[], Callable[[float], bool]],
               rearm: Optional[float] = None) -> Tuple[List[int], int]:
    """The lines of every trip of a whole trace and the running lines seen, for traces recorded with
    the stop observing only (sim eval --observe-only), which run on past a trip. After a trip the rule
    starts afresh, as after an operator's reset — with rearm, only once a fresh score is at or below it
    (the gate refuses a reset while the deciding score is above its threshold), so a score that stays
    high counts as one trip."""
    observe = make()
    trips: List[int] = []
    running = 0
    waiting = False
    for i, (state, x) in enumerate(lines):
        if state != "RUNNING" and (i == 0 or lines[i - 1][0] != "RUNNING"):
            continue
        running += 1
        fresh = x is not None and math.isfinite(x)
        if waiting:
            if fresh and x <= rearm:
                waiting = False
                observe = make()
            continue
        if fresh and observe(x):
            trips.append(i)
            observe = make()
            waiting = rearm is not None
    return trips, running


def all_trips(lines: List[Line], make: Callable[[], Callable[[float], bool]],
              rearm: Optional[float] = None) -> Tuple[int, int]:
    """How many trips trip_lines finds, and the running lines seen."""
    trips, running = trip_lines(lines, make, rearm)
    return len(trips), running


def threshold_of(spec: str) -> Optional[float]:
    """The threshold T of a rule spec (n_of_m:N:M:T, cusum:T:...; of RULE|RULE, the first rule's), for
    all_trips' rearm."""
    kind, *args = spec.split("|")[0].split(":")
    try:
        return float(args[2] if kind == "n_of_m" else args[0])
    except (IndexError, ValueError):
        return None


def critical(lines: List[Line], n: int, m: int) -> float:
    """The largest threshold at which n_of_m:N:M trips on the trace: the maximum over windows of the
    N-th largest of the last M fresh scores (the rule trips iff N of them are above T). Any T at or
    above it never trips the trace; -inf when no window holds N fresh scores."""
    window: List[float] = []
    worst = -math.inf
    for i, (state, x) in enumerate(lines):
        if state != "RUNNING" and (i == 0 or lines[i - 1][0] != "RUNNING"):
            continue
        if x is None or not math.isfinite(x):
            continue
        window.append(x)
        del window[:-m]
        if len(window) >= n:
            worst = max(worst, sorted(window, reverse=True)[n - 1])
    return worst


def task_of(cell: str) -> str:
    """The task of a cell path: level0_hours.sh names chunks <task>_<seed>, evaluate.sh cells
    <policy>_<task>_<level>_K<k>."""
    name = Path(cell).name
    parts = name.split("_")
    if len(parts) >= 4 and parts[-1].startswith("K"):
        return parts[1]
    return name.rsplit("_", 1)[0]


def fit(neg: Dict[str, Dict[int, List[Line]]], n: int, m: int, rate: float) -> Dict[str, Dict]:
    """Per task and pooled: the running hours and, over episodes, the critical values of n_of_m:N:M
    (critical()). The largest is the lowest threshold with no trip on these traces; under exchangeable
    episodes it is the split-conformal threshold whose expected false trips per hour are at most
    1 / (the hours it was fitted on) (docs/safety.md, "Per hour")."""
    groups: Dict[str, List[Tuple[float, int]]] = defaultdict(list)
    for cell, eps in neg.items():
        for lines in eps.values():
            _, run = all_trips(lines, lambda: (lambda x: False))
            groups[task_of(cell)].append((critical(lines, n, m), run))
    groups["all"] = [v for k in list(groups) for v in groups[k]]
    out: Dict[str, Dict] = {}
    for k, vals in groups.items():
        cs = sorted(c for c, _ in vals if math.isfinite(c))
        hours = sum(r for _, r in vals) / rate / 3600
        out[k] = {"episodes": len(vals), "running_hours": hours, "max": cs[-1] if cs else None,
                  "second": cs[-2] if len(cs) > 1 else None,
                  "q99": cs[min(len(cs) - 1, math.ceil(0.99 * len(cs)) - 1)] if cs else None}
    return out


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
    ap.add_argument("--score", default="state_energy", choices=["energy", "centered_energy", "state_energy", "tracking", "tracking_sum"],
                    help="tracking_sum: the runtime's own sustained-rule sum, replayed as n_of_m:1:1:LIMIT")
    ap.add_argument("--negatives", nargs="+", required=True, help="level-0 cells (paths without .jsonl)")
    ap.add_argument("--faults", nargs="*", default=[], help="fault cells (paths without .jsonl)")
    ap.add_argument("--rule", action="append", default=[], help="n_of_m:N:M:T or cusum:T:SCALE:DRIFT:LIMIT")
    ap.add_argument("--fault-step", type=int, default=30)
    ap.add_argument("--within", type=int, default=20, help="detection window after the onset, ticks")
    ap.add_argument("--rate", type=float, default=20.0, help="control rate of the cells, Hz")
    ap.add_argument("--fit", default="", metavar="N:M",
                    help="also print, per task and pooled, the lowest threshold at which n_of_m:N:M trips on none "
                         "of the --negatives, with their running hours")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if not a.rule and not a.fit:
        raise SystemExit("stop_rules.py: give at least one --rule, or --fit N:M")
    rules = [parse_rule(r) for r in a.rule]
    neg = {c: load(c, a.score) for c in a.negatives}
    pos = {c: load(c, a.score) for c in a.faults}
    out: Dict[str, Dict] = {}
    if a.fit:
        try:
            n, m = (int(v) for v in a.fit.split(":"))
        except ValueError:
            raise SystemExit(f"stop_rules.py: --fit {a.fit!r}: want N:M, e.g. 2:5")
        if not 1 <= n <= m:
            raise SystemExit(f"stop_rules.py: --fit {a.fit!r}: want 1 <= N <= M")
        fits = fit(neg, n, m, a.rate)
        out["fit"] = {"n": n, "m": m, "groups": fits}
        print(f"n_of_m {n}/{m}: lowest threshold with no trip (the largest per-episode critical value)")
        for k, f in fits.items():
            mx = "-" if f["max"] is None else f"{f['max']:.3f}"
            sec = "-" if f["second"] is None else f"{f['second']:.3f}"
            print(f"  {k:14s} {f['episodes']:5d} episodes {f['running_hours']:7.3f} h  max {mx:>9s}  second {sec:>9s}")
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
        every, full = 0, 0  # every trip of the whole traces, the rule restarted after each
        for cell in neg.values():
            for lines in cell.values():
                t, r = all_trips(lines, make, threshold_of(spec))
                every += t
                full += r
        full_h = full / a.rate / 3600
        row = {"false_trips": trips, "episodes": eps, "running_hours": hours,
               "per_hour": trips / hours if hours else None,
               "all_trips": every, "all_running_hours": full_h, "all_per_hour": every / full_h if full_h else None,
               "faults": {}}
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
        if every != trips or abs(full_h - hours) > 1e-9:
            print(f"{'':28s} {f'{every} trips in {full_h:.3f} h':>22s} "
                  f"{every / full_h if full_h else float('nan'):9.1f}  (whole traces, re-armed after each trip)")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
