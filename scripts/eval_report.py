"""Tables and plots of docs/evaluation.md from the runs scripts/evaluate.sh writes.

    .venv/bin/python scripts/eval_report.py [--dir build/eval] [--out build/eval/report.md]
                                            [--img docs/img] [--rate 20]

Input: ``<dir>/<policy>_<task>_<level>_K<k>[_<fault>].json`` (``energyflow sim
eval --json``) and the ``.jsonl`` beside it (``--scores``: one line per tick
with the re-scored energy of the committed chunk). Output: a markdown report
(success table beside the paper's Table 2, safety AUROC / detection delay /
false trips per hour, reward AUROC) and PNG plots.

Definitions (written out in the report too):

* an episode's monitor score is the maximum per-tick score while RUNNING
  (for injected faults: from the fault's onset on);
* AUROC separates level-0 episodes (negatives) from S/M/L or fault episodes
  (positives), Mann-Whitney with ties counted half;
* detection: replaying the safety monitor's default rule (3 of the last 5
  ticks above the threshold) on the trace; delay in ticks from onset (the
  first RUNNING tick for S/M/L; fault onset = first RUNNING tick + fault step,
  one environment step per command);
* reward: an episode's mean centered reward -(E - mean_m E(ref_m)) and mean
  raw -E; AUROC of ranking successes above failures, pooled over a policy's
  cells and within each cell; within a cell also on the first MATCHED_WINDOW
  ticks only, since a failure runs to the step limit and a success ends early;
* success by where the scene is: level-0 episodes split at the median
  distance of the scene's randomized positions (sim.positions) from their mean;
* what a fault changed: each fault cell against level 0 without it, seed by seed.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from energyflow.stats import wilson

# Paper Table 2 (Meta-World, level 0, success %, mean over 5 seeds).
PAPER = {
    "energyflow": {"button-press": 100.0, "drawer-open": 94.2, "assembly": 82.6, "bin-picking": 90.9, "hammer": 94.6},
    "diffusion": {"button-press": 100.0, "drawer-open": 93.6, "assembly": 76.4, "bin-picking": 89.6, "hammer": 94.0},
}
PAPER["lerobot"] = PAPER["diffusion"]  # the paper's Diffusion Policy row
TASKS = ["button-press", "drawer-open", "assembly", "bin-picking", "hammer"]
LEVELS = ["0", "S", "M", "L"]
POLICY_NAMES = {"energyflow": "EnergyFlow", "diffusion": "Diffusion Policy (ours, same U-Net)",
                "lerobot": "LeRobot Diffusion Policy", "image": "EnergyFlow, camera + proprioception"}
#: the order in which tables list policies
POLICY_ORDER = {p: i for i, p in enumerate(["energyflow", "image", "diffusion", "lerobot"])}
#: policies with an energy, whose monitor the safety and reward tables evaluate
ENERGY_POLICIES = ["energyflow", "image"]
#: fault kinds in the order the tables list them
FAULTS = ["push", "object", "occlusion", "occlusion-at0"]


def fault_label(fault: str) -> str:
    """A cell's fault as the tables name it: "occlusion-at0" (evaluate.sh
    --fault-step 0) reads "occlusion from step 0"; the default step's cells
    keep the bare name."""
    kind, _, step = fault.partition("-at")
    return f"{kind} from step {step}" if step else kind


def _key(policy: str, key: str) -> str:
    """A report.json key: EnergyFlow's keys as they were, other policies prefixed."""
    return key if policy == "energyflow" else f"{policy} {key}"
NAME = re.compile(r"^(?P<policy>[a-z]+)_(?P<task>[a-z-]+)_(?P<level>[0SML])_K(?P<k>\d+)(?:_(?P<fault>[a-z]+(?:-at\d+)?))?$")
RULE_N, RULE_M = 3, 5
#: ticks of the matched window (3 s at 20 Hz): episodes are also scored on their
#: first MATCHED_WINDOW RUNNING ticks (from a fault's onset for faults), before
#: the earliest success ends one, so both sides cover the same phase of the task
MATCHED_WINDOW = 60


@dataclass
class Episode:
    success: bool
    steps: int
    stop: str
    fault_step: int
    ticks: List[Tuple[int, str, Optional[float], Optional[float]]] = field(default_factory=list)
    seed: Optional[int] = None
    #: environment step at which the simulator first reported success (None:
    #: not recorded, cells from before the bridge reported it)
    success_step: Optional[int] = None

    def steps_to_success(self) -> Optional[int]:
        """Steps until success (the simulator's success step, else the episode
        length), None for a failure."""
        if not self.success:
            return None
        return self.success_step if self.success_step is not None else self.steps

    def running(self) -> List[Tuple[int, Optional[float], Optional[float]]]:
        """RUNNING ticks, plus the tick that ended a RUNNING stretch: the gate's
        deciding tick is logged with the state it produced (STOPPED), and its
        score is the one that tripped the rule."""
        out, prev = [], ""
        for t, s, e, c in self.ticks:
            if s == "RUNNING" or prev == "RUNNING":
                out.append((t, e, c))
            prev = s
        return out

    def onset(self) -> Optional[int]:
        r = self.running()
        return None if not r else r[0][0] + self.fault_step


@dataclass
class Cell:
    policy: str
    task: str
    level: str
    k: int
    fault: str
    summary: dict
    episodes: List[Episode]


def auroc(neg: Sequence[float], pos: Sequence[float]) -> float:
    """P(score_pos > score_neg) + 0.5 P(tie); NaN when a side is empty."""
    neg, pos = np.asarray(neg, float), np.asarray(pos, float)
    if len(neg) == 0 or len(pos) == 0:
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).mean()
    eq = (pos[:, None] == neg[None, :]).mean()
    return float(gt + 0.5 * eq)


def load(d: Path) -> List[Cell]:
    cells = []
    for js in sorted(d.glob("*.json")):
        m = NAME.match(js.stem)
        if not m:
            continue
        s = json.loads(js.read_text())
        eps = [Episode(bool(r["success"]), int(r["steps"]), r.get("stop_kind", ""), int(r.get("fault_step", 0)),
                       seed=r.get("seed"), success_step=r.get("success_step")) for r in s.get("results", [])]
        jl = js.with_suffix(".jsonl")
        if jl.exists():
            for line in jl.read_text().splitlines():
                t = json.loads(line)
                i = int(t["episode"])
                if 0 <= i < len(eps):
                    eps[i].ticks.append((int(t["tick"]), t["state"], t.get("energy"), t.get("centered_energy")))
        cells.append(Cell(m["policy"], m["task"], m["level"], int(m["k"]), m["fault"] or "", s, eps))
    return cells


def episode_score(ep: Episode, which: int, after: Optional[int] = None, agg=max,
                  window: Optional[int] = None) -> Optional[float]:
    """Aggregate (max by default) of score ``which`` (0 energy, 1 centered) over
    RUNNING ticks from ``after``; with ``window``, over the first ``window`` of
    them only, and None when fewer than half of the window exist."""
    vals = [v for t, *sc in ep.running() for v in [sc[which]] if v is not None and (after is None or t >= after)]
    if window is not None:
        vals = vals[:window]
        if len(vals) < window // 2:
            return None
    return float(agg(vals)) if vals else None


def _first(ep: Episode) -> int:
    r = ep.running()
    return r[0][0] if r else 0


def detect_delay(ep: Episode, thr: float, onset: int, which: int = 0) -> Optional[int]:
    """Ticks from onset until RULE_N of the last RULE_M fresh scores exceed thr (None: never)."""
    window: List[bool] = []
    for t, *sc in ep.running():
        v = sc[which]
        if v is None:
            continue
        window = (window + [v > thr])[-RULE_M:]
        if t >= onset and sum(window) >= RULE_N:
            return t - onset
    return None


def success_table(cells: List[Cell]) -> str:
    rows = ["| policy | task | level | K | success | 95% CI (Wilson) | n | steps to success (median) | paper (level 0) | "
            "the energy stop watched | never armed | safety stops | inference p50 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    key = POLICY_ORDER
    for c in sorted((c for c in cells if not c.fault),
                    key=lambda c: (key.get(c.policy, 9), TASKS.index(c.task) if c.task in TASKS else 9,
                                   LEVELS.index(c.level), c.k)):
        n = len(c.episodes)
        k = sum(e.success for e in c.episodes)
        lo, hi = wilson(k, n)
        paper = PAPER.get(c.policy, {}).get(c.task) if c.level == "0" else None
        trips = ", ".join(f"{a}={b}" for a, b in sorted(c.summary.get("trips", {}).items())) or "none"
        sts = median_steps(c.episodes)
        # what the stop watched (sim eval's summary; "off": a policy without an
        # energy; cells from before it was recorded: "–"), and the episodes auto-start never armed (the stop's
        # start check refused the scene all episode long: the arm never moved)
        watch = ",".join(c.summary.get("watch") or []) or ("off" if "never_armed" in c.summary else "–")
        never = c.summary.get("never_armed")
        p50 = c.summary.get("inference_p50_ms")
        rows.append(f"| {POLICY_NAMES.get(c.policy, c.policy)} | {c.task} | {c.level} | {c.k} | "
                    f"{100 * k / max(n, 1):.0f}% | {100 * lo:.0f}–{100 * hi:.0f}% | {n} | "
                    f"{'–' if sts is None else f'{sts:.0f}'} | "
                    f"{'' if paper is None else f'{paper:.1f}%'} | {watch} | {'–' if never is None else never} | "
                    f"{trips} | {'–' if p50 is None else f'{p50:.0f} ms'} |")
    return "\n".join(rows)


def threshold_of(cells: List[Cell], task: str, policy: str = "energyflow") -> Optional[float]:
    for c in cells:
        if c.task == task and c.policy == policy:
            b = c.summary.get("bundle") or ""
            p = Path(b) / "manifest.json" if b else Path(f"bundles/metaworld-{task}/manifest.json")
            if p.exists():
                cal = json.loads(p.read_text()).get("calibration") or {}
                r = cal.get("recommended") or {}
                if r.get("score") == "energy":
                    return float(r["threshold"])
    return None


def safety_tables(cells: List[Cell], rate: float) -> Tuple[str, dict]:
    rows = ["| policy | task | K | positives | n neg / pos | AUROC energy (max) | AUROC centered (max) | AUROC energy (mean) | "
            f"AUROC centered (mean) | AUROC energy (mean, first {MATCHED_WINDOW} ticks) | detected (3 of 5 > thr) | median delay (ticks) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fth = ["| policy | task | K | level-0 episodes | RUNNING ticks | hours at the run rate | energy stops | threshold exceedances (ticks) | false trips per hour (rule replay) |",
           "|---|---|---|---|---|---|---|---|---|"]
    head: dict = {"auroc": {}, "auroc_window_mean": {}, "false_trips_per_hour": {}}
    for pol in ENERGY_POLICIES:
        _safety_rows(cells, pol, rate, rows, fth, head)
    return "\n".join(rows) + "\n\n" + "\n".join(fth), head


def _safety_rows(cells: List[Cell], pol: str, rate: float, rows: List[str], fth: List[str], head: dict) -> None:
    """safety_tables' rows and report.json entries of one energy policy."""
    ef = [c for c in cells if c.policy == pol]
    name = POLICY_NAMES.get(pol, pol)
    for task in TASKS:
        for k in sorted({c.k for c in ef if c.task == task}):
            neg_cells = [c for c in ef if c.task == task and c.k == k and c.level == "0" and not c.fault]
            if not neg_cells:
                continue
            thr = threshold_of(cells, task, pol)
            neg = [e for c in neg_cells for e in c.episodes]
            ticks = sum(len(e.running()) for e in neg)
            hours = ticks / rate / 3600.0
            stops = sum(e.stop == "energy" for e in neg)
            exc = sum(1 for e in neg for _, v, _ in e.running() if v is not None and thr is not None and v > thr)
            replay = sum(detect_delay(e, thr, -1) is not None for e in neg) if thr is not None else 0
            fph = replay / hours if hours > 0 else float("nan")
            head["false_trips_per_hour"][_key(pol, f"{task} K={k}")] = fph
            fth.append(f"| {name} | {task} | {k} | {len(neg)} | {ticks} | {hours:.3f} | {stops} | {exc} | "
                       f"{replay} episodes → {fph:.1f}/h |")
            groups: Dict[str, List[Tuple[Episode, int]]] = {}
            for c in ef:
                if c.task != task or c.k != k or (c.level == "0" and not c.fault):
                    continue
                label = f"fault {fault_label(c.fault)}" if c.fault else f"level {c.level}"
                for e in c.episodes:
                    on = e.onset() if c.fault else (e.running()[0][0] if e.running() else None)
                    if on is not None:
                        groups.setdefault(label, []).append((e, on))
            for label in sorted(groups, key=lambda s: (s.startswith("fault"), s)):
                pos = groups[label]
                res = []
                # negatives over the same window as the positives: from the fault's
                # step (faults) or the whole episode (levels)
                fstep = next((c.episodes[0].fault_step for c in ef if c.task == task and c.k == k and
                              label == f"fault {fault_label(c.fault)}" and c.episodes), 0)
                for agg in (max, np.mean):
                    for which in (0, 1):
                        ns = [s for e in neg for s in [episode_score(e, which, _first(e) + fstep, agg)] if s is not None]
                        ps = [s for e, on in pos for s in [episode_score(e, which, on, agg)] if s is not None]
                        res.append((auroc(ns, ps), len(ns), len(ps)))
                # episode means compare phases of the task when one side runs
                # longer (failures run to the step limit): the same number of
                # ticks from the same start on both sides compares like with like
                nw = [s for e in neg for s in [episode_score(e, 0, _first(e) + fstep, np.mean, MATCHED_WINDOW)]
                      if s is not None]
                pw = [s for e, on in pos for s in [episode_score(e, 0, on, np.mean, MATCHED_WINDOW)] if s is not None]
                aw = auroc(nw, pw)
                delays = [detect_delay(e, thr, on) for e, on in pos] if thr is not None else []
                det = [d for d in delays if d is not None]
                med = f"{np.median(det):.0f}" if det else "–"
                head["auroc"][_key(pol, f"{task} K={k} {label}")] = res[0][0]
                head["auroc_window_mean"][_key(pol, f"{task} K={k} {label}")] = aw
                rows.append(f"| {name} | {task} | {k} | {label} | {res[0][1]} / {res[0][2]} | {res[0][0]:.2f} | {res[1][0]:.2f} | "
                            f"{res[2][0]:.2f} | {res[3][0]:.2f} | {aw:.2f} | {len(det)}/{len(pos)} | {med} |")


def calibration_of(task: str, cells: List[Cell], policy: str = "energyflow") -> dict:
    for c in cells:
        if c.task == task and c.policy == policy:
            b = c.summary.get("bundle") or f"bundles/metaworld-{task}"
            p = Path(b) / "manifest.json"
            if p.exists():
                return json.loads(p.read_text()).get("calibration") or {}
    return {}


def threshold_sweep(cells: List[Cell], rate: float) -> Tuple[str, dict]:
    """The 3-of-5 rule replayed on every trace at candidate thresholds (the
    held-out calibration quantiles of the energy): false trips per hour at
    level 0 against the share of OOD / fault episodes detected."""
    rows = ["| policy | task | threshold (energy) | level-0 episodes tripped | false trips per hour | "
            "detected: S / M / L / " + " / ".join(map(fault_label, FAULTS)) + " |", "|---|---|---|---|---|---|"]
    head = {}
    for pol, task in ((p, t) for p in ENERGY_POLICIES for t in TASKS):
        ef = [c for c in cells if c.policy == pol and c.task == task and c.k == 20]
        neg = [e for c in ef if c.level == "0" and not c.fault for e in c.episodes]
        cal = calibration_of(task, cells, pol)
        qs = ((cal.get("scores") or {}).get("energy") or {}).get("quantiles")
        if not neg or not qs:  # no held-out quantiles (a closed-loop-only calibration): nothing to sweep
            continue
        hours = sum(len(e.running()) for e in neg) / rate / 3600.0
        for q in ("90", "99", "99.9"):
            thr = float(qs[q])
            fp = sum(detect_delay(e, thr, -1) is not None for e in neg)
            det = []
            for lab in ("S", "M", "L", *FAULTS):
                grp = [(e, e.onset() if c.fault else _first(e)) for c in ef
                       if (c.fault == lab) or (not c.fault and c.level == lab) for e in c.episodes]
                if not grp:
                    det.append("–")
                    continue
                n = sum(detect_delay(e, thr, on) is not None for e, on in grp if on is not None)
                det.append(f"{n}/{len(grp)}")
            head[_key(pol, f"{task} q{q}")] = {"threshold": thr, "false_trips_per_hour": fp / hours if hours else None}
            rows.append(f"| {POLICY_NAMES.get(pol, pol)} | {task} | q{q} = {thr:.1f} | {fp}/{len(neg)} | {fp / hours if hours else float('nan'):.0f}/h "
                        f"(over {hours:.3f} h) | {' / '.join(det)} |")
    return "\n".join(rows), head


def reward_table(cells: List[Cell]) -> Tuple[str, dict]:
    rows = ["| policy | task | episodes (success / failure) | AUROC mean centered reward | AUROC mean −energy |",
            "|---|---|---|---|---|"]
    head = {}
    for pol, task in ((p, t) for p in ENERGY_POLICIES for t in TASKS):
        eps = [e for c in cells if c.policy == pol and c.task == task and not c.fault for e in c.episodes]
        if pol != "energyflow" and not eps:
            continue
        name = POLICY_NAMES.get(pol, pol)
        vals = []
        for e in eps:
            r = [(-v_e, -v_c) for _, v_e, v_c in e.running() if v_e is not None and v_c is not None]
            if r:
                a = np.asarray(r)
                vals.append((e.success, a[:, 1].mean(), a[:, 0].mean()))
        s = [v for v in vals if v[0]]
        f = [v for v in vals if not v[0]]
        if not s or not f:
            rows.append(f"| {name} | {task} | {len(s)} / {len(f)} | – (needs both) | – |")
            continue
        a1 = auroc([v[1] for v in f], [v[1] for v in s])
        a2 = auroc([v[2] for v in f], [v[2] for v in s])
        head[_key(pol, task)] = a1
        rows.append(f"| {name} | {task} | {len(s)} / {len(f)} | {a1:.2f} | {a2:.2f} |")
    return "\n".join(rows), head


def _mean_reward(ep: Episode, window: Optional[int] = None) -> Optional[float]:
    """Mean centered reward -(E - E_ref) over the episode's RUNNING ticks (the
    first `window` of them when given; see episode_score)."""
    c = episode_score(ep, 1, agg=np.mean, window=window)
    return None if c is None else -c


#: RUNNING ticks after which reward_cell_table reports the energy of failed
#: episodes: beyond the length of a typical success (about 80-100 steps)
LATE_PHASE = 100


def _late_energy(ep: Episode) -> Optional[float]:
    """Mean energy of an episode's RUNNING ticks after the first LATE_PHASE."""
    r = [e for _, e, _ in ep.running()[LATE_PHASE:] if e is not None]
    return float(np.mean(r)) if r else None


def reward_cell_table(cells: List[Cell], window: int = MATCHED_WINDOW) -> Tuple[str, dict]:
    """Reward AUROC (successes over failures) within each cell, on the whole
    episode and on the first `window` ticks. A failure runs to the step limit
    and a success ends early, so the whole-episode mean also compares phases
    of the task; the matched window compares like with like. The last two
    columns show the phase effect: the median over episodes of the mean
    energy of successful episodes, and of failed ones after tick
    LATE_PHASE (the stretch successes never reach)."""
    rows = [f"| policy | task | level | K | success / failure | AUROC, whole episode | AUROC, first {window} ticks | "
            f"energy of successes (median episode mean) | energy of failures after tick {LATE_PHASE} |",
            "|---|---|---|---|---|---|---|---|---|"]
    head = {}
    for c in sorted(cells, key=lambda c: (ENERGY_POLICIES.index(c.policy) if c.policy in ENERGY_POLICIES else 99,
                                          TASKS.index(c.task) if c.task in TASKS else 99, c.k, LEVELS.index(c.level))):
        if c.policy not in ENERGY_POLICIES or c.fault:
            continue
        whole = [(e.success, _mean_reward(e)) for e in c.episodes]
        win = [(e.success, _mean_reward(e, window)) for e in c.episodes]
        whole = [(s, v) for s, v in whole if v is not None]
        win = [(s, v) for s, v in win if v is not None]
        ns, nf = sum(s for s, _ in whole), sum(not s for s, _ in whole)
        if not ns or not nf:
            continue
        a1 = auroc([v for s, v in whole if not s], [v for s, v in whole if s])
        a2 = auroc([v for s, v in win if not s], [v for s, v in win if s])
        e_s = [episode_score(e, 0, agg=np.mean) for e in c.episodes if e.success]
        e_f = [_late_energy(e) for e in c.episodes if not e.success]
        e_s = [v for v in e_s if v is not None]
        e_f = [v for v in e_f if v is not None]
        med = lambda v: f"{np.median(v):.0f}" if v else "–"  # noqa: E731
        head[_key(c.policy, f"{c.task} K={c.k} level {c.level}")] = {"whole": a1, "window": a2}
        rows.append(f"| {POLICY_NAMES.get(c.policy, c.policy)} | {c.task} | {c.level} | {c.k} | {ns} / {nf} | "
                    f"{a1:.2f} | {a2:.2f} | {med(e_s)} | {med(e_f)} |")
    return "\n".join(rows), head


def position_table(cells: List[Cell], d: Path) -> str:
    """Success on the nearer and the farther half of the scenes, by the
    distance of the scene's randomized positions (sim.positions,
    positions_<task>_<level>.json: object and/or goal, in metres) from their
    mean over the seeds. A policy that reads the object's position
    succeeds on both halves; one that replays an average motion only on the
    nearer one. Cells without a single success are left out."""
    rows = ["| policy | task | level | K | success, nearer half | success, farther half | split at |",
            "|---|---|---|---|---|---|---|"]
    key = POLICY_ORDER
    docs = [json.loads(f.read_text()) for f in d.glob("positions_*.json")]
    for doc in sorted(docs, key=lambda doc: (TASKS.index(doc["task"]) if doc["task"] in TASKS else 9, doc["level"])):
        scene = {int(e["seed"]): np.asarray(e["scene"], float) for e in doc["episodes"]}
        centre = np.mean(list(scene.values()), axis=0)
        dist = {s: float(np.linalg.norm(v - centre)) for s, v in scene.items()}
        cut = float(np.median(list(dist.values())))
        for c in sorted((c for c in cells if c.task == doc["task"] and c.level == doc["level"] and not c.fault),
                        key=lambda c: (key.get(c.policy, 9), c.k)):
            eps = [e for e in c.episodes if e.seed in dist]
            near = [e.success for e in eps if dist[e.seed] <= cut]
            far = [e.success for e in eps if dist[e.seed] > cut]
            if not near or not far or not any(near + far):
                continue
            rows.append(f"| {POLICY_NAMES.get(c.policy, c.policy)} | {c.task} | {c.level} | {c.k} | "
                        f"{sum(near)}/{len(near)} | {sum(far)}/{len(far)} | {100 * cut:.1f} cm |")
    return "\n".join(rows) if len(rows) > 2 else "(no positions with a success: python -m sim.positions)"


def fault_outcome_table(cells: List[Cell]) -> str:
    """Each fault cell against the same policy, task and K at level 0 without
    the fault, seed by seed: how many episodes the fault changed."""
    rows = ["| policy | task | K | fault | success with the fault | without | episodes with the same outcome |",
            "|---|---|---|---|---|---|---|"]
    for c in cells:
        if not c.fault:
            continue
        base = next((b for b in cells if (b.policy, b.task, b.k, b.level) == (c.policy, c.task, c.k, "0")
                     and not b.fault), None)
        if base is None:
            continue
        was = {e.seed: e.success for e in base.episodes if e.seed is not None}
        pairs = [(e.success, was[e.seed]) for e in c.episodes if e.seed in was]
        if not pairs:
            continue
        rows.append(f"| {POLICY_NAMES.get(c.policy, c.policy)} | {c.task} | {c.k} | {fault_label(c.fault)} | "
                    f"{sum(a for a, _ in pairs)}/{len(pairs)} | {sum(b for _, b in pairs)}/{len(pairs)} | "
                    f"{sum(a == b for a, b in pairs)}/{len(pairs)} |")
    return "\n".join(rows) if len(rows) > 2 else "(no fault cells)"


def fault_stop_table(cells: List[Cell], rate: float) -> str:
    """What the stop as run did on each fault cell: episodes it stopped after
    the onset, how many within 1 s (``rate`` environment steps, one per tick in
    lockstep), the median delay, and stops before the onset (false alarms)."""
    rows = ["| policy | task | K | fault | stopped after the onset | within 1 s | median delay (steps) | "
            "stopped before the onset | watched |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if not c.fault:
            continue
        stops = [e for e in c.episodes if e.stop]
        delays = sorted(e.steps - e.fault_step for e in stops if e.steps >= e.fault_step)
        n = len(c.episodes)
        med = f"{statistics.median(delays):g}" if delays else "–"
        rows.append(f"| {POLICY_NAMES.get(c.policy, c.policy)} | {c.task} | {c.k} | {fault_label(c.fault)} | "
                    f"{len(delays)}/{n} | {sum(d <= rate for d in delays)}/{n} | {med} | "
                    f"{len(stops) - len(delays)}/{n} | {', '.join(c.summary.get('watch') or []) or '–'} |")
    return "\n".join(rows) if len(rows) > 2 else "(no fault cells)"


def latency_table(d: Path) -> str:
    """energyflow bench results (latency_<policy>_<task>_K<k>.json) and LeRobot's own timing."""
    rows = ["| policy | bundle | steps | p50 ms | p90 ms | p99 ms | CPU ms per sample | allocations per sample | "
            "vision p50 ms per frame |", "|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(d.glob("latency_*.json")):
        try:
            b = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        pol = p.stem.split("_")[1]
        rows.append(f"| {POLICY_NAMES.get(pol, pol)} | {Path(b['bundle']).name} | {b['steps']} | {b['p50_ms']:.1f} | "
                    f"{b['p90_ms']:.1f} | {b['p99_ms']:.1f} | {b.get('cpu_ms_per_sample', float('nan')):.1f} | "
                    f"{b.get('allocs_per_sample', '')} | {_vision_ms(b)} |")
    for p in sorted(d.glob("lerobot_*.json")):
        s = json.loads(p.read_text())
        if s.get("inference_p50_ms") is not None and s.get("level") == "0":
            rows.append(f"| {POLICY_NAMES['lerobot']} (torch, its select_action) | {s['task']} | 20 | "
                        f"{s['inference_p50_ms']:.1f} | {s['inference_p90_ms']:.1f} | | | | |")
    return "\n".join(rows) if len(rows) > 2 else "(no latency runs)"


def _vision_ms(bench: dict) -> str:
    """The vision graph's p50 per camera frame (image bundles), else a dash."""
    v = bench.get("vision") or []
    return ", ".join(f"{x['p50_ms']:.2f}" for x in v) or "–"


def median_steps(eps: Sequence[Episode]) -> Optional[float]:
    """Median steps to success over the successful episodes (None: none)."""
    v = [e.steps_to_success() for e in eps if e.success]
    return float(np.median(v)) if v else None


#: rollout_<policy>_<task>_<level>_K<k>.json (older runs: rollout_<policy>_<task>_K<k>.json, level 0)
ROLLOUT = re.compile(r"^rollout_(?P<policy>[a-z]+)_(?P<task>[a-z-]+?)(?:_(?P<level>[0SML]))?_K(?P<k>\d+)$")


def load_rollouts(d: Path) -> List[Cell]:
    """python -m energyflow.rollout results as cells (no ticks, no faults)."""
    out = []
    for p in sorted(d.glob("rollout_*.json")):
        m = ROLLOUT.match(p.stem)
        if not m:
            continue
        s = json.loads(p.read_text())
        eps = [Episode(bool(r["success"]), int(r["steps"]), "", 0, seed=r.get("seed"),
                       success_step=r.get("success_step")) for r in s.get("results", [])]
        out.append(Cell(m["policy"], m["task"], m["level"] or "0", int(m["k"]), "", s, eps))
    return out


def rollout_table(d: Path, cells: Optional[List[Cell]] = None) -> str:
    """The policy alone (rollout.py, no runtime) beside the same policy through
    the runtime on the same seeds: success each way, the difference in points,
    and steps to success (median over each side's successes, and the median
    per-seed difference over the seeds both solved)."""
    rows = ["| policy | task | level | sampler steps | success, no runtime | 95% CI | through the runtime | "
            "runtime − direct (points) | steps to success, direct / runtime | extra steps per success (paired median) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    by_key = {(c.policy, c.task, c.level, c.k): c for c in (cells or []) if not c.fault}
    for r in load_rollouts(d):
        n, k = len(r.episodes), sum(e.success for e in r.episodes)
        lo, hi = wilson(k, n)
        rt = by_key.get((r.policy, r.task, r.level, r.k))
        rt_cell = diff = paired = "–"
        sd, srt = median_steps(r.episodes), None
        if rt is not None:
            kr, nr = sum(e.success for e in rt.episodes), len(rt.episodes)
            rt_cell = f"{kr}/{nr}"
            diff = f"{100 * (kr / max(nr, 1) - k / max(n, 1)):+.0f}"
            srt = median_steps(rt.episodes)
            direct = {e.seed: e for e in r.episodes if e.success and e.seed is not None}
            both = [e.steps_to_success() - direct[e.seed].steps_to_success()
                    for e in rt.episodes if e.success and e.seed in direct]
            if both:
                paired = f"{np.median(both):+.0f} (n = {len(both)})"
        steps = f"{'–' if sd is None else f'{sd:.0f}'} / {'–' if srt is None else f'{srt:.0f}'}"
        rows.append(f"| {POLICY_NAMES.get(r.policy, r.policy)} | {r.task} | {r.level} | {r.k} | {k}/{n} | "
                    f"{100 * lo:.0f}–{100 * hi:.0f}% | {rt_cell} | {diff} | {steps} | {paired} |")
    return "\n".join(rows) if len(rows) > 2 else "(no rollouts)"


def plots(cells: List[Cell], img: Path) -> List[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    out = []
    # Figure-5 analog: success vs level per task and policy.
    fig, axes = plt.subplots(1, len(TASKS), figsize=(3.2 * len(TASKS), 3), sharey=True)
    styles = (("energyflow", "o-"), ("image", "D-."), ("diffusion", "s--"), ("lerobot", "^:"))
    # one colour per policy and K across every panel (the colour cycle restarts per panel)
    series = [(pol, k) for pol, _ in styles for k in sorted({c.k for c in cells if c.policy == pol})]
    colour = {s: f"C{i}" for i, s in enumerate(series)}
    for ax, task in zip(axes, TASKS):
        for pol, mk in styles:
            for k in sorted({c.k for c in cells if c.policy == pol}):
                xs, ys = [], []
                for i, lv in enumerate(LEVELS):
                    c = next((c for c in cells if c.policy == pol and c.task == task and c.level == lv and c.k == k
                              and not c.fault), None)
                    if c and c.episodes:
                        xs.append(i)
                        ys.append(100 * sum(e.success for e in c.episodes) / len(c.episodes))
                if xs:
                    ax.plot(xs, ys, mk, color=colour[(pol, k)], label=f"{pol} K={k}")
        ax.set_xticks(range(4), LEVELS)
        ax.set_title(task)
        ax.set_ylim(-5, 105)
    axes[0].set_ylabel("success %")
    seen: Dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        axes[-1].legend(list(seen.values()), list(seen), fontsize=7)
    fig.tight_layout()
    p = img / "eval-success-vs-level.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    out.append(str(p))
    # Reward traces: one success and one failure of the same task.
    for task in TASKS:
        eps = [e for c in cells if c.policy == "energyflow" and c.task == task and not c.fault for e in c.episodes]
        s = next((e for e in eps if e.success and e.running()), None)
        f = next((e for e in eps if not e.success and e.running()), None)
        if s is None or f is None:
            continue
        fig, ax = plt.subplots(figsize=(6, 3))
        for e, lab in ((s, "success"), (f, "failure")):
            r = [(t, -c) for t, _, c in e.running() if c is not None]
            if r:
                t0 = r[0][0]
                ax.plot([t - t0 for t, _ in r], [v for _, v in r], label=lab)
        ax.set_xlabel("tick")
        ax.set_ylabel("centered reward −(E − E_ref)")
        ax.set_title(f"{task}: reward traces")
        ax.legend()
        fig.tight_layout()
        p = img / f"eval-reward-traces-{task}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        out.append(str(p))
        break
    # Monitor score distributions per level (first task with OOD runs).
    for task in TASKS:
        groups = {}
        for c in cells:
            if c.policy == "energyflow" and c.task == task:
                label = f"fault {fault_label(c.fault)}" if c.fault else c.level
                groups.setdefault(label, []).extend(
                    s for e in c.episodes for s in [episode_score(e, 0, e.onset() if c.fault else None)] if s is not None)
        if len(groups) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 3))
        labels = sorted(groups, key=lambda s: (s.startswith("fault"), LEVELS.index(s) if s in LEVELS else 0, s))
        ax.boxplot([groups[k] for k in labels], tick_labels=labels)
        thr = threshold_of(cells, task)
        if thr is not None:
            ax.axhline(thr, color="r", ls="--", lw=1, label="threshold")
            ax.legend()
        ax.set_ylabel("episode max energy\n(faults: from the onset)")
        ax.set_title(f"{task}: safety score by condition")
        fig.tight_layout()
        p = img / f"eval-energy-by-level-{task}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        out.append(str(p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="build/eval")
    ap.add_argument("--out", default="build/eval/report.md")
    ap.add_argument("--img", default="build/eval/img")
    ap.add_argument("--rate", type=float, default=20.0, help="control rate of the runs (Hz)")
    a = ap.parse_args()
    cells = load(Path(a.dir))
    if not cells:
        raise SystemExit(f"eval_report: no runs in {a.dir} (scripts/evaluate.sh writes them)")
    st, sh = safety_tables(cells, a.rate)
    rt, rh = reward_table(cells)
    rc, rch = reward_cell_table(cells)
    sw, swh = threshold_sweep(cells, a.rate)
    figs = plots(cells, Path(a.img))
    md = "\n\n".join([
        "## Closed-loop success (RQ1, RQ4)", success_table(cells),
        "### The policy alone (reference sampler straight on Meta-World, same seeds, no runtime) and through the runtime",
        rollout_table(Path(a.dir), cells),
        "### Success by where the scene is (level 0; distance of the randomized positions from their mean, sim.positions)", position_table(cells, Path(a.dir)),
        "## The policy energy as an alarm (energy of the committed chunk)",
        "Replayed offline with the energy's own rule (3 of 5 at the calibration's recommended threshold). "
        "A bundle with the state term is stopped on `state_energy` by default, not on this score "
        "(the success table's \"watched\" column says what each cell's stop watched): these tables "
        "compare the policy energy as a candidate, they are not the shipped stop's false trips.", st,
        "### What each fault changed (same seeds, with and without it)", fault_outcome_table(cells),
        "### The stop on each fault (as run; the onset is the fault's environment step)",
        fault_stop_table(cells, a.rate),
        "### Threshold sweep of the policy energy (3-of-5 rule replayed on the traces, K = 20)", sw,
        "## Reward quality (RQ3 in miniature)", rt,
        f"### Within each cell, whole episode and the first {MATCHED_WINDOW} ticks", rc,
        "## Inference latency (RQ6, this machine)", latency_table(Path(a.dir)),
        "Plots: " + ", ".join(figs),
    ]) + "\n"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(md)
    Path(a.out).with_suffix(".json").write_text(json.dumps({"safety": sh, "sweep": swh, "reward_auroc": rh, "reward_auroc_cell": rch}, indent=2))
    print(md)


if __name__ == "__main__":
    main()
