"""Meta-World's scripted expert acting on stale observations: how far a delay alone takes the task.

The demonstrations' own controller, run with each action computed from the observation ``d``
steps old (the first ``d`` steps from the reset's), on the scenes a delay cell runs. A policy
whose plans land ``d`` steps after their observation faces the same staleness; the expert
measures it without a learned policy in the way: reactive, one action per observation, no chunk.

    .venv/bin/python -m research.delay.expert_delay --task bin-picking --seed 1000 --episodes 50 --late 4 \\
        --json expert-late1000.json

The file has ``energyflow.rollout``'s form (``min_late`` = ``max_late`` = d), so
``research.interventions.table`` reads it beside the policies' screens.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from energyflow.stats import wilson


def episode(world, expert: Callable[[np.ndarray], np.ndarray], seed: int, late: int, max_steps: int = 500) -> Dict:
    """One episode of scene ``seed``: each action from the observation ``late`` steps old."""
    o = world.reset(level="0", seed=seed)
    seen = collections.deque([o] * (late + 1), maxlen=late + 1)
    steps = 0
    while steps < max_steps and not world.success:
        a = np.clip(np.asarray(expert(seen[0].astype(np.float64)), np.float32), -1, 1)
        seen.append(world.step(a).obs)
        steps += 1
    return {"seed": seed, "success": bool(world.success), "steps": steps, "success_step": world.success_step}


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="bin-picking")
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--late", type=int, default=0, help="steps between an observation and its action (0: fresh)")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    if a.late < 0 or a.episodes < 1:
        ap.error(f"--late must be 0 or more and --episodes 1 or more, got {a.late} and {a.episodes}")
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from sim.world import World, expert_policy  # the simulator: only when episodes run

    world = World(a.task, camera_size=None)
    expert = expert_policy(a.task).get_action
    results = [episode(world, expert, a.seed + i, a.late) for i in range(a.episodes)]
    k = sum(r["success"] for r in results)
    lo, hi = wilson(k, len(results))
    print(f"{a.task}: expert {a.late} steps late: {k}/{len(results)} [{100 * lo:.0f}–{100 * hi:.0f} %]")
    if a.json:
        Path(a.json).write_text(json.dumps({"task": a.task, "policy": "scripted expert", "min_late": a.late,
                                            "max_late": a.late, "episodes": len(results), "successes": k,
                                            "results": results}, indent=1))


if __name__ == "__main__":
    main()
