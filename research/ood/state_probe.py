"""What the state score reads for constructed scenes: an object tipped or moved at rest, an arm zeroed.

    OMP_NUM_THREADS=1 .venv/bin/python -m research.ood.state_probe --bundle bundles/metaworld-bin-picking \
        --task bin-picking [--seed 52000] [--scenes 3]

Each scene starts from a level-0 reset of Meta-World (seeds --seed, --seed+1,
...: the object resting where the demonstrations start, the arm at home) and
is changed in both frames the state term reads and in both halves of each
39-wide observation (this frame and the previous one), so nothing moves: the
transition component sees a scene at rest, and g sees where it is. The
changes:

- the object rotated by 30, 45, 90 and 180 degrees about x, y or z (the
  quaternion composed with the scene's own; a puck on its edge at 90);
- the object moved 0.1 m and 0.3 m along x, and 0.2 m below the table;
- the arm's state zeroed (hand position and gripper), at rest, as an
  encoder or bus that reads zeros reports it after its first tick;
- the arm's first zeroed reading: this frame zeroed, the frames before it
  not (the jump the transition component sees on the fault's first tick).

The exported ``state_energy.onnx`` is read with its row of z-scores
(``state_components.components_session``), so each row gives
``state_energy`` and its two components, g (max over σ) and the transition
term: the median over the scenes.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402

FRAME = 18         # a 39-wide Meta-World observation: this frame's 18, the previous frame's 18, the goal
HAND = slice(0, 4)  # hand x, y, z and the gripper opening
OBJ_POS = slice(4, 7)
OBJ_QUAT = slice(7, 11)  # w, x, y, z


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The Hamilton product a ⊗ b of two (w, x, y, z) quaternions."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw])


def rotation(axis: int, degrees: float) -> np.ndarray:
    """The unit quaternion of a rotation by degrees about axis 0, 1 or 2 (x, y, z)."""
    q = np.zeros(4)
    q[0] = np.cos(np.radians(degrees) / 2)
    q[1 + axis] = np.sin(np.radians(degrees) / 2)
    return q


def both_halves(o: np.ndarray, sl: slice, value: np.ndarray) -> np.ndarray:
    """o with value written at sl in this frame and in the previous frame's copy."""
    o = o.copy()
    o[sl] = value
    o[sl.start + FRAME:sl.stop + FRAME] = value
    return o


Change = Callable[[np.ndarray], np.ndarray]


def changes() -> List[Tuple[str, Change, bool]]:
    """(label, change of one observation, whether only the newest frame changes)."""
    out: List[Tuple[str, Change, bool]] = [("unchanged", lambda o: o, False)]
    for axis, name in enumerate("xyz"):
        for deg in (30, 45, 90, 180):
            out.append((f"object rotated {deg}° about {name}, at rest",
                        lambda o, a=axis, d=deg: both_halves(o, OBJ_QUAT, quat_mul(rotation(a, d), o[OBJ_QUAT])), False))
    for dx in (0.1, 0.3):
        out.append((f"object moved {dx} m along x, at rest",
                    lambda o, d=dx: both_halves(o, slice(4, 5), o[4:5] + d), False))
    out.append(("object 0.2 m below the table, at rest", lambda o: both_halves(o, slice(6, 7), o[6:7] - 0.2), False))
    out.append(("arm state zeroed, at rest", lambda o: both_halves(o, HAND, np.zeros(4)), False))
    out.append(("arm state zeroed, its first reading", lambda o: both_halves(o, HAND, np.zeros(4)), True))
    return out


def history(o: np.ndarray, change: Change, newest_only: bool, frames: int) -> List[np.ndarray]:
    """The ``frames`` observations the state term reads for scene ``o`` changed by ``change``:
    every frame changed (at rest), or only the newest (the change's first reading)."""
    new = change(o)
    return [o] * (frames - 1) + [new] if newest_only else [new] * frames


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--seed", type=int, default=52000)
    p.add_argument("--scenes", type=int, default=3)
    a = p.parse_args(argv)

    from energyflow.bundle import read_manifest
    from energyflow.rollout import load_planner
    from research.ood.state_components import components_session, per_component
    from sim.world import World

    bundle = Path(a.bundle)
    man = read_manifest(bundle)
    sess, out_name, z_name, names = components_session(bundle, man)
    planner = load_planner(bundle)
    if planner.obs_horizon < 2:
        raise SystemExit("state_probe: the bundle reads one frame; the probe changes two")
    world = World(a.task, camera_size=None)
    bases = [np.asarray(world.reset(level="0", seed=a.seed + i), np.float64) for i in range(a.scenes)]
    if bases[0].shape[0] != 2 * FRAME + 3:
        raise SystemExit(f"state_probe: a {bases[0].shape[0]}-wide state; the probe knows the 39-wide Meta-World one")
    comps = list(dict.fromkeys(names))
    print(f"{a.task}, {bundle}: median over {a.scenes} level-0 scenes (seeds {a.seed}–{a.seed + a.scenes - 1})\n")
    print("| scene | state_energy | " + " | ".join(comps) + " |")
    print("|---|---|" + "---|" * len(comps))
    for label, change, newest_only in changes():
        rows: Dict[str, List[float]] = {c: [] for c in ["state_energy"] + comps}
        for o in bases:
            hist = history(o, change, newest_only, planner.obs_horizon)
            se, z = sess.run([out_name, z_name], {"cond": planner.cond(hist)})
            rows["state_energy"].append(float(np.asarray(se).reshape(-1)[0]))
            for c, v in per_component(np.asarray(z, np.float64).reshape(1, -1), names).items():
                rows[c].append(float(v[0]))
        print(f"| {label} | " + " | ".join(f"{np.median(rows[c]):.4g}" for c in ["state_energy"] + comps) + " |")


if __name__ == "__main__":
    main()
