"""The gate a bundle passes before any closed-loop evaluation through the
runtime (research/notes/evaluation-log.md, "First cells under the new protocol"): its chunks are as
smooth as the demonstrations', and it replays its own training scenes.

An unconverged network samples rough chunks — the step-to-step change of
the shipped grasping bundles was 0.64–0.83 action std against the expert's
0.04–0.15, and their gripper command flipped about once per chunk against
once per episode — and then fails even the scenes it was trained on. Both
are cheap to measure here and expensive to discover through 50-episode
cells.

Checks (each a limit that can be set):

1. ``step_change``: the policy's mean step-to-step change in the executed
   window (action std units, gripper excluded) is at most
   ``max_change_ratio`` × the demonstrations' on the same observation
   windows, or ``demos + min_change_slack``, whichever is larger;
2. ``gripper_flips``: the policy's gripper sign flips per window exceed the
   demonstrations' by at most ``max_extra_flips``;
3. ``train_scenes``: direct rollouts (no runtime) on the scenes of the first
   ``episodes`` demonstrations (their recorded seeds and level) succeed in at
   least ``min_success`` of them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from .data import load_hdf5
from .rollout import Planner, Smoothness, chunk_smoothness, load_planner, rollout, world_class


@dataclass
class GateLimits:
    max_change_ratio: float = 2.0
    min_change_slack: float = 0.05
    max_extra_flips: float = 0.1
    min_success: float = 0.9


@dataclass
class GateResult:
    bundle: str
    data: str
    policy: Dict
    demos: Dict
    train_scenes: Optional[Dict]
    limits: GateLimits
    failures: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> str:
        d = asdict(self)
        d["passed"] = self.passed
        return json.dumps(d, indent=2)

    def __str__(self) -> str:
        p, d = self.policy, self.demos
        lines = [f"gate {self.bundle} on {self.data}:",
                 f"  step change (action std): policy {p['step_change']:.3f}, demos {d['step_change']:.3f} "
                 f"({p['windows']} windows)",
                 f"  gripper flips per window: policy {p['gripper_flips']:.3f}, demos {d['gripper_flips']:.3f}"]
        if self.train_scenes is not None:
            t = self.train_scenes
            lines.append(f"  training scenes, direct rollouts: {t['successes']}/{t['episodes']} "
                         f"(median steps to success {t['median_steps_to_success']})")
        lines.append("  PASS" if self.passed else "  FAIL: " + "; ".join(self.failures))
        return "\n".join(lines)


def judge(policy: Smoothness, demos: Smoothness, success: Optional[float], lim: GateLimits) -> List[str]:
    """The failed checks, each in one line (empty: passed)."""
    out = []
    allowed = max(lim.max_change_ratio * demos.step_change, demos.step_change + lim.min_change_slack)
    if policy.step_change > allowed:
        out.append(f"step change {policy.step_change:.3f} > {allowed:.3f} (demos {demos.step_change:.3f}): "
                   "chunks are rough — train longer or wider")
    if policy.gripper_flips > demos.gripper_flips + lim.max_extra_flips:
        out.append(f"gripper flips {policy.gripper_flips:.3f} per window > demos {demos.gripper_flips:.3f} "
                   f"+ {lim.max_extra_flips}")
    if success is not None and success < lim.min_success:
        out.append(f"training scenes {100 * success:.0f}% < {100 * lim.min_success:.0f}%: "
                   "the policy does not replay its own demonstrations")
    return out


def demo_scenes(data: str | Path, n: int) -> List[tuple]:
    """(task, level, seed) of the first ``n`` demonstrations, from the recorder's attributes."""
    import h5py  # optional heavy dependency of the data paths (as energyflow.data): only when scenes are replayed

    with h5py.File(data, "r") as f:
        g = f["data"]
        task, level = str(g.attrs.get("env", "")), str(g.attrs.get("level", "0"))
        if not task:
            raise ValueError(f"{data}: no data.env attribute: not recorded by sim.record, cannot replay its scenes")
        names = sorted(g.keys(), key=lambda s: int(s.split("_")[-1]) if s.split("_")[-1].isdigit() else 1 << 30)
        out = []
        for name in names[:n]:
            if "seed" not in g[name].attrs:
                raise ValueError(f"{data}: {name} has no seed attribute: cannot replay its scene")
            out.append((task, level, int(g[name].attrs["seed"])))
    return out


def run_gate(bundle: str | Path, data: str | Path, episodes: int = 20, windows: int = 256,
             max_steps: int = 500, steps: Optional[int] = None, seed: int = 0,
             limits: Optional[GateLimits] = None, planner: Optional[Planner] = None) -> GateResult:
    """Measure and judge; ``episodes`` 0 skips the rollouts."""
    lim = limits or GateLimits()
    pl = planner or load_planner(bundle, steps)
    st = next(o for o in pl.manifest["obs"] if o["kind"] == "state")
    key = st.get("name", "state")
    demos, _ = load_hdf5(data, obs_keys=[key])
    sm = chunk_smoothness(pl, demos, state_key=key, n=windows, seed=seed)
    scenes = None
    success = None
    if episodes > 0:
        World = world_class()

        sc = demo_scenes(data, episodes)
        w = World(sc[0][0], camera_size=None)
        rs = [rollout(pl, w, seed=s, level=lv, max_steps=max_steps) for _, lv, s in sc]
        k = sum(r["success"] for r in rs)
        st2 = [r["success_step"] for r in rs if r["success"]]
        success = k / len(rs)
        scenes = {"episodes": len(rs), "successes": k, "success_rate": success,
                  "median_steps_to_success": float(np.median(st2)) if st2 else None, "results": rs}
    return GateResult(str(bundle), str(data), asdict(sm["policy"]), asdict(sm["demos"]), scenes, lim,
                      judge(sm["policy"], sm["demos"], success, lim))
