"""What a late plan does to the state score: the arm held for a tick, or run on the plan's tail.

    OMP_NUM_THREADS=1 .venv/bin/python -m research.rollouts.hold_probe --bundle bundles/metaworld-assembly \
        --task assembly [--seed 53000] [--episodes 10] [--late-at 24 40 56] [--late 1] [--rate 10]

The bundle's policy drives Meta-World in-process (``energyflow.rollout``'s
reference sampler, the bundle's K, one plan per T_a steps, no runtime). In
each episode one plan, the first due at or after a step of ``--late-at``,
lands ``--late`` steps late, and those steps are bridged three ways, with
the same scene, the same sampler noise and the same late plan:

- ``on time``: the plan is not late (the reference);
- ``hold``: the arm is commanded zero velocity for the late steps, the
  gripper kept, as the runtime does when its committed chunk runs out
  before the next plan lands (runtime/loop.go, step 5);
- ``tail``: the late steps run on the previous plan's actions past its
  executed window (its T_a+1st on), the bridge Diffusion Policy's
  real-robot loop uses.

The late plan is then executed from the action due now (latency
compensation, as runtime/chunk.go drops the stale ones). After every step
the shipped ``state_energy.onnx`` reads the newest observation history with
its row of z-scores (``state_components.components_session``). Printed per
bridge: the episodes that succeeded; over the ``--window`` steps from the
late plan's due step, the median and largest reading of ``state_energy``
and of each component (g, transition); and each episode's 2-of-5 statistic
(the gate's rule: the 2nd largest of any 5 consecutive ticks), against the
threshold the bundle's default watch uses at ``--rate`` (its closed-loop
calibration for that rate, as research/stop/false_trips.py reads it).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Dict, List, Optional

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402

BRIDGES = ("on time", "hold", "tail")


def bridge_actions(prev_plan: np.ndarray, start: int, ta: int, late: int, how: str) -> List[np.ndarray]:
    """The actions executed for the ``late`` steps before a late plan lands.

    ``prev_plan`` is the previous plan ``[T_p, D_a]``, its executed window
    ``start .. start+ta-1``. ``hold``: zero velocity, the window's last
    gripper command kept. ``tail``: the plan's actions past the window (its
    last one repeated if the tail is shorter than ``late``)."""
    if how == "on time" or late <= 0:
        return []
    if how == "hold":
        a = np.zeros_like(prev_plan[0])
        a[-1] = prev_plan[start + ta - 1, -1]
        return [a] * late
    if how == "tail":
        tail = list(prev_plan[start + ta:])
        if not tail:
            tail = [prev_plan[-1]]
        return (tail + [tail[-1]] * late)[:late]
    raise ValueError(f"unknown bridge {how!r}: want one of {BRIDGES}")


def two_of_five(x: np.ndarray) -> float:
    """The gate's 2-of-5 statistic: the largest 2nd-largest reading of any 5 consecutive ticks."""
    if len(x) < 2:
        return float("nan")
    w = min(5, len(x))
    return float(max(np.sort(x[i:i + w])[-2] for i in range(len(x) - w + 1)))


def episode(planner, world, score, seed: int, late_at: int, late: int, how: str, max_steps: int) -> Dict:
    """One episode; the first plan due at or after ``late_at`` lands ``late`` steps late, bridged by ``how``.

    Returns success, the step the late plan was due (-1: none), and the
    per-step readings of state_energy and its components."""
    to, ta = planner.obs_horizon, planner.action_horizon
    start = to - 1
    o = world.reset(level="0", seed=seed)
    hist = [o] * to
    rng = np.random.default_rng(seed)
    reads: Dict[str, List[float]] = {}
    steps, due, prev = 0, -1, None

    def step(a: np.ndarray) -> None:
        nonlocal steps, hist
        hist = (hist + [world.step(a).obs])[-to:]
        steps += 1
        for k, v in score(hist).items():
            reads.setdefault(k, []).append(v)

    while steps < max_steps and not world.success:
        z = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        plan = planner.plan(planner.cond(hist), z)[0]
        d = 0
        if due < 0 and steps >= late_at and prev is not None and how != "on time":
            due, d = steps, late
            for a in bridge_actions(prev, start, ta, d, how):
                step(a)
                if world.success or steps >= max_steps:
                    break
        elif due < 0 and steps >= late_at:
            due = steps
        for a in plan[start + d:start + ta]:
            if world.success or steps >= max_steps:
                break
            step(a)
        prev = plan
    return {"success": bool(world.success), "due": due,
            "reads": {k: np.asarray(v, np.float64) for k, v in reads.items()}}


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--seed", type=int, default=53000)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--late-at", type=int, nargs="+", default=[24, 40, 56],
                   help="the late plan is the first due at or after this step (one episode per value and seed)")
    p.add_argument("--late", type=int, default=1, help="steps the plan lands late")
    p.add_argument("--window", type=int, default=5, help="steps read from the late plan's due step")
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--rate", type=float, default=None,
                   help="the control rate whose threshold to compare with (default: the bundle's primary calibration)")
    a = p.parse_args(argv)
    if a.late < 1 or a.window < 1 or a.episodes < 1:
        raise SystemExit("hold_probe: --late, --window and --episodes must be at least 1")

    from energyflow.bundle import read_manifest
    from energyflow.rollout import load_planner
    from research.ood.state_components import components_session, per_component
    from research.stop.false_trips import default_threshold
    from sim.world import World

    bundle = Path(a.bundle)
    man = read_manifest(bundle)
    sess, out_name, z_name, names = components_session(bundle, man)
    thr, thr_src = default_threshold(man, a.rate)
    planner = load_planner(bundle)
    if min(a.late_at) < planner.action_horizon:
        raise SystemExit(f"hold_probe: --late-at {min(a.late_at)} is inside the first plan (T_a = "
                         f"{planner.action_horizon}): a late plan needs a previous one to bridge from")
    world = World(a.task, camera_size=None)

    def score(hist: List[np.ndarray]) -> Dict[str, float]:
        se, z = sess.run([out_name, z_name], {"cond": planner.cond(hist)})
        out = {"state_energy": float(np.asarray(se).reshape(-1)[0])}
        for c, v in per_component(np.asarray(z, np.float64).reshape(1, -1), names).items():
            out[c] = float(v[0])
        return out

    comps = ["state_energy"] + list(dict.fromkeys(names))
    print(f"{a.task}, {bundle}: {a.episodes} level-0 scenes (seeds {a.seed}–{a.seed + a.episodes - 1}) × "
          f"late plans at steps ≥ {a.late_at}, {a.late} step(s) late; readings over the {a.window} steps "
          f"from the late plan's due step; threshold {thr:.4g} ({thr_src})\n")
    print("| bridge | episodes succeeded | " + " | ".join(f"{c}: median / max" for c in comps)
          + " | episodes' 2-of-5 statistic: median / max | over the threshold |")
    print("|---|---|" + "---|" * len(comps) + "---|---|")
    for how in BRIDGES:
        ok, n, stats, win = 0, 0, [], {c: [] for c in comps}
        for s in range(a.seed, a.seed + a.episodes):
            for at in a.late_at:
                e = episode(planner, world, score, s, at, a.late, how, a.max_steps)
                n += 1
                ok += e["success"]
                stats.append(two_of_five(e["reads"]["state_energy"]))
                if e["due"] >= 0:
                    for c in comps:
                        w = e["reads"][c][e["due"]:e["due"] + a.window]
                        if len(w):
                            win[c].append(float(w.max()))
        cells = " | ".join(f"{np.median(win[c]):.4g} / {max(win[c]):.4g}" if win[c] else "–" for c in comps)
        st = np.asarray(stats)
        print(f"| {how} | {ok}/{n} | {cells} | {np.nanmedian(st):.4g} / {np.nanmax(st):.4g} | {int((st > thr).sum())} |")


if __name__ == "__main__":
    main()
