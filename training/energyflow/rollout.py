"""A bundle as a policy, outside the runtime: its reference sampler planning
action chunks from an observation history, closed-loop rollouts straight on
Meta-World, and the smoothness of its chunks against the demonstrations.

This is what ``python -m energyflow.rollout`` (below) and ``energyflow gate`` run.
Diffusion Policy's receding horizon, without latency: plan a chunk from the
last T_o observations, execute ``actions[T_o−1 : T_o−1+T_a]``, replan. No
camera, no safety gate, no Modbus — beside ``energyflow sim eval`` on the
same seeds it separates what the policy does from what the runtime adds.
State bundles only (an image bundle needs the camera; use ``sim eval``).
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .bundle import read_manifest
from .config import Schedule
from .ddim import OrtEps, ddim_sample
from .sampler import OrtEnergyGrad, sample
from .stats import wilson  # its old home: `from energyflow.rollout import wilson` keeps working


@dataclass
class Planner:
    """A bundle's reference sampler behind one call: ``plan(cond, z)`` →
    un-standardized actions ``[B, T_p, D_a]``; ``late``, for a bundle with a late network
    (``late_policy``), the same on it, which the runtime takes from ``late_from`` periods of plan
    latency (:meth:`plan_at`)."""

    manifest: Dict
    plan: Callable[[np.ndarray, np.ndarray], np.ndarray]
    state_mean: np.ndarray
    state_std: np.ndarray
    action_std: np.ndarray
    late: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None
    late_from: int = 0

    def plan_at(self, cond: np.ndarray, z: np.ndarray, periods: int) -> np.ndarray:
        """``plan``, or ``late`` when the plans before took ``periods`` control periods (rounded up,
        at least 1), as the runtime chooses (loop.late_policy)."""
        if self.late is not None and max(1, periods) >= self.late_from:
            return self.late(cond, z)
        return self.plan(cond, z)

    @property
    def obs_horizon(self) -> int:
        return int(self.manifest["obs_horizon"])

    @property
    def action_horizon(self) -> int:
        return int(self.manifest["action_horizon"])

    @property
    def noise_shape(self) -> tuple:
        return (int(self.manifest["pred_horizon"]), int(self.manifest["action_dim"]))

    def cond(self, history: Sequence[np.ndarray]) -> np.ndarray:
        """The conditioning vector ``[1, T_o·D_s]`` of the last T_o raw states (oldest first)."""
        h = list(history)[-self.obs_horizon:]
        return np.concatenate([(np.asarray(o, np.float32) - self.state_mean) / self.state_std
                               for o in h]).astype(np.float32)[None]


def load_planner(bundle: str | Path, steps: Optional[int] = None, threads: int = 1, late: bool = True) -> Planner:
    """The reference sampler of a state bundle (Algorithm 2 for energyflow,
    DDIM for diffusion) on ONNX Runtime; ``steps`` overrides the manifest's. ``late`` False
    leaves a bundle's late network out (``--late-off``, as ``sim --late-off``)."""
    man = read_manifest(bundle)
    if any(o["kind"] != "state" for o in man["obs"]):
        raise ValueError(f"{bundle}: takes images; rollouts outside the runtime run state bundles only "
                         "(use `energyflow sim eval`)")
    st = next(o for o in man["obs"] if o["kind"] == "state")
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    sch = man["schedule"]
    k = steps or man["sampler"]["steps"]
    if man.get("policy") == "diffusion":
        eps = OrtEps(Path(bundle) / man["graphs"]["eps"]["file"], threads=threads)
        ac = np.asarray(sch["alphas_cumprod"], np.float64)

        def plan(cond: np.ndarray, z: np.ndarray) -> np.ndarray:
            return ddim_sample(eps, cond, z, ac, k, sch["clip_sample"], mean, std).actions
    else:
        sc = Schedule(**{key: sch[key] for key in ("sigma_min", "sigma_max", "T", "gamma")})

        def sampler(graph: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
            eg = OrtEnergyGrad(Path(bundle) / man["graphs"][graph]["file"], threads=threads)
            return lambda cond, z: sample(eg, cond, z, sc, k, mean, std).actions

        plan = sampler("energy_grad")
        if late and "late_policy" in man:
            lp = man["late_policy"]
            return Planner(man, plan, np.asarray(st["norm"]["mean"], np.float32), np.asarray(st["norm"]["std"], np.float32),
                           std, late=sampler(lp["graph"]), late_from=int(lp["from_periods"]))
    return Planner(man, plan, np.asarray(st["norm"]["mean"], np.float32),
                   np.asarray(st["norm"]["std"], np.float32), std)


def late_plan(acts: np.ndarray, pending: List[np.ndarray], To: int, Ta: int, d: int):
    """The actions executed after a plan ``acts`` ``[T_p, D_a]`` that lands ``d`` steps late, as
    through the runtime: the previous chunk's ``pending`` actions for d steps (its last one held
    when it runs out; none at the start), then the new chunk from d steps in, up to its T_a-th
    action. Returns (the actions to execute, the new chunk's unexecuted tail: ``pending`` for the
    next plan, which starts at the next observation, T_a steps on, or d when d > T_a)."""
    late: List[np.ndarray] = []
    if pending and d > 0:
        late = (list(pending) + [pending[-1]] * d)[:d]
    chunk = acts[To - 1:]
    return late + list(chunk[d:Ta]), list(chunk[max(d, Ta):])


def world_class():
    """``sim.world.World``, imported late (MuJoCo only when rollouts are asked
    for). The simulator is the repository's ``sim`` package: run from the
    repository root (``python -m`` puts the working directory on the path)
    or with the root on PYTHONPATH."""
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    try:
        from sim.world import World  # the simulator and MuJoCo (heavy, optional): only when rollouts run
    except ImportError as e:
        raise RuntimeError("rollouts on Meta-World need the simulator, the repository's sim/ package: "
                           f"run from the repository root or put it on PYTHONPATH ({e})") from e
    return World


def rollout(planner: Planner, world, seed: int, level: str = "0", max_steps: int = 500,
            policy_seed: Optional[int] = None, max_late: int = 0, min_late: int = 0,
            on_step: Optional[Callable[[List[np.ndarray]], None]] = None,
            stop: Optional[Callable[[], bool]] = None) -> Dict:
    """One closed-loop episode on a ``sim.world.World``: scene ``seed``, sampler
    noise from ``policy_seed`` (default: the scene seed). Returns success,
    steps and the simulator's success step.

    ``max_late`` > 0 imitates the runtime's lateness: each plan lands d steps
    late, d uniform in ``min_late``..max_late drawn after its noise (:func:`late_plan`); a
    bundle's late network plans when the plan before landed its ``from_periods`` or more
    late (:meth:`Planner.plan_at`; the first plan of an episode on the main network).
    ``on_step(history)`` sees the observation history (oldest first, the
    newest last) at the reset and after every step; ``stop()``, asked after it, ends the episode
    early when true (``stopped`` in the result)."""
    To, Ta = planner.obs_horizon, planner.action_horizon
    o = world.reset(level=level, seed=seed)
    hist = [o] * To
    ps = seed if policy_seed is None else policy_seed
    rng = np.random.default_rng(ps)
    if on_step is not None:
        on_step(hist)
    steps, pending, d = 0, [], 0
    halt = stop or (lambda: False)
    while steps < max_steps and not world.success and not halt():
        z = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        actions = planner.plan_at(planner.cond(hist), z, d)
        if max_late > 0:
            d = int(rng.integers(min_late, max_late + 1))
            run, pending = late_plan(actions[0], pending, To, Ta, d)
        else:
            run = actions[0, To - 1:To - 1 + Ta]
        for act in run:
            o = world.step(act).obs
            hist.append(o)
            steps += 1
            if on_step is not None:
                on_step(hist)
            if world.success or steps >= max_steps or halt():
                break
        hist = hist[-To:]
    return {"seed": seed, "policy_seed": ps, "success": bool(world.success), "steps": steps,
            "success_step": world.success_step, "stopped": not world.success and steps < max_steps}


@dataclass
class Smoothness:
    """Roughness of executed action windows: the mean absolute step-to-step
    change per action dimension in units of the data's action std (all
    dimensions but the gripper), and the gripper command's flips per window
    (the last dimension crossing the middle of the demonstrations' gripper
    range: Meta-World's experts command e.g. 0 → 0.6 or −1 → 0.6, once per
    episode)."""

    step_change: float
    gripper_flips: float
    windows: int


def smoothness(chunks: np.ndarray, action_std: np.ndarray, grip_level: Optional[float] = None) -> Smoothness:
    """``chunks`` ``[N, T_a, D_a]`` executed windows (raw units); the last
    dimension is the gripper when ``grip_level`` (the middle of its open and
    closed commands) is given, else every dimension counts as motion and no
    flips are counted."""
    c = np.asarray(chunks, np.float64)
    std = np.maximum(np.asarray(action_std, np.float64), 1e-6)
    d = np.abs(np.diff(c, axis=1)) / std
    move = d[..., :-1] if grip_level is not None and c.shape[-1] > 1 else d
    flips = 0.0
    if grip_level is not None:
        side = c[..., -1] > grip_level
        flips = float(np.mean(np.sum(side[:, 1:] != side[:, :-1], axis=1)))
    return Smoothness(float(move.mean()), flips, int(c.shape[0]))


def grip_level(demos: Sequence) -> Optional[float]:
    """The middle of the demonstrations' gripper commands (last action
    dimension); None when they never change it (e.g. ButtonPress)."""
    g = np.concatenate([np.asarray(d.actions)[:, -1] for d in demos])
    lo, hi = float(g.min()), float(g.max())
    return None if hi - lo < 1e-3 else (lo + hi) / 2


def demo_windows(demos: Sequence, T_o: int, T_a: int, n: int, seed: int = 0) -> List[tuple]:
    """Up to ``n`` (demo index, step) pairs with a full executed window after
    the step, drawn uniformly over every demo step (seeded)."""
    pairs = [(i, t) for i, d in enumerate(demos) for t in range(0, len(d.actions) - T_a + 1)]
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(pairs), size=min(n, len(pairs)), replace=False)
    return [pairs[j] for j in sorted(pick)]


def chunk_smoothness(planner: Planner, demos: Sequence, state_key: str = "state", n: int = 256,
                     seed: int = 0, batch: int = 64) -> Dict[str, Smoothness]:
    """The policy's executed windows vs the demonstrations' on the same
    observation windows: ``{"policy": …, "demos": …}``."""
    To, Ta = planner.obs_horizon, planner.action_horizon
    pairs = demo_windows(demos, To, Ta, n, seed)
    conds, demo_chunks = [], []
    for i, t in pairs:
        s = demos[i].obs[state_key]
        hist = [s[max(0, t - To + 1 + j)] for j in range(To)]
        conds.append(planner.cond(hist)[0])
        demo_chunks.append(demos[i].actions[t:t + Ta])
    conds_a = np.stack(conds)
    rng = np.random.default_rng(seed)
    out = []
    for b in range(0, len(conds_a), batch):
        c = conds_a[b:b + batch]
        z = rng.standard_normal((len(c),) + planner.noise_shape).astype(np.float32)
        out.append(planner.plan(c, z)[:, To - 1:To - 1 + Ta])
    level = grip_level(demos)
    return {"policy": smoothness(np.concatenate(out), planner.action_std, level),
            "demos": smoothness(np.stack(demo_chunks), planner.action_std, level)}


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Closed-loop rollouts of a bundle straight on Meta-World, without the runtime.

    .venv/bin/python -m energyflow.rollout BUNDLE --task button-press [--level 0]
        [--episodes 10] [--seed 1000] [--max-steps 500] [--steps K] [--max-late N [--min-late M]] [--late-off]
        [--json FILE]

    Run from the repository root (the simulator is its ``sim`` package). The
    reference sampler (ONNX Runtime, Algorithm 2 or DDIM by the bundle's
    kind) plans a chunk from the last T_o observations, the first T_a actions
    from the current step are executed, then it replans: Diffusion Policy's
    receding horizon with no latency, no camera, no safety gate and no Modbus
    (:func:`rollout`). Episode i uses scene seed and sampler seed --seed+i,
    as ``energyflow sim eval`` does, so beside it on the same seeds it
    separates what the policy does from what the runtime adds
    (docs/evaluation.md).
    """
    p = argparse.ArgumentParser(prog="python -m energyflow.rollout",
                                description="Closed-loop rollouts of a bundle straight on Meta-World, without the runtime.")
    p.add_argument("bundle")
    p.add_argument("--task", required=True)
    p.add_argument("--level", default="0")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=500, help="step limit per episode (the official Meta-World evaluation's 500)")
    p.add_argument("--steps", type=int, default=None, help="sampler steps (bundle default)")
    p.add_argument("--max-late", type=int, default=0,
                   help="each plan lands 0..N steps late (--min-late..N), drawn per plan, as through a busy runtime "
                        "(0: on time)")
    p.add_argument("--min-late", type=int, default=0,
                   help="with --max-late: at least this many steps late (e.g. 3 with --max-late 5: plans held "
                        "3 periods longer, as sim eval --delay 3 does, landing about 4 periods late)")
    p.add_argument("--late-off", action="store_true",
                   help="plan every chunk on the bundle's main network, even where it has a late network for late "
                        "plans (as sim --late-off)")
    p.add_argument("--json", default="")
    a = p.parse_args(argv)
    if a.max_late < 0:
        p.error(f"--max-late must be 0 or more, got {a.max_late}")
    if not 0 <= a.min_late <= a.max_late:
        p.error(f"--min-late must be 0..--max-late ({a.max_late}), got {a.min_late}")

    planner = load_planner(a.bundle, a.steps, late=not a.late_off)
    w = world_class()(a.task, camera_size=None)
    results = []
    for ep in range(a.episodes):
        r = dict(episode=ep, **rollout(planner, w, seed=a.seed + ep, level=a.level, max_steps=a.max_steps,
                                          max_late=a.max_late, min_late=a.min_late))
        results.append(r)
        print(f"episode {ep} seed {r['seed']}: success={r['success']} steps={r['steps']}", flush=True)
    k = sum(r["success"] for r in results)
    lo, hi = wilson(k, len(results)) if results else (0.0, 1.0)
    print(f"{a.task} level {a.level}: success {k}/{len(results)} [{100 * lo:.1f}–{100 * hi:.1f} %, Wilson 95 %] "
          f"(no runtime{f', plans {a.min_late}–{a.max_late} steps late' if a.max_late else ''})")
    if a.json:
        Path(a.json).write_text(json.dumps({"task": a.task, "level": a.level, "bundle": a.bundle,
                                            "max_steps": a.max_steps, "max_late": a.max_late, "min_late": a.min_late,
                                            "late_network": planner.late is not None, "episodes": len(results), "successes": k, "results": results}, indent=2))


if __name__ == "__main__":
    main()
