"""RND trained on the policy's own states: does it keep its reach into shifted scenes without
calling the policy's closed loop new? (research/notes/evaluation-log.md, "RND on the policy's own states")

    OMP_NUM_THREADS=1 .venv/bin/python -m research.ood.rnd_rollouts --bundle bundles/metaworld-button-press \
        --data build/demos/button-press.hdf5 --task button-press [--rollouts 120] [--rollout-seed 21000] \
        [--max-late 3] [--episodes 50] [--seed 1000] [--json FILE]

Through the runtime RND on cond, trained on the demonstrations, lifted the state score over its
held-out q99.9 in 20 of 50 normal ButtonPress episodes: the policy's closed loop, its plans
landing a tick or more late, visits states near the demonstrations' but not on them. FIPER
calibrates on successful rollouts of the policy; this trains on them too.

1. The bundle's policy drives --rollouts level-0 episodes straight on Meta-World
   (``energyflow.rollout.rollout``, the bundle's K) with the runtime's lateness imitated:
   each plan lands d steps late, d uniform in 0..--max-late, the previous chunk running on
   meanwhile (its last action held when it runs out), and the new chunk starts d steps in
   (``energyflow.rollout.late_plan``).
   The first --fit-fraction of these episodes are the fit set, the rest the check set.
2. RND (``state_term.train_rnd``, the state term's component, same seed and steps) is
   trained twice: on every step of the training demonstrations (``rnd_demo``, as the state
   term and ``ood_compare.py`` train it) and on those plus the fit episodes (``rnd_policy``).
3. Scored on the same expert episodes as ``ood_compare.py`` (levels 0 and S/M/L, seeds
   --seed…): per-step and per-episode AUROC (the max over the first --first steps, and the
   largest 2-of-5 statistic, the gate's window); and the check episodes tripping the 2-of-5
   rule at the score's held-out q99.9 (the lateness the runtime adds is imitated, not the
   runtime). Rows: the shipped state score, each RND alone, and the state score folded with
   each (the max of the state score and RND z-scored on the held-out demonstration steps, as
   ``--rnd-steps`` folds it into ``state_energy.onnx``).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Callable, Dict, List

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402


def policy_episodes(bundle: Path, task: str, n: int, seed: int, max_late: int, max_steps: int = 500):
    """cond [L, D] of every step of n level-0 episodes driven by the bundle's policy, its plans
    landing 0..max_late steps late (``energyflow.rollout.rollout``)."""
    from energyflow.rollout import load_planner, rollout
    from sim.world import World

    pl = load_planner(bundle)
    w = World(task, camera_size=None)
    out = []
    for i in range(n):
        conds: List[np.ndarray] = []
        r = rollout(pl, w, seed + i, max_steps=max_steps, max_late=max_late,
                    on_step=lambda hist: conds.append(pl.cond(hist)[0]))
        out.append({"seed": seed + i, "success": r["success"], "cond": np.stack(conds)})
    w.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--rollouts", type=int, default=120)
    p.add_argument("--rollout-seed", type=int, default=21000)
    p.add_argument("--max-late", type=int, default=3, help="plans land 0..N steps late")
    p.add_argument("--fit-fraction", type=float, default=0.75)
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--first", type=int, default=60)
    p.add_argument("--rnd-steps", type=int, default=3000)
    p.add_argument("--boot", type=int, default=1000)
    p.add_argument("--json", default="")
    a = p.parse_args(argv)

    import torch

    from energyflow import state_term as st
    from energyflow.bundle import read_manifest
    from energyflow.data import Demo, load_hdf5, split_demos
    from research.ood import ood_compare as oc
    from research.ood.state_components import watched

    torch.set_num_threads(1)
    bundle = Path(a.bundle)
    man = read_manifest(bundle)
    blk = man.get("state_energy")
    if not blk:
        raise SystemExit(f"rnd_rollouts: {bundle} has no state term")
    demos, _ = load_hdf5(a.data, [o["name"] for o in man["obs"] if o["kind"] == "state"])
    train_demos, held = split_demos(demos, blk["train"]["val_fraction"], blk["train"]["split_seed"])
    tr, _ = st.step_conds(train_demos, man)
    va, _ = st.step_conds(held, man)

    rolls = policy_episodes(bundle, a.task, a.rollouts, a.rollout_seed, a.max_late)
    n_fit = int(a.fit_fraction * len(rolls))
    fit, check = rolls[:n_fit], rolls[n_fit:]
    state = oc.StateEnergyScore(bundle / blk["graph"])
    rnd = {"rnd_demo": oc.RND(tr, a.rnd_steps, 0),
           "rnd_policy": oc.RND(np.concatenate([tr] + [e["cond"] for e in fit]), a.rnd_steps, 0)}
    scores: Dict[str, Callable[[np.ndarray], np.ndarray]] = {"state": state, **rnd}
    for k, f in rnd.items():
        v = f(va)
        mu, sd = float(v.mean()), float(max(v.std(), 1e-12))
        scores[f"state+{k}"] = (lambda f, mu, sd: lambda c: np.maximum(state(c), (f(c) - mu) / sd))(f, mu, sd)

    skey = next(o["name"] for o in man["obs"] if o["kind"] == "state")
    levels = oc.LEVELS
    cond = {lv: [st.step_conds([Demo("ep", np.zeros((len(e["states"]), man["action_dim"]), np.float32),
                                     {skey: e["states"]})], man)[0]
                 for e in oc.expert_episodes(a.task, lv, range(a.seed, a.seed + a.episodes), 200, 10)]
            for lv in levels}
    rng = np.random.default_rng(0)
    res: Dict = {"task": a.task, "bundle": str(bundle), "rollouts": {
        "n": len(rolls), "seed": a.rollout_seed, "max_late": a.max_late, "fit": len(fit), "check": len(check),
        "succeeded": sum(e["success"] for e in rolls), "fit_steps": int(sum(len(e["cond"]) for e in fit))},
        "scores": {}}
    print(f"{a.task}: {len(rolls)} policy episodes (seeds {a.rollout_seed}-{a.rollout_seed + len(rolls) - 1}, "
          f"plans 0-{a.max_late} steps late), {res['rollouts']['succeeded']} succeeded; fit on the first "
          f"{len(fit)} ({res['rollouts']['fit_steps']} steps), checked on {len(check)}; expert episodes "
          f"seeds {a.seed}-{a.seed + a.episodes - 1} per level")
    print("| score | held-out q99.9 | " + " | ".join(f"{lv}: per step / per episode, max / 2 of 5"
                                                     for lv in levels[1:])
          + " | check episodes tripped, 2 of 5 (largest statistic) |")
    print("|---|---|" + "---|" * len(levels[1:]) + "---|")
    for k, f in scores.items():
        thr = float(np.quantile(f(va), 0.999))
        s = {lv: [f(c) for c in cond[lv]] for lv in levels}
        row, rec = [], {"q999": thr, "levels": {}}
        for lv in levels[1:]:
            step = oc.boot_auroc(s["0"], s[lv], a.boot, rng)
            epi = oc.boot_auroc([x[:a.first].max(keepdims=True) for x in s["0"]],
                                [x[:a.first].max(keepdims=True) for x in s[lv]], a.boot, rng)
            win = oc.boot_auroc([np.array([watched(x[:a.first]).max()]) for x in s["0"]],
                                [np.array([watched(x[:a.first]).max()]) for x in s[lv]], a.boot, rng)
            rec["levels"][lv] = {"step": step, "episode": epi, "episode_window": win}
            row.append(f"{step[0]:.3f} / {epi[0]:.3f} [{epi[1]:.2f}–{epi[2]:.2f}] / "
                       f"{win[0]:.3f} [{win[1]:.2f}–{win[2]:.2f}]")
        stat = [float(watched(f(e["cond"])).max()) for e in check]
        tripped = sum(v > thr for v in stat)
        rec["check"] = {"tripped": int(tripped), "of": len(check), "largest": max(stat)}
        res["scores"][k] = rec
        print(f"| {k} | {thr:.3g} | " + " | ".join(row) + f" | {tripped}/{len(check)} ({max(stat):.3g}) |", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
