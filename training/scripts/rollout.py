"""Closed-loop rollouts of a bundle straight on Meta-World, without the runtime.

    .venv/bin/python training/scripts/rollout.py BUNDLE --task button-press [--level 0]
        [--episodes 10] [--seed 1000] [--max-steps 500] [--steps K] [--json FILE]

The reference sampler (ONNX Runtime, Algorithm 2 or DDIM by the bundle's
kind) plans a chunk from the last T_o observations, the first T_a actions
from the current step are executed, then it replans: Diffusion Policy's
receding horizon with no latency, no camera, no safety gate and no Modbus
(energyflow.rollout). Episode i uses scene seed and sampler seed --seed+i,
as `energyflow sim eval` does, so beside it on the same seeds it separates
what the policy does from what the runtime adds (docs/evaluation.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

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
    p.add_argument("--max-steps", type=int, default=500, help="step limit per episode (the official Meta-World evaluation's 500)")
    p.add_argument("--steps", type=int, default=None, help="sampler steps (bundle default)")
    p.add_argument("--json", default="")
    a = p.parse_args()

    from energyflow.rollout import load_planner, rollout
    from sim.world import World

    planner = load_planner(a.bundle, a.steps)
    w = World(a.task, camera_size=None)
    results = []
    for ep in range(a.episodes):
        r = dict(episode=ep, **rollout(planner, w, seed=a.seed + ep, level=a.level, max_steps=a.max_steps))
        results.append(r)
        print(f"episode {ep} seed {r['seed']}: success={r['success']} steps={r['steps']}", flush=True)
    k = sum(r["success"] for r in results)
    sys.path.insert(0, str(ROOT / "scripts"))
    from eval_report import wilson

    lo, hi = wilson(k, len(results)) if results else (0.0, 1.0)
    print(f"{a.task} level {a.level}: success {k}/{len(results)} [{100 * lo:.1f}–{100 * hi:.1f} %, Wilson 95 %] "
          "(no runtime)")
    if a.json:
        Path(a.json).write_text(json.dumps({"task": a.task, "level": a.level, "bundle": a.bundle,
                                            "max_steps": a.max_steps, "episodes": len(results), "successes": k,
                                            "results": results}, indent=2))


if __name__ == "__main__":
    main()
