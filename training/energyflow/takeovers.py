"""Takeovers: an operator takes over where the policy stalls, and the takeovers become demonstrations.

A policy can follow its demonstrations closely on their own states and still stall on states it
reaches itself: BinPicking's student of stop 76 and its Diffusion Policy teacher both bring the open
fingers down on the object 1 cm off in x in the demo's scenes 4 and 5, and the hand stands there
pressing down (research/interventions/README.md). Distilling from the teacher cannot teach what
the teacher does not know; the remedy a robot team uses is
human-gated DAgger (HG-DAgger): run the policy, take over when it goes wrong, and add the operator's
corrections, from the state the policy reached, to the demonstrations.

Here Meta-World's scripted expert stands in for the operator (on a robot, the operator's
teleoperated corrections are the same data). Each scene runs the bundle's reference sampler on ONNX
Runtime straight on the simulator (:mod:`energyflow.rollout`, plans landing 0 to
``--max-late`` steps late as through the runtime); the expert takes over when the hand has moved
less than ``--stall-m`` over the last ``--stall-steps`` steps, or at step ``--takeover-at``, or
(``--held-steps``) when the hand stands held away from its controller's target. If the
expert then succeeds, its segment from the takeover (states and its actions, to ``--extra-steps``
after success, as ``sim.record`` records) is a new demonstration, written where ``energyflow train
--rollouts DIR`` reads recorded episodes: the training windows gain them, the normalisers and the
validation split stay the demonstrations'.

    .venv/bin/python -m energyflow.takeovers --bundle BUNDLE --seeds 40000:40400 --out TAKEOVERS

Run it from the repository root (the simulator is its ``sim`` package, imported only here, as
:func:`energyflow.rollout.world_class` does).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .bundle import BundleError
from .data import Demo, write_hdf5
from .rollout import Planner, load_planner, rollout, world_class

#: width of obs/proprio: hand xyz and gripper opening, observation[0:4] (sim.record's layout)
PROPRIO_DIM = 4


def _still(hands: Sequence[np.ndarray], steps: int, metres: float) -> bool:
    """Whether the hand moved less than ``metres`` over the last ``steps`` steps (False before it
    has made that many)."""
    return len(hands) > steps and float(np.linalg.norm(hands[-1] - hands[-1 - steps])) < metres


@dataclass
class Stall:
    """When the operator takes over: the hand has moved less than ``metres`` over the last ``steps``
    steps (after at least ``steps`` steps), or the episode reached ``latest`` steps without success."""

    steps: int = 60
    metres: float = 0.01
    latest: int = 300

    def __post_init__(self) -> None:
        if self.steps < 1 or not self.metres > 0 or self.latest < 1:
            raise ValueError(f"stall rule needs steps ≥ 1, metres > 0 and latest ≥ 1, got {self}")

    def due(self, hands: Sequence[np.ndarray]) -> bool:
        """Whether to take over after the last of ``hands`` (the hand's xyz at every step so far,
        the reset's first)."""
        return len(hands) - 1 >= self.latest or _still(hands, self.steps, self.metres)


@dataclass
class Held:
    """A second reason to take over (off unless given): the hand stands held away from its
    controller's target. Over the last ``steps`` steps it moved less than ``metres`` while standing
    at least ``gap`` from the target at every one of them: it presses on something it landed on (a
    claw on the bin's wall, fingers on the object) while its target runs on. In free motion the hand
    trails its target by up to ~3 cm but moves; at a grasp it stands at its target."""

    steps: int = 5
    metres: float = 0.01
    gap: float = 0.025

    def __post_init__(self) -> None:
        if self.steps < 1 or not self.metres > 0 or not self.gap > 0:
            raise ValueError(f"held rule needs steps ≥ 1, metres > 0 and gap > 0, got {self}")

    def due(self, hands: Sequence[np.ndarray], targets: Sequence[np.ndarray]) -> bool:
        """Whether to take over after the last step: ``hands`` and ``targets`` are the hand's xyz and
        its controller's target at every step so far (the reset's first)."""
        return _still(hands, self.steps, self.metres) and all(
            float(np.linalg.norm(hands[-k] - targets[-k])) >= self.gap for k in range(1, self.steps + 2))


@dataclass
class Takeover:
    """One scene: where the operator took over (None: the policy succeeded alone) and the
    operator's segment when it succeeded."""

    seed: int
    policy_success: bool
    takeover_step: Optional[int]
    expert_success: bool
    demo: Optional[Demo]


def run_scene(planner: Planner, world, expert: Callable[[np.ndarray], np.ndarray], seed: int, stall: Stall,
              max_late: int = 1, max_steps: int = 500, extra_steps: int = 10, held: Optional[Held] = None,
              min_late: int = 0) -> Takeover:
    """The policy drives scene ``seed`` until it succeeds or :class:`Stall` (or ``held``,
    :class:`Held`) says to take over; then ``expert(obs)`` drives to success (plus ``extra_steps``)
    or ``max_steps`` in all. Plans land ``min_late``..``max_late`` steps late."""
    hands: List[np.ndarray] = []
    targets: List[np.ndarray] = []

    def on_step(hist: List[np.ndarray]) -> None:
        hands.append(hist[-1][:3].copy())
        if held is not None:
            targets.append(world.target())

    r = rollout(planner, world, seed, max_steps=max_steps, max_late=max_late, min_late=min_late, on_step=on_step,
                stop=lambda: stall.due(hands) or (held is not None and held.due(hands, targets)))
    steps, o = r["steps"], world.obs
    if world.success:
        return Takeover(seed, True, None, False, None)
    if steps >= max_steps:
        return Takeover(seed, False, None, False, None)
    start = steps
    states: List[np.ndarray] = []
    actions: List[np.ndarray] = []
    success_at: Optional[int] = None
    while steps < max_steps:
        a = np.clip(np.asarray(expert(o.astype(np.float64)), np.float32), -1, 1)
        states.append(o.astype(np.float32))
        actions.append(a)
        o = world.step(a).obs
        steps += 1
        if world.success and success_at is None:
            success_at = steps
        if success_at is not None and steps >= success_at + extra_steps:
            break
    if success_at is None:
        return Takeover(seed, False, start, False, None)
    s = np.stack(states)
    demo = Demo(f"takeover_{seed}", np.stack(actions), {"state": s, "proprio": s[:, :PROPRIO_DIM].copy()})
    return Takeover(seed, False, start, True, demo)


def write_takeovers(out: str | Path, task: str, takeovers: Sequence[Takeover], summary: Dict) -> None:
    """The kept takeovers in the layout ``energyflow train --rollouts`` reads (that of ``sim eval
    --record DIR --json DIR/summary.json``): ``DIR/<task>_<seed>/takeover.hdf5``, one demo each,
    and ``DIR/summary.json`` whose ``results`` list them as successful episodes (``success_step``
    counted from the takeover). ``summary`` is written beside them (every scene, in ``scenes``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for t in takeovers:
        if t.demo is None:
            continue
        (out / f"{task}_{t.seed}").mkdir(exist_ok=True)
        write_hdf5(out / f"{task}_{t.seed}" / "takeover.hdf5", [Demo("demo_0", t.demo.actions, t.demo.obs)], env=task)
        results.append({"seed": t.seed, "success": True, "success_step": t.demo.length, "takeover_step": t.takeover_step})
    with open(out / "summary.json", "w") as f:
        json.dump({"task": task, **summary, "results": results}, f, indent=1)
        f.write("\n")


def parse_seeds(text: str) -> range:
    """``A:B`` → seeds A … B−1."""
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"seeds must be A:B, got {text!r}") from e
    if b <= a:
        raise argparse.ArgumentTypeError(f"seeds A:B need B > A, got {text!r}")
    return range(a, b)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="the state bundle that drives")
    ap.add_argument("--task", default="bin-picking")
    ap.add_argument("--seeds", type=parse_seeds, required=True, help="scene seeds A:B (not the evaluation's)")
    ap.add_argument("--out", required=True, help="folder for the takeovers, as energyflow train --rollouts reads")
    ap.add_argument("--stall-steps", type=int, default=100)
    ap.add_argument("--stall-m", type=float, default=0.01)
    ap.add_argument("--takeover-at", type=int, default=300)
    ap.add_argument("--held-steps", type=int, default=0,
                    help="also take over when the hand stood this many steps held away from its controller's "
                         "target (Held; 0: off)")
    ap.add_argument("--held-m", type=float, default=0.01, help="held: moved less than this over those steps")
    ap.add_argument("--held-gap", type=float, default=0.025, help="held: at least this far from its target at each")
    ap.add_argument("--max-late", type=int, default=1, help="plans land 0..N steps late, as through the runtime")
    ap.add_argument("--min-late", type=int, default=0,
                    help="and at least this many (e.g. 3 with --max-late 5: the policy's own driving under "
                         "sim eval --delay 3, whose plans land about 4 periods late)")
    ap.add_argument("--extra-steps", type=int, default=10)
    args = ap.parse_args(argv)
    if not 0 <= args.min_late <= args.max_late:
        ap.error(f"--min-late must be 0..--max-late ({args.max_late}), got {args.min_late}")
    try:
        stall = Stall(args.stall_steps, args.stall_m, args.takeover_at)
        held = Held(args.held_steps, args.held_m, args.held_gap) if args.held_steps else None
    except ValueError as e:
        ap.error(str(e))

    try:
        from sim.world import expert_policy  # the simulator's scripted expert: the operator's stand-in
    except ImportError as e:
        raise SystemExit(f"energyflow.takeovers: needs the simulator, the repository's sim/ package: run from "
                         f"the repository root ({e})") from e

    try:
        planner = load_planner(args.bundle, threads=1)
    except (BundleError, ValueError, OSError) as e:
        ap.error(f"--bundle: {e}")
    world = world_class()(task=args.task, camera_size=None)
    expert = expert_policy(args.task).get_action
    got: List[Takeover] = []
    rows = []
    for seed in args.seeds:
        t = run_scene(planner, world, expert, seed, stall, args.max_late, extra_steps=args.extra_steps, held=held,
                      min_late=args.min_late)
        got.append(t)
        rows.append({"seed": t.seed, "policy_success": t.policy_success, "takeover_step": t.takeover_step,
                     "expert_success": t.expert_success, "length": t.demo.length if t.demo else 0})
        print(json.dumps(rows[-1]), flush=True)
    kept = [t for t in got if t.demo is not None]
    summary = {"bundle": args.bundle, "seeds": [args.seeds.start, args.seeds.stop], "stall": vars(stall),
               "held": vars(held) if held else None,
               "max_late": args.max_late, "min_late": args.min_late,
               "policy_successes": sum(r["policy_success"] for r in rows),
               "takeovers": sum(r["takeover_step"] is not None for r in rows), "takeovers_kept": len(kept),
               "scenes": rows}
    write_takeovers(args.out, args.task, kept, summary)
    print(f"{len(rows)} scenes: policy alone {summary['policy_successes']}, took over {summary['takeovers']}, "
          f"kept {len(kept)} takeovers ({sum(t.demo.length for t in kept)} steps) → {args.out}")


if __name__ == "__main__":
    main()
