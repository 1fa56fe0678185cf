"""Scripted-expert success per task and OOD level (in-process, no bridge, no camera).

    python -m sim.expert [--episodes 20] [--tasks button-press,...] [--seed 1000]

A sanity check of the levels: the expert reads the true object/goal positions
from the observation, so it mostly copes with S and M; where it fails at L the
goal moved somewhere its hand-written plan does not look (e.g. bin-picking's
expert places at the level-0 goal bin).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from . import ood
from .world import TASKS, World, expert_policy


def expert_success(task: str, level: str, episodes: int, seed: int = 1000) -> dict:
    w = World(task, camera_size=None)
    pol = expert_policy(task)
    succ, lengths = 0, []
    for i in range(episodes):
        obs = w.reset(task, level, seed + i)
        while True:
            r = w.step(pol.get_action(obs))
            obs = r.obs
            if r.success or r.truncated:
                break
        succ += int(r.success)
        lengths.append(w.step_count)
    w.close()
    return {"task": task, "level": level, "episodes": episodes, "success_rate": succ / episodes,
            "mean_length": float(np.mean(lengths))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.expert")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--seed", type=int, default=1000)
    a = p.parse_args(argv)
    print("| task | " + " | ".join(f"level {lv}" for lv in ood.LEVELS) + " |")
    print("|---|" + "---|" * len(ood.LEVELS))
    for task in a.tasks.split(","):
        row = [expert_success(task, lv, a.episodes, a.seed) for lv in ood.LEVELS]
        print(f"| {task} | " + " | ".join(f"{100 * r['success_rate']:.0f}% ({r['mean_length']:.0f} steps)" for r in row) + " |",
              flush=True)
        print(json.dumps(row), flush=True, file=__import__("sys").stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
