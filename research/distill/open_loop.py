"""How closely each bundle's plans follow the demonstrations on the demonstrations' own states.

Open loop: for each of the first ``--scenes`` demonstrations (scene seed i is demonstration i,
``sim.record --seed 0``), every ``--every`` steps the bundle plans from the demonstration's state
history (its reference sampler on ONNX Runtime, the same noise for every bundle) and the executed
window (``T_a`` actions from the current step) is compared with the demonstration's actions there:
the mean squared error in action-std units, position (x, y, z) and gripper apart. A student that
follows the demonstrations here as closely as its teacher but fails scenes the teacher succeeds in
loses them in closed loop, on states the demonstrations never show (research/distill/README.md).

    .venv/bin/python -m research.distill.open_loop --data DEMOS.hdf5 NAME=BUNDLE ... [--scenes 25]
"""
from __future__ import annotations

import argparse
from typing import Dict, List, Optional, Sequence

import numpy as np

from energyflow.data import Demo, load_hdf5
from energyflow.rollout import Planner, load_planner


def chunk_errors(planners: Dict[str, Planner], demo: Demo, every: int, rng: np.random.Generator,
                 state_key: str = "state") -> Dict[str, Dict[str, float]]:
    """``{name: {"xyz": mse, "grip": mse}}`` of each planner's executed windows against ``demo``'s
    actions, from the windows starting every ``every`` steps; the same noise for every planner.
    The last action dimension is the gripper."""
    first = next(iter(planners.values()))
    To, Ta = first.obs_horizon, first.action_horizon
    s = demo.obs[state_key]
    starts = list(range(0, len(demo.actions) - Ta + 1, every))
    target = np.stack([demo.actions[t:t + Ta] for t in starts])
    z = rng.standard_normal((len(starts),) + first.noise_shape).astype(np.float32)
    out: Dict[str, Dict[str, float]] = {}
    for name, p in planners.items():
        cond = np.concatenate([p.cond([s[max(0, t - To + 1 + j)] for j in range(To)]) for t in starts])
        got = p.plan(cond, z)[:, To - 1:To - 1 + Ta]
        e = ((got - target) / p.action_std) ** 2
        out[name] = {"xyz": float(e[..., :-1].mean()), "grip": float(e[..., -1].mean())}
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m research.distill.open_loop", description=__doc__.split("\n\n")[0])
    ap.add_argument("bundles", nargs="+", metavar="NAME=BUNDLE", help="state bundles to compare")
    ap.add_argument("--data", required=True, help="the demonstrations (HDF5, sim.record)")
    ap.add_argument("--scenes", type=int, default=25, help="the first N demonstrations (25: the demo's scenes 0-24)")
    ap.add_argument("--every", type=int, default=4, help="plan every N steps (4)")
    ap.add_argument("--seed", type=int, default=0, help="noise seed (0)")
    a = ap.parse_args(argv)
    named = []
    for arg in a.bundles:
        name, sep, path = arg.partition("=")
        if not sep or not name or not path:
            ap.error(f"{arg!r}: want NAME=BUNDLE")
        named.append((name, path))
    planners = {name: load_planner(path) for name, path in named}
    demos, _ = load_hdf5(a.data, ["state"])
    rng = np.random.default_rng(a.seed)
    names = list(planners)
    print("| scene | steps | " + " | ".join(f"{n} xyz / grip" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    tot: Dict[str, List[Dict[str, float]]] = {n: [] for n in names}
    for i, demo in enumerate(demos[:a.scenes]):
        e = chunk_errors(planners, demo, a.every, rng)
        for n in names:
            tot[n].append(e[n])
        print(f"| {i} | {len(demo.actions)} | " + " | ".join(f"{e[n]['xyz']:.3f} / {e[n]['grip']:.3f}" for n in names)
              + " |", flush=True)
    print("| mean | | " + " | ".join(f"{np.mean([r['xyz'] for r in tot[n]]):.3f} / "
                                     f"{np.mean([r['grip'] for r in tot[n]]):.3f}" for n in names) + " |")


if __name__ == "__main__":
    main()
