"""Labels that are right when executed late: the expert simulated forward over the delay.

Stop 83's corrections were the expert's actions on fresh observations, right only for a
controller that acts at once. Here each label is right for a chunk that runs late. The
shipped bundle drives scene after scene straight on Meta-World, its plans landing
``min_late..max_late`` steps late as through the runtime
(:func:`energyflow.rollout.late_plan`). At every plan, before its actions run, the simulator is
copied and run forward on the copy: the ``d`` actions committed before the plan lands (the
previous chunk's), then Meta-World's scripted expert on each fresh observation for the rest of
the chunk. The label for the plan's observation is that chunk: the action before it, the
committed ones, then the expert's from the state the arm will really be in when the chunk
starts. The copy is then put back and the policy's own plan runs.

    .venv/bin/python -m research.delay.forward_labels collect --bundle B --seeds 46000:46200 \\
        --min-late 3 --max-late 5 --out LABELS.npz
    .venv/bin/python -m research.delay.forward_labels train --bundle B --data DEMOS.hdf5 --labels LABELS.npz \\
        --out RUN --steps 4000
    .venv/bin/python -m research.delay.candidate --run-bundle RUN/bundle --like B --out CANDIDATE

``train`` fine-tunes from the bundle (as ``energyflow train --init-bundle``) on the
demonstrations' windows plus one window per label: a label is one window, not an episode, so
it is added to the training set as such rather than as a recorded episode whose every step
would make a window.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from energyflow.rollout import Planner, late_plan


def snapshot(env) -> Tuple:
    """Everything a Meta-World step reads or changes: MuJoCo's integration state (positions,
    velocities, controls, mocap, warm start, time) and the env's own fields."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(env.model, spec))
    mujoco.mj_getState(env.model, env.data, state, spec)
    last = env._last_stable_obs
    return (state, env._prev_obs.copy(), env.curr_path_length, None if last is None else last.copy(),
            env._did_see_sim_exception)


def restore(env, snap: Tuple) -> None:
    """Put back what :func:`snapshot` took (and recompute what MuJoCo derives from it)."""
    import mujoco

    state, prev, length, last, exc = snap
    mujoco.mj_setState(env.model, env.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(env.model, env.data)
    env._prev_obs, env.curr_path_length, env._did_see_sim_exception = prev.copy(), length, exc
    env._last_stable_obs = None if last is None else last.copy()


def forward_expert(env, expert: Callable[[np.ndarray], np.ndarray], committed: Sequence[np.ndarray],
                   n: int) -> np.ndarray:
    """On ``env`` as it stands (left changed: :func:`snapshot` first): run ``committed``, then the
    expert on each fresh observation for ``n`` steps; return the expert's ``n`` actions."""
    for a in committed:
        obs = env.step(np.clip(np.asarray(a, np.float32), -1, 1))[0]
    out = []
    for _ in range(n):
        a = np.clip(np.asarray(expert(np.asarray(obs, np.float64)), np.float32), -1, 1)
        out.append(a)
        obs = env.step(a)[0]
    return np.stack(out)


def scene(planner: Planner, world, expert: Callable[[np.ndarray], np.ndarray], seed: int, min_late: int,
          max_late: int, max_steps: int = 500) -> Tuple[List[np.ndarray], List[np.ndarray], Dict]:
    """Scene ``seed`` driven by the planner as :func:`energyflow.rollout.rollout` drives it (the same
    noise and lateness draws), with a label at every plan that has a committed chunk before it and
    room for the forward run. Returns the labels' observation windows [T_o, D_s], their action
    chunks [T_p, D_a], and the scene's row."""
    To, Ta = planner.obs_horizon, planner.action_horizon
    Tp = planner.noise_shape[0]
    env = world.env
    o = world.reset(level="0", seed=seed)
    hist = [o] * To
    rng = np.random.default_rng(seed)
    steps, pending, last = 0, [], None
    states: List[np.ndarray] = []
    chunks: List[np.ndarray] = []
    while steps < max_steps and not world.success:
        z = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        actions = planner.plan(planner.cond(hist), z)
        d = int(rng.integers(min_late, max_late + 1))
        if pending and last is not None and steps + Tp < max_steps:
            committed = (list(pending) + [pending[-1]] * d)[:d]
            snap = snapshot(env)
            ahead = forward_expert(env, expert, committed, Tp - (To - 1) - d)
            restore(env, snap)
            states.append(np.stack(hist[-To:]).astype(np.float32))
            before = np.stack([last] * (To - 1))
            chunks.append(np.concatenate([before, np.clip(np.stack(committed), -1, 1), ahead]).astype(np.float32))
        run, pending = late_plan(actions[0], pending, To, Ta, d)
        for act in run:
            o = world.step(act).obs
            last = np.clip(np.asarray(act, np.float32), -1, 1)
            hist.append(o)
            steps += 1
            if world.success or steps >= max_steps:
                break
        hist = hist[-To:]
    return states, chunks, {"seed": seed, "success": bool(world.success), "steps": steps, "labels": len(chunks)}


def add_windows(ds, states: np.ndarray, chunks: np.ndarray) -> int:
    """Append one training window per label to a :class:`energyflow.data.WindowDataset` (its
    normalisers applied): ``states`` [N, T_o, D_s] raw observations, ``chunks`` [N, T_p, D_a] raw
    actions. Returns the windows it now holds."""
    n, To, _ = states.shape
    Tp = chunks.shape[1]
    if To != ds.T_o or Tp != ds.T_p:
        raise ValueError(f"labels have T_o {To}, T_p {Tp}; the model's windows {ds.T_o}, {ds.T_p}")
    s0, a0 = ds.state.shape[0], ds.actions.shape[0]
    ds.state = np.concatenate([ds.state, ds.state_norm(states.reshape(n * To, -1)).astype(ds.state.dtype)])
    ds.actions = np.concatenate([ds.actions, ds.action_norm(chunks.reshape(n * Tp, -1)).astype(ds.actions.dtype)])
    ds.obs_idx = np.concatenate([ds.obs_idx, s0 + np.arange(n * To).reshape(n, To)])
    ds.act_idx = np.concatenate([ds.act_idx, a0 + np.arange(n * Tp).reshape(n, Tp)])
    return len(ds)


def collect(args: argparse.Namespace) -> None:
    from energyflow.rollout import load_planner, world_class
    from energyflow.takeovers import parse_seeds
    from sim.world import expert_policy

    planner = load_planner(args.bundle, threads=1)
    world = world_class()(task=args.task, camera_size=None)
    expert = expert_policy(args.task).get_action
    S: List[np.ndarray] = []
    A: List[np.ndarray] = []
    rows = []
    for seed in parse_seeds(args.seeds):
        s, a, row = scene(planner, world, expert, seed, args.min_late, args.max_late)
        S += s
        A += a
        rows.append(row)
        print(json.dumps(row), flush=True)
    np.savez_compressed(args.out, states=np.stack(S), chunks=np.stack(A))
    summary = {"bundle": args.bundle, "task": args.task, "seeds": args.seeds, "min_late": args.min_late,
               "max_late": args.max_late, "policy_successes": sum(r["success"] for r in rows),
               "labels": len(A), "scenes": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{len(rows)} scenes, policy alone {summary['policy_successes']}, {len(A)} labels → {args.out}")


def train(args: argparse.Namespace) -> None:
    import dataclasses

    from energyflow.config import TrainConfig, merge_train_config
    from energyflow.from_bundle import check_norms, policy_from_bundle
    from energyflow.train import Trainer, build_datasets, export_policy, seed_everything

    init, man = policy_from_bundle(args.bundle)
    tcfg = merge_train_config(TrainConfig(), {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                                              "warmup_steps": args.warmup_steps, "seed": args.seed, "threads": 1})
    seed_everything(tcfg.seed)
    mcfg, train_ds, val_ds, meta = build_datasets(args.data, init.cfg.to_dict(), tcfg, "state", [])
    check_norms(man, meta, args.bundle)
    got = np.load(args.labels)
    before = len(train_ds)
    add_windows(train_ds, got["states"], got["chunks"])
    tcfg = tcfg.for_head(mcfg.energy_head)
    meta["training"] = tcfg.noise_record()
    meta["forward_labels"] = {"file": str(args.labels), "windows": len(train_ds) - before}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(mcfg, tcfg, train_ds, val_ds, out, meta, None, True)
    trainer.policy.load_state_dict(init.state_dict())
    trainer.ema.model.load_state_dict(init.state_dict())
    (out / "config.json").write_text(json.dumps({"model": mcfg.to_dict(), "train": dataclasses.asdict(tcfg)}, indent=1))
    summary = trainer.run()
    summary["windows"] = {"demos": before, "labels": len(train_ds) - before}
    trainer.ema.sync_spectral_norm()
    export_policy(trainer.ema.model, meta, out / "bundle", Path(args.data).stem)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["windows"]))


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="drive the bundle late and label each plan by the expert run forward")
    c.add_argument("--bundle", required=True)
    c.add_argument("--task", default="bin-picking")
    c.add_argument("--seeds", required=True, help="scene seeds A:B (not the evaluation's)")
    c.add_argument("--min-late", type=int, default=3)
    c.add_argument("--max-late", type=int, default=5)
    c.add_argument("--out", required=True, help="the labels (.npz; a .json summary beside it)")
    t = sub.add_parser("train", help="fine-tune the bundle on the demonstrations plus the labels")
    t.add_argument("--bundle", required=True)
    t.add_argument("--data", required=True, help="the demonstrations (HDF5) whose normalisers the bundle has")
    t.add_argument("--labels", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=4000)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--lr", type=float, default=7e-5)
    t.add_argument("--warmup-steps", type=int, default=100)
    t.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "collect" and not 0 < args.min_late <= args.max_late:
        ap.error(f"--min-late must be 1..--max-late ({args.max_late}), got {args.min_late}")
    if args.cmd == "collect":
        collect(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
