"""Would a floor on the state term's input scale rank a dead arm sensor above a turned object?

    OMP_NUM_THREADS=1 .venv/bin/python -m research.ood.state_floor --bundle bundles/metaworld-bin-picking \
        --task bin-picking --data build/demos/bin-picking.hdf5 [--floors 0,0.01,0.03,0.1]

The state term reads ``cond``, the observation standardized by the bundle's
norm. A dimension the demonstrations hardly move (an object's quaternion:
std 0.003–0.03 on BinPicking) is then hundreds of σ away after a turn, and
g grows quadratically there. This retrains g (``energyflow.state_term``,
the shipped recipe: seed 0, 4000 steps, the same held-out split) on
``cond · w`` with w = std / max(std, floor) per raw dimension, so that no
dimension counts finer than ``floor`` raw units, and reads it as the
shipped reading does (max over σ of per-σ z-scores, with the transition
term on the unscaled ``cond``). Floor 0 is the shipped term.

Printed per floor: the held-out q99.9 and max, and, median over three
level-0 scenes at rest (``state_probe.py``'s changes), what the object
turned, the object below the table and the arm zeroed read. Nothing is
written: a candidate, not an export.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

ROWS = ["object rotated 30° about z, at rest", "object rotated 90° about x, at rest",
        "object rotated 90° about y, at rest", "object rotated 90° about z, at rest",
        "object 0.2 m below the table, at rest", "arm state zeroed, at rest", "arm state zeroed, its first reading"]


class ScaledInput(nn.Module):
    """g(cond · w, σ): the network trained on the scaled cond, read on the runtime's cond."""

    def __init__(self, net: nn.Module, w: np.ndarray) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("w", torch.as_tensor(np.asarray(w, np.float32)))

    def forward(self, s: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return self.net(s * self.w, sigma)


def input_scale(std: np.ndarray, floor: float, frames: int) -> np.ndarray:
    """w = std / max(std, floor) per raw dimension, tiled over the cond's frames (1 where floor is 0)."""
    std = np.asarray(std, np.float64)
    w = std / np.maximum(std, floor) if floor > 0 else np.ones_like(std)
    return np.tile(w, frames).astype(np.float32)


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--data", required=True, help="the bundle's demonstrations (sim.record, seeds 0–199)")
    p.add_argument("--floors", default="0,0.01,0.03,0.1")
    p.add_argument("--seed", type=int, default=52000, help="first of the three level-0 scenes")
    a = p.parse_args(argv)
    torch.set_num_threads(1)

    from energyflow import state_term as st
    from energyflow.bundle import read_manifest
    from energyflow.data import load_hdf5, split_demos
    from energyflow.rollout import load_planner
    from research.ood.state_probe import changes, history
    from sim.world import World

    bundle = Path(a.bundle)
    man = read_manifest(bundle)
    blk = man.get("state_energy") or {}
    train = blk.get("train", {})
    demos, _ = load_hdf5(a.data, [o["name"] for o in man["obs"]])
    train_d, held_d = split_demos(demos, train.get("val_fraction", 0.1), train.get("split_seed", 0))
    tr, _ = st.step_conds(train_d, man)
    va, _ = st.step_conds(held_d, man)
    std = np.asarray(next(o for o in man["obs"] if o["kind"] == "state")["norm"]["std"])
    frames = int(man["obs_horizon"])
    planner = load_planner(bundle)
    world = World(a.task, camera_size=None)
    bases = [np.asarray(world.reset(level="0", seed=a.seed + i), np.float64) for i in range(3)]
    cfg = st.StateTermConfig()
    floors = [float(f) for f in a.floors.split(",")]
    table = {}
    for floor in floors:
        w = input_scale(std, floor, frames)
        net, _ = st.train_state_term(tr * w, cfg)
        extras = {"transition": st.TransitionScore(*st.fit_transition(tr, frames, cfg.transition_ridge,
                                                                      cfg.transition_sd_floor))}
        reading = st.fit_reading(ScaledInput(net, w), st.sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max), va, extras)
        held = st.read(reading, va)
        col = {"held-out q99.9 / max": f"{np.quantile(held, 0.999):.3g} / {held.max():.3g}"}
        for label, change, newest in changes():
            if label not in ROWS:
                continue
            vals = []
            for o in bases:
                vals.append(float(st.read(reading, planner.cond(history(o, change, newest, frames)))[0]))
            col[label] = f"{np.median(vals):.4g}"
        table[floor] = col
        print(f"floor {floor}: done", file=sys.stderr, flush=True)
    print(f"{a.task}: state_energy, median over 3 level-0 scenes at rest (seeds {a.seed}–{a.seed + 2})\n")
    print("| scene | " + " | ".join(f"floor {f:g}" for f in floors) + " |")
    print("|---|" + "---|" * len(floors))
    for row in ["held-out q99.9 / max"] + ROWS:
        print(f"| {row} | " + " | ".join(table[f][row] for f in floors) + " |")


if __name__ == "__main__":
    main()
