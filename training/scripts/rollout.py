"""Closed-loop rollouts of a bundle straight on Meta-World, without the runtime.

    .venv/bin/python training/scripts/rollout.py BUNDLE --task button-press [--level 0]
        [--episodes 10] [--seed 1000] [--max-steps 200] [--steps K]

The reference sampler (ONNX Runtime, Algorithm 2 or DDIM by the bundle's
kind) plans a chunk from the last T_o observations, the first T_a actions
from the current step are executed, then it replans: Diffusion Policy's
receding horizon with no latency, no camera, no safety gate and no Modbus.
Beside `energyflow sim eval` on the same seeds it separates what the policy
does from what the runtime adds (docs/evaluation.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "training")]
os.environ.setdefault("MUJOCO_GL", "osmesa")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("--task", required=True)
    p.add_argument("--level", default="0")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--steps", type=int, default=None, help="sampler steps (bundle default)")
    p.add_argument("--json", default="")
    a = p.parse_args()

    from energyflow.bundle import read_manifest
    from sim.world import World

    man = read_manifest(a.bundle)
    To, Ta = man["obs_horizon"], man["action_horizon"]
    st = next(o for o in man["obs"] if o["kind"] == "state")
    smean, sstd = np.asarray(st["norm"]["mean"], np.float32), np.asarray(st["norm"]["std"], np.float32)
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    sch = man["schedule"]
    if man["policy"] == "diffusion":
        from energyflow.diffusion import OrtEps, ddim_sample

        eps = OrtEps(Path(a.bundle) / man["graphs"]["eps"]["file"])
        ac = np.asarray(sch["alphas_cumprod"], np.float64)

        def plan_fn(cond, z):
            return ddim_sample(eps, cond, z, ac, a.steps or man["sampler"]["steps"], sch["clip_sample"], mean, std)
    else:
        from energyflow.config import Schedule
        from energyflow.sampler import OrtEnergyGrad, sample

        eg = OrtEnergyGrad(Path(a.bundle) / man["graphs"]["energy_grad"]["file"])
        sc = Schedule(**{k: sch[k] for k in ("sigma_min", "sigma_max", "T", "gamma")})

        def plan_fn(cond, z):
            return sample(eg, cond, z, sc, a.steps or man["sampler"]["steps"], mean, std)
    w = World(a.task, camera_size=None)
    results = []
    for ep in range(a.episodes):
        seed = a.seed + ep
        o = w.reset(level=a.level, seed=seed)
        hist = [o] * To
        rng = np.random.default_rng(seed)
        steps = 0
        while steps < a.max_steps and not w.success:
            cond = np.concatenate([(h - smean) / sstd for h in hist[-To:]]).astype(np.float32)[None]
            z = rng.standard_normal((1, man["pred_horizon"], man["action_dim"])).astype(np.float32)
            res = plan_fn(cond, z)
            for act in res.actions[0, To - 1:To - 1 + Ta]:
                o = w.step(act).obs
                hist.append(o)
                steps += 1
                if w.success or steps >= a.max_steps:
                    break
        results.append({"episode": ep, "seed": seed, "success": bool(w.success), "steps": steps})
        print(f"episode {ep} seed {seed}: success={w.success} steps={steps}", flush=True)
    k = sum(r["success"] for r in results)
    print(f"{a.task} level {a.level}: success {k}/{len(results)} (no runtime)")
    if a.json:
        Path(a.json).write_text(json.dumps({"task": a.task, "level": a.level, "bundle": a.bundle,
                                            "episodes": len(results), "successes": k, "results": results}, indent=2))


if __name__ == "__main__":
    main()
