"""Labels that are right when a plan is executed late: the expert simulated forward over the delay.

A plan that lands ``d`` control periods after its observation was taken runs from a state the arm
reaches only after the ``d`` actions committed before it. Corrections from an expert acting on
fresh observations (stop 83's) are right for a controller that acts at once; these labels are
right for a chunk that runs late. The bundle drives scene after scene straight on Meta-World, its
plans landing ``min_late..max_late`` steps late as through the runtime
(:func:`energyflow.rollout.late_plan`), on the bundle's late network where the plan before landed
late enough (:meth:`energyflow.rollout.Planner.plan_at`; ``--late-off`` drives on the main network
alone). At every plan, before its actions run, the simulator's
state is copied and run forward on the copy: the ``d`` actions committed before the plan lands
(the previous chunk's), then Meta-World's scripted expert on each fresh observation for the rest
of the chunk. The label for the plan's observation window is that chunk, laid out as a
demonstration's window is: the action before the newest observation, the committed ones, then the
expert's from the state the arm will really be in. The copy is then put back and the policy's own
plan runs, so the drive is the rollout's. It needs a simulator that can be copied: an experiment,
not a recipe for a robot.

    .venv/bin/python -m research.delay.forward_labels --bundle B --seeds 46000:46200 \
        --min-late 3 --max-late 5 --out LABELS.npz
    (cd training && ../.venv/bin/python -m energyflow train --data DEMOS.hdf5 --init-bundle B \
        --labels LABELS.npz … --out RUN)
    .venv/bin/python -m energyflow.swap_network --run-bundle RUN/bundle --like B --out CANDIDATE

``energyflow train --labels`` adds one training window per label
(:meth:`energyflow.data.WindowDataset.add_windows`); research/delay/README.md has the commands
and what the fine-tune did.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import mujoco
import numpy as np

from energyflow.bundle import BundleError
from energyflow.rollout import Planner, late_plan, load_planner, world_class
from energyflow.takeovers import parse_seeds
from sim.world import expert_policy

#: what :func:`snapshot` takes: MuJoCo's integration state and the env's own fields
Snapshot = Tuple[np.ndarray, np.ndarray, int, Optional[np.ndarray], bool]


def snapshot(env: Any) -> Snapshot:
    """Everything a Meta-World step reads or changes: MuJoCo's integration state (positions,
    velocities, controls, mocap, warm start, time) and the env's own fields."""
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(env.model, spec))
    mujoco.mj_getState(env.model, env.data, state, spec)
    last = env._last_stable_obs
    return (state, env._prev_obs.copy(), env.curr_path_length, None if last is None else last.copy(),
            env._did_see_sim_exception)


def restore(env: Any, snap: Snapshot) -> None:
    """Put back what :func:`snapshot` took (and recompute what MuJoCo derives from it)."""
    state, prev, length, last, exc = snap
    mujoco.mj_setState(env.model, env.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(env.model, env.data)
    env._prev_obs, env.curr_path_length, env._did_see_sim_exception = prev.copy(), length, exc
    env._last_stable_obs = None if last is None else last.copy()


def forward_expert(env: Any, expert: Callable[[np.ndarray], np.ndarray], committed: Sequence[np.ndarray],
                   n: int) -> np.ndarray:
    """On ``env`` as it stands (left changed: :func:`snapshot` first): run ``committed``, then the
    expert on each fresh observation for ``n`` steps; return the expert's ``n`` actions."""
    obs = None
    for a in committed:
        obs = env.step(np.clip(np.asarray(a, np.float32), -1, 1))[0]
    if obs is None:
        raise ValueError("forward_expert: no committed action to run first")
    out = []
    for _ in range(n):
        a = np.clip(np.asarray(expert(np.asarray(obs, np.float64)), np.float32), -1, 1)
        out.append(a)
        obs = env.step(a)[0]
    return np.stack(out)


def scene(planner: Planner, world: Any, expert: Callable[[np.ndarray], np.ndarray], seed: int, min_late: int,
          max_late: int, max_steps: int = 500) -> Tuple[List[np.ndarray], List[np.ndarray], List[int], Dict[str, Any]]:
    """Scene ``seed`` driven by the planner as :func:`energyflow.rollout.rollout` drives it (the same
    noise and lateness draws), with a label at every plan that has a committed chunk before it and
    room for the forward run. Returns the labels' observation windows [T_o, D_s], their action
    chunks [T_p, D_a], the steps late each label's plan landed, and the scene's row."""
    To, Ta = planner.obs_horizon, planner.action_horizon
    Tp = planner.noise_shape[0]
    env = world.env
    o = world.reset(level="0", seed=seed)
    hist = [o] * To
    rng = np.random.default_rng(seed)
    steps, pending, last, d = 0, [], None, 0
    states: List[np.ndarray] = []
    chunks: List[np.ndarray] = []
    delays: List[int] = []
    while steps < max_steps and not world.success:
        z = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        actions = planner.plan_at(planner.cond(hist), z, d)  # the late network where the rollout takes it
        d = int(rng.integers(min_late, max_late + 1))
        if pending and last is not None and steps + Tp < max_steps:
            committed = (list(pending) + [pending[-1]] * d)[:d]
            snap = snapshot(env)
            ahead = forward_expert(env, expert, committed, Tp - (To - 1) - d)
            restore(env, snap)
            states.append(np.stack(hist[-To:]).astype(np.float32))
            before = np.stack([last] * (To - 1))
            chunks.append(np.concatenate([before, np.clip(np.stack(committed), -1, 1), ahead]).astype(np.float32))
            delays.append(d)
        run, pending = late_plan(actions[0], pending, To, Ta, d)
        for act in run:
            o = world.step(act).obs
            last = np.clip(np.asarray(act, np.float32), -1, 1)
            hist.append(o)
            steps += 1
            if world.success or steps >= max_steps:
                break
        hist = hist[-To:]
    return states, chunks, delays, {"seed": seed, "success": bool(world.success), "steps": steps, "labels": len(chunks)}


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="the EnergyFlow state bundle that drives")
    ap.add_argument("--task", default="bin-picking")
    ap.add_argument("--seeds", required=True, type=parse_seeds,
                    help="scene seeds A:B (apart from the demonstrations' 0–199 and the evaluation's 1000–1049)")
    ap.add_argument("--min-late", type=int, default=3, help="fewest steps a plan lands late (at least 1)")
    ap.add_argument("--max-late", type=int, default=5, help="most steps a plan lands late")
    ap.add_argument("--late-off", action="store_true",
                    help="drive on the main network alone, leaving a bundle's late network out (as the labels "
                         "of stop 84 were collected, before bundles had one)")
    ap.add_argument("--out", required=True, help="the labels (.npz; a .json summary beside it)")
    args = ap.parse_args(argv)
    if not 0 < args.min_late <= args.max_late:
        ap.error(f"--min-late must be 1..--max-late ({args.max_late}), got {args.min_late}")
    try:
        planner = load_planner(args.bundle, threads=1, late=not args.late_off)
    except (BundleError, ValueError, OSError) as e:
        ap.error(f"--bundle: {e}")
    if args.max_late + planner.obs_horizon > planner.noise_shape[0]:
        ap.error(f"--max-late {args.max_late}: a chunk of {planner.noise_shape[0]} has no room past that delay")
    world = world_class()(task=args.task, camera_size=None)
    expert = expert_policy(args.task).get_action
    S: List[np.ndarray] = []
    A: List[np.ndarray] = []
    D: List[int] = []
    rows = []
    for seed in args.seeds:
        s, a, d, row = scene(planner, world, expert, seed, args.min_late, args.max_late)
        S += s
        A += a
        D += d
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not A:
        raise SystemExit("research.delay.forward_labels: no label: every scene ended before its second plan")
    np.savez_compressed(args.out, states=np.stack(S), chunks=np.stack(A), delays=np.asarray(D, np.int8))
    summary = {"bundle": args.bundle, "task": args.task, "seeds": [args.seeds.start, args.seeds.stop],
               "min_late": args.min_late, "max_late": args.max_late,
               "late_network": planner.late is not None,
               "policy_successes": sum(r["success"] for r in rows), "labels": len(A), "scenes": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{len(rows)} scenes, policy alone {summary['policy_successes']}, {len(A)} labels → {args.out}")


if __name__ == "__main__":
    main()
