"""Where each evaluation episode puts the task's objects: the scene of each seed.

    python -m sim.positions --task button-press --level 0 --seed 1000 --episodes 50 \
        --json build/eval50/positions_button-press_0.json

An episode's scene is a function of (task, level, seed) alone (World.reset), so
the object each closed-loop episode of scripts/evaluate.sh started from can be
recovered without replaying it. scripts/eval_report.py joins these positions
with the episodes' success ("Success by where the scene is"): a policy that
ignores the observation succeeds only where its average motion goes.

Writes {"task", "level", "episodes": [{"seed", "object", "scene"}, ...]}:
"object" is the first object's position (state[4:7] of the first
observation); "scene" is Meta-World's randomized vector for the episode (the
positions the reset draws: object and/or goal, depending on the task;
assembly's object is fixed and its peg moves). Both in metres.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sim.world import World, normalize_task


def initial_positions(task: str, level: str, seed: int, episodes: int) -> list[dict]:
    """The first object's initial position and the scene vector for seeds seed .. seed+episodes-1."""
    w = World(task, camera_size=None)
    try:
        out = []
        for s in range(seed, seed + episodes):
            obs = w.reset(level=level, seed=s)
            out.append({"seed": s, "object": [float(v) for v in obs[4:7]],
                        "scene": [float(v) for v in w.sample.rand_vec]})
        return out
    finally:
        w.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="button-press")
    ap.add_argument("--level", default="0")
    ap.add_argument("--seed", type=int, default=1000, help="first episode seed (evaluate.sh --seed)")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--json", required=True, help="output file")
    a = ap.parse_args(argv)
    if a.episodes < 1:
        raise SystemExit("positions: --episodes must be at least 1")
    doc = {"task": normalize_task(a.task), "level": a.level,
           "episodes": initial_positions(a.task, a.level, a.seed, a.episodes)}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
