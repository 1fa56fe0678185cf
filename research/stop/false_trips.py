#!/usr/bin/env python3
"""The state score's threshold per task, fitted on one set of level-0 hours and checked on another.

    .venv/bin/python -m research.stop.false_trips --fit build/hours/a --check build/hours/b \\
        [--faults build/eval-obs] [--trips-per-hour auto|R] [--write] [--sweep "6 10 20"] [--json FILE]
    .venv/bin/python -m research.stop.false_trips --check build/hours/c     (the shipped thresholds only)
    .venv/bin/python -m research.stop.false_trips --check build/hours/e --fit-below 60480 [...]
    .venv/bin/python -m research.stop.false_trips --check build/hours/f --check build/hours/e:60480 --rate 10

For each task with chunks in --fit (research/stop/level0_hours.sh: <task>_<seed>.{jsonl,json}, the stop
observing only), runs `energyflow sim calibrate --score state_energy --traces ...` on that task's
chunks for bundles/metaworld-<task>: one standardized band, every episode conformal, certified for
--trips-per-hour false trips per running hour (auto: the lowest rate its hours can certify, 1.02/H
rounded up to a tenth, H the conformal hours sim calibrate counts: the running ticks after arming of
the episodes it keeps; an explicit rate a task's hours cannot certify is refused by the tool), or
with --alpha for that per-episode false-alarm level; --successful-only fits on the episodes that
succeeded only. With
--write the calibration goes into the bundle's manifest (calibration.closed_loop, or beside it in
closed_loop_others when closed_loop is for another --rate or K; the gate then watches state_energy
alone by default), else it is a dry run.

Then replays the 2-of-5 rule at each task's fitted threshold, as the gate applies it
(research/stop/stop_rules.py), on the fresh level-0 chunks of --check: episodes with a trip against the
calibration's alpha (the per-episode level it promised), every trip of the whole traces per running
hour (the rule restarted after each, as after an operator's reset), and the trips in episodes that went
on to succeed (the policy recovered) apart from those in episodes that failed. With --faults DIR, also
the fault cells there (sim eval --observe-only --fault F, named energyflow_<task>_0_K<k>_<fault>):
episodes caught within --within ticks of the onset and the median delay. A second table does the same
at the threshold each shipped bundle's stop uses by default (its closed-loop calibration of the state
score for --rate, else the state term's held-out q99.9), with the false trips of all tasks per hour and their
exact Poisson 95 % interval, and per task the fresh episodes that succeeded (Wilson 95 %); without
--fit only this table is printed, for the tasks of --check.
--fit-below SEED instead of --fit splits one folder: the chunks of --check whose first seed is below
SEED are the fit set, the others the fresh ones.
--check may be repeated: the folders' chunks are pooled per task, and the "all" rows pool the tasks
(one figure per running hour across the tasks). --check DIR:SEED keeps the chunks of DIR whose first
seed is at least SEED: the fresh part of a folder an earlier --fit-below calibrated on.
--bundle DIR reads (and with --write writes) a candidate bundle instead of the shipped one, for one
task (--tasks TASK).
With --split-p50 MS, the shipped table is repeated for the chunks whose inference p50 was at most MS
and for those above it: the policy's latency (how loaded the host was) changes how it drives.
With --split-late, the shipped table per task for the episodes in which the runtime warned that its
plans landed later than the calibration's (sim eval's late_spells > 0), for those in which it did
not, and for the chunks driven with no lateness limit (plan_late_limit_periods null: the bundle's
calibration records no plan_latency), so that each episode is split by the runtime's own signal.
With --per-chunk, a table per chunk at the shipped threshold: its inference p50 and p90, the episodes
that failed, the episodes whose 2-of-5 statistic (stop_rules.critical: the lowest threshold that never
trips the episode) is over the threshold, and the largest statistic; and per task the chunks' median
(range) of inference p50 and p90, and the statistic's quantiles over every episode, the spread a
threshold has to clear.
Prints markdown tables.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from energyflow.stats import wilson
from research.stop import stop_rules as sr

ROOT = Path(__file__).resolve().parents[2]


def chunks(d: Path) -> Dict[str, List[Path]]:
    """Per task, the finished chunks (a .jsonl with its .json summary) of a level0_hours.sh folder."""
    out: Dict[str, List[Path]] = defaultdict(list)
    for j in sorted(d.glob("*.json")):
        if j.with_suffix(".jsonl").exists():
            out[sr.task_of(str(j.with_suffix("")))].append(j.with_suffix(""))
    return dict(out)


def check_sets(specs: List[str]) -> Dict[str, List[Path]]:
    """Per task, the finished chunks of every --check DIR[:FIRST_SEED], pooled: with FIRST_SEED, only
    the chunks of DIR whose first seed is at least that (the fresh part of a folder that was also fitted on)."""
    out: Dict[str, List[Path]] = defaultdict(list)
    for spec in specs:
        d, sep, tail = spec.rpartition(":")
        if not (sep and tail.isdigit()):
            d, tail = spec, ""
        if not Path(d).is_dir():
            raise SystemExit(f"false_trips.py: --check {spec}: {d} is not a folder")
        cells = chunks(Path(d))
        if tail:
            _, cells = split_below(cells, int(tail))
        for task, cs in cells.items():
            out[task].extend(cs)
    return {t: sorted(set(cs)) for t, cs in out.items() if cs}


def first_seed(cell: Path) -> int:
    """The first episode seed of a level0_hours.sh chunk, <task>_<seed>."""
    return int(cell.name.rsplit("_", 1)[1])


def split_below(cells: Dict[str, List[Path]], seed: int) -> Tuple[Dict[str, List[Path]], Dict[str, List[Path]]]:
    """Per task, the chunks whose first seed is below seed, and the others (tasks with none left out)."""
    lo = {t: [c for c in cs if first_seed(c) < seed] for t, cs in cells.items()}
    hi = {t: [c for c in cs if first_seed(c) >= seed] for t, cs in cells.items()}
    return {t: cs for t, cs in lo.items() if cs}, {t: cs for t, cs in hi.items() if cs}


def running_hours(cells: List[Path], rate: float) -> float:
    n = 0
    for c in cells:
        for lines in sr.load(str(c), "state_energy").values():
            n += sr.all_trips(lines, lambda: (lambda x: False))[1]
    return n / rate / 3600


def conformal_hours(cells: List[Path], rate: float, successful_only: bool = False) -> float:
    """The running hours `sim calibrate --traces` counts on cells (readScoreLines): the RUNNING ticks
    that follow a RUNNING tick, i.e. those after the one that armed the gate (running_hours counts
    that one too: one tick more per episode), of the episodes that succeeded only with
    successful_only (its --successful-only)."""
    ok = succeeded(cells)
    n = 0
    for c in cells:
        for ep, lines in sr.load(str(c), "state_energy").items():
            if successful_only and not ok.get((str(c), ep), False):
                continue
            n += sum(1 for prev, cur in zip(lines, lines[1:]) if prev[0] == cur[0] == "RUNNING")
    return n / rate / 3600


def bundle_dir(task: str, bundle: Optional[Path] = None) -> Path:
    """The bundle a task's thresholds come from: ``bundle`` (--bundle) or the shipped one."""
    return bundle if bundle is not None else ROOT / "bundles" / f"metaworld-{task}"


def calibrate(task: str, cells: List[Path], rate: float, level: str, write: bool, exe: Path,
              bundle: Optional[Path] = None) -> Dict:
    """Run sim calibrate --traces for the task's bundle (bundle_dir) at level ("--alpha A" or
    "--trips-per-hour R"); return its closed_loop block."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cal.json"
        cmd = [str(exe), "sim", "calibrate", "--bundle", str(bundle_dir(task, bundle)),
               "--score", "state_energy", *level.split(), "--rate", f"{rate:g}",
               "--traces", ",".join(str(c) + ".jsonl" for c in cells), "--json", str(out)]
        if not write:
            cmd.append("--dry-run")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"false_trips.py: {task}: {' '.join(cmd)}: {r.stderr.strip()}")
        return json.loads(out.read_text())["closed_loop"]


def succeeded(cells: List[Path]) -> Dict[tuple, bool]:
    """(cell, episode) -> did the episode succeed."""
    out = {}
    for c in cells:
        for r in json.loads(Path(str(c) + ".json").read_text())["results"]:
            out[(str(c), r["episode"])] = bool(r["success"])
    return out


def by_load(cells: List[Path], ms: float) -> Tuple[List[Path], List[Path]]:
    """The chunks whose inference p50 (their .json summary) was at most ms, and those above it."""
    light: List[Path] = []
    heavy: List[Path] = []
    for c in cells:
        p50 = json.loads(Path(str(c) + ".json").read_text())["inference_p50_ms"]
        (light if p50 <= ms else heavy).append(c)
    return light, heavy


def rule_spec(q: float, ceiling: Optional[float] = None) -> str:
    """The gate's rule on the state score: 2 of 5 above q, or one score above the ceiling if any."""
    return f"n_of_m:2:5:{q!r}" + (f"|n_of_m:1:1:{ceiling!r}" if ceiling is not None else "")


def check(cells: List[Path], q: float, rate: float, ceiling: Optional[float] = None,
          keep: Optional[Callable[[str, int], bool]] = None) -> Dict:
    """The 2-of-5 rule at q (and the ceiling) replayed on every episode of cells, or on those keep
    (cell, episode) admits."""
    _, make = sr.parse_rule(rule_spec(q, ceiling))
    ok = succeeded(cells)
    eps = tripped = every = ticks = 0
    in_success = in_failure = 0
    for c in cells:
        for ep, lines in sr.load(str(c), "state_energy").items():
            if keep is not None and not keep(str(c), ep):
                continue
            t, r = sr.all_trips(lines, make, q)
            eps += 1
            every += t
            ticks += r
            tripped += t > 0
            if t:
                if ok[(str(c), ep)]:
                    in_success += t
                else:
                    in_failure += t
    hours = ticks / rate / 3600
    return {"episodes": eps, "episodes_tripped": tripped, "trips": every, "hours": hours,
            "per_hour": every / hours if hours else None, "trips_in_successes": in_success,
            "trips_in_failures": in_failure}


def faults(d: Optional[Path], task: str, q: float, within: int, fault_step: int,
           ceiling: Optional[float] = None) -> Dict[str, Dict]:
    out: Dict[str, Dict] = {}
    if d is None:
        return out
    _, make = sr.parse_rule(rule_spec(q, ceiling))
    for j in sorted(d.glob(f"energyflow_{task}_0_K*_*.jsonl")):
        fault = j.stem.rsplit("_", 1)[1]
        delays, n = [], 0
        for lines in sr.load(str(j.with_suffix("")), "state_energy").values():
            on = sr.onset_line(lines, fault_step)
            if on is None:
                continue
            n += 1
            hit = [t - on for t in sr.trip_lines(lines, make, q)[0] if on <= t <= on + within]
            if hit:
                delays.append(hit[0])
        out[fault] = {"caught": len(delays), "of": n, "median_delay": statistics.median(delays) if delays else None}
    return out


def shipped_threshold(task: str, rate_hz: Optional[float] = None, bundle: Optional[Path] = None) -> tuple:
    """The state threshold the shipped bundle's (or ``bundle``'s) default watch uses at rate_hz
    (default_threshold)."""
    return default_threshold(json.loads((bundle_dir(task, bundle) / "manifest.json").read_text()), rate_hz)


def closed_loop_for(m: Dict, rate_hz: Optional[float] = None, steps_k: Optional[int] = None) -> Dict:
    """The closed-loop calibration the runtime uses at rate_hz and steps_k (default: the bundle's
    sampler steps), as engines.Calibration.ClosedLoopFor picks it: the one of closed_loop and
    closed_loop_others certified there, else closed_loop ({} when there is none). rate_hz None:
    closed_loop."""
    cal = m.get("calibration") or {}
    primary = cal.get("closed_loop") or {}
    if rate_hz is None or not primary:
        return primary
    k = steps_k if steps_k is not None else m["sampler"]["steps"]
    for cl in [primary, *(cal.get("closed_loop_others") or [])]:
        rate_ok = not cl.get("rate_hz") or abs(cl["rate_hz"] - rate_hz) <= 1e-9 * cl["rate_hz"]
        if rate_ok and (not cl.get("steps_k") or cl["steps_k"] == k):
            return cl
    return primary


def shipped_ceiling(task: str, rate_hz: Optional[float] = None, bundle: Optional[Path] = None) -> Optional[float]:
    """The one-tick ceiling of the shipped bundle's (or ``bundle``'s) default watch at rate_hz
    (default_ceiling)."""
    return default_ceiling(json.loads((bundle_dir(task, bundle) / "manifest.json").read_text()), rate_hz)


def default_ceiling(m: Dict, rate_hz: Optional[float] = None) -> Optional[float]:
    """The one-tick ceiling beside default_threshold's closed-loop threshold (its one band's mean +
    ceiling.q * std), None when that calibration has none (or default_threshold is not a closed loop)."""
    cl = closed_loop_for(m, rate_hz)
    if cl.get("score") != "state_energy" or not cl.get("ceiling"):
        return None
    b = cl["bands"][0]
    return float(b["mean"] + cl["ceiling"]["q"] * b["std"])


def default_threshold(m: Dict, rate_hz: Optional[float] = None) -> tuple:
    """The state threshold a bundle's default watch uses at rate_hz, from its manifest ``m``: its
    closed-loop calibration of state_energy (2 of 5) for that rate (closed_loop_for), else the state
    term's held-out q99.9."""
    cl = closed_loop_for(m, rate_hz)
    if cl.get("score") == "state_energy" and cl.get("rule", {}).get("n") == 2 and cl.get("rule", {}).get("m") == 5:
        at = f" at {cl['rate_hz']:g} Hz" if cl.get("rate_hz") else ""
        return float(cl["bands"][0]["threshold"]), f"closed loop{at}, alpha {cl['alpha']:.3g}"
    return float(m["state_energy"]["calibration"]["quantiles"]["99.9"]), "held-out q99.9"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", type=Path, default=None, help="level0_hours.sh folder to calibrate on (without it, "
                                                          "only the shipped bundles' thresholds are checked)")
    ap.add_argument("--fit-below", type=int, default=None, help="instead of --fit: calibrate on the chunks of "
                                                                  "--check whose first seed is below this, check on the rest")
    ap.add_argument("--check", required=True, action="append", metavar="DIR[:FIRST_SEED]",
                    help="level0_hours.sh folder of fresh level-0 driving; repeat it to pool several folders, and "
                         "add :FIRST_SEED to keep only the chunks whose first seed is at least that")
    ap.add_argument("--faults", type=Path, default=None, help="folder of sim eval --observe-only fault cells")
    ap.add_argument("--trips-per-hour", default="auto", help="rate to certify per task, or auto")
    ap.add_argument("--alpha", type=float, default=0.0, help="certify this per-episode level instead of a rate per hour")
    ap.add_argument("--successful-only", action="store_true", help="calibrate on the episodes that succeeded only "
                                                                  "(sim calibrate --successful-only)")
    ap.add_argument("--tasks", default="", help="only these tasks (space-separated)")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--within", type=int, default=20, help="fault detection window, ticks")
    ap.add_argument("--fault-step", type=int, default=30)
    ap.add_argument("--write", action="store_true", help="write each calibration into bundles/metaworld-<task>")
    ap.add_argument("--bundle", type=Path, default=None, help="a candidate bundle instead of the shipped one "
                                                              "(with --tasks TASK: one task)")
    ap.add_argument("--exe", type=Path, default=ROOT / "bin" / "energyflow")
    ap.add_argument("--sweep", default="", help="also, per task, these thresholds (space-separated): the fresh "
                                                 "driving's trips per hour and the faults caught at each")
    ap.add_argument("--split-p50", type=float, default=0.0, help="also the shipped table for the chunks with "
                                                                    "inference p50 at most this many ms, and above it")
    ap.add_argument("--split-late", action="store_true", help="also the shipped table split by whether the "
                                                               "runtime warned that its plans were late")
    ap.add_argument("--per-chunk", action="store_true", help="also a table per chunk: latency, failures, "
                                                              "episodes over the shipped threshold")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    chk = check_sets(a.check)
    fit = chunks(a.fit) if a.fit is not None else None
    if a.fit_below is not None:
        if fit is not None:
            raise SystemExit("false_trips.py: --fit and --fit-below exclude each other")
        fit, chk = split_below(chk, a.fit_below)
    if a.tasks:
        keep = a.tasks.split()
        chk = {t: c for t, c in chk.items() if t in keep}
        fit = {t: c for t, c in fit.items() if t in keep} if fit is not None else None
    tasks = fit if fit is not None else chk
    if a.bundle is not None and len(tasks) != 1:
        raise SystemExit(f"false_trips.py: --bundle {a.bundle} is one task's: give --tasks TASK "
                         f"(the folders hold {', '.join(sorted(tasks)) or 'none'})")
    if not tasks:
        raise SystemExit(f"false_trips.py: {a.fit or ' '.join(a.check)}: no finished chunks (<task>_<seed>.jsonl with .json)")
    res: Dict[str, Dict] = {}
    if fit is not None:
        fitted(a, fit, chk, res)
    shipped(a, list(tasks), chk, res)
    if a.split_p50:
        split(a, list(tasks), chk, res)
    if a.split_late:
        split_late(a, list(tasks), chk, res)
    if a.per_chunk:
        per_chunk(a, list(tasks), chk, res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


def poisson_interval(k: int, hours: float) -> tuple:
    """Exact (Garwood) 95 % interval of a rate per hour from k events in hours."""
    def cdf(n: int, mu: float) -> float:  # P(X <= n), X ~ Poisson(mu), in log space
        if mu <= 0.0:
            return 1.0
        return sum(math.exp(i * math.log(mu) - mu - math.lgamma(i + 1)) for i in range(n + 1))

    def solve(f, lo: float, hi: float) -> float:
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        return (lo + hi) / 2

    upper = solve(lambda mu: cdf(k, mu) - 0.025, 0.0, 10.0 * k + 10.0)
    lower = 0.0 if k == 0 else solve(lambda mu: 0.025 - (1.0 - cdf(k - 1, mu)), 0.0, 10.0 * k + 10.0)
    return lower / hours, upper / hours


def rate_cell(trips: int, hours: float, rate_digits: int = 1, ci_digits: int = 2) -> str:
    """"k / H h = rate [lo–hi]": trips per running hour with its exact Poisson 95 % interval, as the
    tables print it ("–" for the rate when no hours were driven)."""
    if not hours:
        return f"{trips} / {hours:.3f} h = –"
    lo, hi = poisson_interval(trips, hours)
    return f"{trips} / {hours:.3f} h = {trips / hours:.{rate_digits}f} [{lo:.{ci_digits}f}–{hi:.{ci_digits}f}]"


def fitted(a: argparse.Namespace, fit: Dict[str, List[Path]], chk: Dict[str, List[Path]], res: Dict) -> None:
    """The table of thresholds fitted on --fit and replayed on --check."""
    print("| task | calibration: episodes, hours, rate certified | threshold q (alpha/episode) "
          f"| fresh: episodes tripped / episodes | fresh: trips / hours = per hour (in successes, in failures) | faults caught within {a.within / a.rate:g} s |")
    print("|---|---|---|---|---|---|")
    total = {"trips": 0, "hours": 0.0}
    for task, cells in fit.items():
        if a.alpha:
            level = f"--alpha {a.alpha:g}"
        else:
            h = conformal_hours(cells, a.rate, a.successful_only)
            per = math.ceil(10 * 1.02 / h) / 10 if a.trips_per_hour == "auto" else float(a.trips_per_hour)
            level = f"--trips-per-hour {per:g}"
        if a.successful_only:
            level += " --successful-only"
        cl = calibrate(task, cells, a.rate, level, a.write, a.exe, a.bundle)
        c = check(chk.get(task, []), cl["q"], a.rate)
        f = faults(a.faults, task, cl["q"], a.within, a.fault_step)
        res[task] = {"closed_loop": cl, "check": c, "faults": f}
        total["trips"] += c["trips"]
        total["hours"] += c["hours"]
        fs = "; ".join(f"{k} {v['caught']}/{v['of']}" + (f" (median {v['median_delay']:.0f} ticks)" if v["median_delay"] is not None else "")
                       for k, v in f.items()) or "–"
        per = f"{c['per_hour']:.1f}" if c["per_hour"] is not None else "–"
        cert = f"{cl['trips_per_hour']:g}/h" if cl.get("trips_per_hour") else f"alpha {cl['alpha']:g}"
        hours = cl.get("conformal_hours") or running_hours(cells, a.rate)
        print(f"| {task} | {cl['conformal_episodes']}, {hours:.3f} h, {cert} "
              f"| {cl['q']:.3g} ({cl['alpha']:.3g}) | {c['episodes_tripped']}/{c['episodes']} "
              f"| {c['trips']} / {c['hours']:.3f} h = {per} ({c['trips_in_successes']}, {c['trips_in_failures']}) | {fs} |")
    per = total["trips"] / total["hours"] if total["hours"] else float("nan")
    print(f"| all | | | | {total['trips']} / {total['hours']:.3f} h = {per:.1f} | |")
    res["all"] = total


def shipped(a: argparse.Namespace, tasks: List[str], chk: Dict[str, List[Path]], res: Dict) -> None:
    """The table at each shipped bundle's own threshold (and --sweep) on --check."""
    print(f"\n| task | the shipped bundle's state threshold | fresh: episodes tripped | fresh: trips / hours = per hour (in successes, in failures) | faults caught within {a.within / a.rate:g} s |")
    print("|---|---|---|---|---|")
    ship = {"trips": 0, "hours": 0.0, "in_successes": 0}
    for task in tasks:
        thr, src = shipped_threshold(task, a.rate, a.bundle)
        ceil = shipped_ceiling(task, a.rate, a.bundle)
        if ceil is not None:
            src += f", one-tick ceiling {ceil:.4g}"
        c = check(chk.get(task, []), thr, a.rate, ceil)
        f = faults(a.faults, task, thr, a.within, a.fault_step, ceil)
        ship["trips"] += c["trips"]
        ship["hours"] += c["hours"]
        ship["in_successes"] += c["trips_in_successes"]
        fs = "; ".join(f"{k} {v['caught']}/{v['of']}" + (f" (median {v['median_delay']:.0f} ticks)" if v["median_delay"] is not None else "")
                       for k, v in f.items()) or "–"
        per = f"{c['per_hour']:.1f}" if c["per_hour"] is not None else "–"
        print(f"| {task} | {thr:.3g} ({src}) | {c['episodes_tripped']}/{c['episodes']} "
              f"| {c['trips']} / {c['hours']:.3f} h = {per} ({c['trips_in_successes']}, {c['trips_in_failures']}) | {fs} |")
        res.setdefault("shipped", {})[task] = {"threshold": thr, "ceiling": ceil, "source": src, "check": c, "faults": f}
    per = ship["trips"] / ship["hours"] if ship["hours"] else float("nan")
    if ship["hours"]:
        lo, hi = poisson_interval(ship["trips"], ship["hours"])
        ship["per_hour_95"] = [lo, hi]
        ci = f" [{lo:.2f}–{hi:.2f}, Poisson 95 %]"
    else:
        ci = ""
    print(f"| all | | | {ship['trips']} / {ship['hours']:.3f} h = {per:.1f}{ci} ({ship['in_successes']} in successes) | |")
    res["shipped_all"] = ship
    for task in tasks:
        ok = list(succeeded(chk.get(task, [])).values())
        if ok:
            lo, hi = wilson(sum(ok), len(ok))
            print(f"{task}: {sum(ok)}/{len(ok)} fresh episodes succeeded = {100 * sum(ok) / len(ok):.1f} % "
                  f"[{100 * lo:.1f}–{100 * hi:.1f} %, Wilson 95 %]")
    if a.sweep:
        print(f"\n| task | threshold | fresh: episodes tripped | fresh: trips / hours = per hour [Poisson 95 %] (in successes, in failures) | faults caught within {a.within / a.rate:g} s |")
        print("|---|---|---|---|---|")
        for task in tasks:
            for thr in [float(v) for v in a.sweep.split()]:
                c = check(chk.get(task, []), thr, a.rate)
                f = faults(a.faults, task, thr, a.within, a.fault_step)
                fs = "; ".join(f"{k} {v['caught']}/{v['of']}" for k, v in f.items()) or "–"
                print(f"| {task} | {thr:g} | {c['episodes_tripped']}/{c['episodes']} | {rate_cell(c['trips'], c['hours'])} "
                      f"({c['trips_in_successes']}, {c['trips_in_failures']}) | {fs} |")
                res.setdefault("sweep", {}).setdefault(task, {})[f"{thr:g}"] = {"check": c, "faults": f}


def split(a: argparse.Namespace, tasks: List[str], chk: Dict[str, List[Path]], res: Dict) -> None:
    """The shipped stop's false trips per hour, apart for the chunks driven at inference p50 <= and
    > --split-p50."""
    print("\n| task | chunks' inference p50 | chunks | episodes succeeded | fresh: trips / hours = per hour [Poisson 95 %] (in successes, in failures) |")
    print("|---|---|---|---|---|")
    for side in ("light", "heavy"):
        tot = {"trips": 0, "hours": 0.0}
        for task in tasks:
            part = by_load(chk.get(task, []), a.split_p50)[side == "heavy"]
            if not part:
                continue
            thr, _ = shipped_threshold(task, a.rate, a.bundle)
            c = check(part, thr, a.rate, shipped_ceiling(task, a.rate, a.bundle))
            ok = sum(succeeded(part).values())
            p50s = [json.loads(Path(str(x) + ".json").read_text())["inference_p50_ms"] for x in part]
            rng = f"{'≤' if side == 'light' else '>'} {a.split_p50:g} ms (median {statistics.median(p50s):.0f})"
            print(f"| {task} | {rng} | {len(part)} | {ok}/{c['episodes']} "
                  f"| {rate_cell(c['trips'], c['hours'], 1, 1)} ({c['trips_in_successes']}, {c['trips_in_failures']}) |")
            tot["trips"] += c["trips"]
            tot["hours"] += c["hours"]
            res.setdefault("split", {}).setdefault(side, {})[task] = c
        if tot["hours"]:
            # two decimals on the totals: the bound is compared with issue 20's 1 per hour
            print(f"| all, p50 {'≤' if side == 'light' else '>'} {a.split_p50:g} ms | | | "
                  f"| {rate_cell(tot['trips'], tot['hours'], 2, 2)} |")


def late_groups(cells: List[Path]) -> Dict[tuple, str]:
    """(cell, episode) -> "warned" (the runtime warned its plans were late), "in time", or "no limit"
    (the chunk ran without a lateness limit)."""
    out: Dict[tuple, str] = {}
    for c in cells:
        s = json.loads(Path(str(c) + ".json").read_text())
        if "plan_late_limit_periods" not in s:
            raise SystemExit(f"false_trips.py: --split-late: {c}.json has no plan_late_limit_periods: "
                             "driven before the runtime warned of late plans; drop --split-late or drive it again")
        for r in s["results"]:
            if s["plan_late_limit_periods"] is None:
                g = "no limit"
            else:
                g = "warned" if r["late_spells"] > 0 else "in time"
            out[(str(c), r["episode"])] = g
    return out


def split_late(a: argparse.Namespace, tasks: List[str], chk: Dict[str, List[Path]], res: Dict) -> None:
    """The shipped stop's false trips per hour, per task, in the episodes the runtime warned of late
    plans, in those it did not, and in those driven without a limit."""
    print("\n| task | runtime on its plans | episodes succeeded | fresh: trips / hours = per hour [Poisson 95 %] (in successes, in failures) |")
    print("|---|---|---|---|")
    # each task's summaries read once, not once per group
    per_task = {t: (late_groups(chk.get(t, [])), succeeded(chk.get(t, []))) for t in tasks}
    for group in ("in time", "warned", "no limit"):
        tot = {"trips": 0, "hours": 0.0}
        for task in tasks:
            cells = chk.get(task, [])
            groups, ok = per_task[task]
            if group not in groups.values():
                continue
            thr, _ = shipped_threshold(task, a.rate, a.bundle)
            c = check(cells, thr, a.rate, shipped_ceiling(task, a.rate, a.bundle),
                      keep=lambda cell, ep: groups[(cell, ep)] == group)
            won = sum(ok[k] for k, g in groups.items() if g == group)
            print(f"| {task} | {group} | {won}/{c['episodes']} "
                  f"| {rate_cell(c['trips'], c['hours'], 1, 1)} ({c['trips_in_successes']}, {c['trips_in_failures']}) |")
            tot["trips"] += c["trips"]
            tot["hours"] += c["hours"]
            res.setdefault("split_late", {}).setdefault(group, {})[task] = c
        if tot["hours"]:
            print(f"| all | {group} | | {rate_cell(tot['trips'], tot['hours'], 2, 2)} |")


def statistics_of(cell: Path) -> List[float]:
    """Each episode's 2-of-5 statistic (stop_rules.critical) in one chunk, in episode order."""
    return [sr.critical(lines, 2, 5) for _, lines in sorted(sr.load(str(cell), "state_energy").items())]


def per_chunk(a: argparse.Namespace, tasks: List[str], chk: Dict[str, List[Path]], res: Dict) -> None:
    """Per chunk at the shipped threshold: latency, failures, episodes over it, the largest statistic;
    per task the chunks' median (range) latency and the statistic's quantiles over every episode."""
    print("\n| chunk | inference p50 / p90 ms | episodes failed | episodes over the threshold | largest 2-of-5 statistic |")
    print("|---|---|---|---|---|")
    every: Dict[str, List[float]] = defaultdict(list)
    lat: Dict[str, Tuple[List[float], List[float]]] = defaultdict(lambda: ([], []))
    for task in tasks:
        thr, _ = shipped_threshold(task, a.rate, a.bundle)
        for c in sorted(chk.get(task, []), key=first_seed):
            j = json.loads(Path(str(c) + ".json").read_text())
            st = statistics_of(c)
            every[task] += st
            lat[task][0].append(j["inference_p50_ms"])
            lat[task][1].append(j["inference_p90_ms"])
            failed = sum(not r["success"] for r in j["results"])
            print(f"| {c.name} | {j['inference_p50_ms']:.0f} / {j['inference_p90_ms']:.0f} | {failed} "
                  f"| {sum(x > thr for x in st)} | {max(st):.4g} |")
            res.setdefault("per_chunk", {})[str(c)] = {"p50": j["inference_p50_ms"], "p90": j["inference_p90_ms"],
                                                      "failed": failed, "statistics": st}
    print("\n| task | chunks' inference p50 / p90 ms, median (range) | episodes | 2-of-5 statistic over episodes: q50 / q90 / q99 / max |")
    print("|---|---|---|---|")
    for task, st in every.items():
        ms = " / ".join(f"{statistics.median(v):.0f} ({min(v):.0f}–{max(v):.0f})" for v in lat[task])
        if len(st) > 1:
            q = [statistics.quantiles(st, n=100, method="inclusive")[i] for i in (49, 89, 98)]
        else:
            q = [st[0]] * 3  # one episode: every quantile is its statistic
        print(f"| {task} | {ms} | {len(st)} | {q[0]:.4g} / {q[1]:.4g} / {q[2]:.4g} / {max(st):.4g} |")

if __name__ == "__main__":
    main()
