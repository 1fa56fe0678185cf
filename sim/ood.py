"""Out-of-distribution levels for the Meta-World tasks (paper §5.5 / Appendix C analog).

Every task has Meta-World's random-reset vector ("rand vec": the object
position, and for assembly also the goal/peg position).  A level says from
which box that vector is drawn, which inner box is excluded (so every level is a
*shell* around the previous one: perturbations grow with the level), and which
scene bodies are displaced by how much.

Rule (written out per task below, the numbers are the contract):

* ``0``: Meta-World's own ``_random_reset_space`` (the demonstrations' range).
* ``S``: object x/y half-widths x1.5 around the centre (at least +-0.015 m where
  Meta-World fixes a coordinate), level-0 box excluded.
* ``M``: object x/y half-widths x2 (at least +-0.03 m), S box excluded.
* ``L``: the goal also leaves its range.  Where the goal is a separate thing
  (assembly's peg, bin-picking's goal bin, hammer's nail box) objects are drawn
  as in M and the goal is displaced outside its level-0 range; where the goal is
  rigidly attached to the object (button-press: the button; drawer-open: the
  drawer) object and goal move together, x3 half-widths (at least +-0.045 m),
  M box excluded.
* Boxes are clipped to where the object stays on the table and reachable
  (hammer y >= 0.40: the hand cannot go below y = 0.40).
* bin-picking's cube must stay inside its bin, so its S/M/L widening moves the
  start bin (cube carried along) instead.

z coordinates are never perturbed (objects rest on the table).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LEVELS = ("0", "S", "M", "L")

Box = tuple[tuple[float, ...], tuple[float, ...]]


@dataclass(frozen=True)
class Exclude:
    """Reject a sample whose coordinates ``dims`` all lie inside [low, high]."""

    dims: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


@dataclass(frozen=True)
class BodyOffset:
    """Displace a scene body by an offset drawn from [low, high] (x, y), outside ``exclude``."""

    body: str
    low: tuple[float, float]
    high: tuple[float, float]
    exclude: Box | None = None
    carry: tuple[int, ...] = ()  # rand-vec x/y indices moved along with the body (the cube in its bin)
    after_reset: bool = False  # the task's reset_model re-places this body: apply after reset


@dataclass(frozen=True)
class Level:
    low: tuple[float, ...]
    high: tuple[float, ...]
    exclude: tuple[Exclude, ...] = ()
    bodies: tuple[BodyOffset, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class TaskOOD:
    rand_vec: str  # what the rand vec holds
    levels: dict[str, Level] = field(default_factory=dict)
    min_obj_goal_xy: float = 0.0  # assembly: Meta-World keeps object and peg >= 0.1 m apart


OOD: dict[str, TaskOOD] = {
    "button-press": TaskOOD(
        rand_vec="button box x, y, z (the goal, the pressed button, moves with it)",
        levels={
            "0": Level((-0.10, 0.85, 0.115), (0.10, 0.90, 0.115), note="Meta-World range"),
            "S": Level((-0.15, 0.8375, 0.115), (0.15, 0.9125, 0.115),
                       (Exclude((0, 1), (-0.10, 0.85), (0.10, 0.90)),), note="x1.5, level 0 excluded"),
            "M": Level((-0.20, 0.825, 0.115), (0.20, 0.925, 0.115),
                       (Exclude((0, 1), (-0.15, 0.8375), (0.15, 0.9125)),), note="x2, S excluded"),
            "L": Level((-0.30, 0.80, 0.115), (0.30, 0.95, 0.115),
                       (Exclude((0, 1), (-0.20, 0.825), (0.20, 0.925)),),
                       note="x3 (goal rigid with the button), M excluded"),
        },
    ),
    "drawer-open": TaskOOD(
        rand_vec="drawer x, y, z (the goal, the opened handle, moves with it)",
        levels={
            "0": Level((-0.10, 0.90, 0.0), (0.10, 0.90, 0.0), note="Meta-World range (y fixed)"),
            "S": Level((-0.15, 0.885, 0.0), (0.15, 0.915, 0.0),
                       (Exclude((0, 1), (-0.10, 0.90), (0.10, 0.90)),), note="x1.5 / +-0.015, level 0 excluded"),
            "M": Level((-0.20, 0.87, 0.0), (0.20, 0.93, 0.0),
                       (Exclude((0, 1), (-0.15, 0.885), (0.15, 0.915)),), note="x2 / +-0.03, S excluded"),
            "L": Level((-0.30, 0.855, 0.0), (0.30, 0.945, 0.0),
                       (Exclude((0, 1), (-0.20, 0.87), (0.20, 0.93)),),
                       note="x3 / +-0.045 (goal rigid with the drawer), M excluded"),
        },
    ),
    "assembly": TaskOOD(
        rand_vec="wrench x, y, z, then peg (goal) x, y, z",
        min_obj_goal_xy=0.1,
        levels={
            "0": Level((0.0, 0.60, 0.02, -0.10, 0.75, 0.10), (0.0, 0.60, 0.02, 0.10, 0.85, 0.10),
                       note="Meta-World range (wrench fixed)"),
            "S": Level((-0.015, 0.585, 0.02, -0.10, 0.75, 0.10), (0.015, 0.615, 0.02, 0.10, 0.85, 0.10),
                       (Exclude((0, 1), (0.0, 0.60), (0.0, 0.60)),), note="wrench +-0.015"),
            "M": Level((-0.03, 0.57, 0.02, -0.10, 0.75, 0.10), (0.03, 0.63, 0.02, 0.10, 0.85, 0.10),
                       (Exclude((0, 1), (-0.015, 0.585), (0.015, 0.615)),), note="wrench +-0.03, S excluded"),
            "L": Level((-0.03, 0.57, 0.02, -0.20, 0.70, 0.10), (0.03, 0.63, 0.02, 0.20, 0.90, 0.10),
                       (Exclude((0, 1), (-0.015, 0.585), (0.015, 0.615)),
                        Exclude((3, 4), (-0.10, 0.75), (0.10, 0.85))),
                       note="wrench as M; peg x2 around its centre, level-0 peg box excluded"),
        },
    ),
    "bin-picking": TaskOOD(
        rand_vec="cube x, y, z, then 3 unused goal values (the goal bin is fixed in the scene)",
        levels={
            "0": Level((-0.21, 0.65, 0.02, 0.1199, 0.699, -0.001), (-0.03, 0.75, 0.02, 0.1201, 0.701, 0.001),
                       note="Meta-World range; start bin at (-0.12, 0.70), goal bin at (0.12, 0.70)"),
            "S": Level((-0.21, 0.65, 0.02, 0.1199, 0.699, -0.001), (-0.03, 0.75, 0.02, 0.1201, 0.701, 0.001),
                       bodies=(BodyOffset("bin_start", (-0.03, -0.03), (0.0, 0.03), carry=(0, 1)),),
                       note="start bin (and cube) shifted dx in [-0.03, 0], dy in [-0.03, 0.03]"),
            "M": Level((-0.21, 0.65, 0.02, 0.1199, 0.699, -0.001), (-0.03, 0.75, 0.02, 0.1201, 0.701, 0.001),
                       bodies=(BodyOffset("bin_start", (-0.06, -0.06), (0.0, 0.06),
                                          exclude=((-0.03, -0.03), (0.0, 0.03)), carry=(0, 1)),),
                       note="start bin shifted dx in [-0.06, 0], dy in [-0.06, 0.06], S box excluded"),
            "L": Level((-0.21, 0.65, 0.02, 0.1199, 0.699, -0.001), (-0.03, 0.75, 0.02, 0.1201, 0.701, 0.001),
                       bodies=(BodyOffset("bin_start", (-0.06, -0.06), (0.0, 0.06),
                                          exclude=((-0.03, -0.03), (0.0, 0.03)), carry=(0, 1)),
                               BodyOffset("bin_goal", (0.0, -0.06), (0.06, 0.06),
                                          exclude=((0.0, -0.02), (0.02, 0.02)))),
                       note="start bin as M; goal bin shifted dx in [0, 0.06], dy in [-0.06, 0.06], "
                            "at least 0.02 m in x or y"),
        },
    ),
    "hammer": TaskOOD(
        rand_vec="hammer x, y, z (the nail box is fixed at (0.24, 0.85))",
        levels={
            "0": Level((-0.10, 0.40, 0.0), (0.10, 0.50, 0.0), note="Meta-World range"),
            "S": Level((-0.15, 0.40, 0.0), (0.15, 0.525, 0.0),
                       (Exclude((0, 1), (-0.10, 0.40), (0.10, 0.50)),), note="x1.5 (y clipped at 0.40), level 0 excluded"),
            "M": Level((-0.20, 0.40, 0.0), (0.20, 0.55, 0.0),
                       (Exclude((0, 1), (-0.15, 0.40), (0.15, 0.525)),), note="x2 (y clipped at 0.40), S excluded"),
            "L": Level((-0.20, 0.40, 0.0), (0.20, 0.55, 0.0),
                       (Exclude((0, 1), (-0.15, 0.40), (0.15, 0.525)),),
                       bodies=(BodyOffset("box", (-0.06, -0.05), (0.06, 0.05),
                                          exclude=((-0.02, -0.02), (0.02, 0.02)), after_reset=True),),
                       note="hammer as M; nail box shifted dx in [-0.06, 0.06], dy in [-0.05, 0.05], "
                            "at least 0.02 m in x or y"),
        },
    ),
}


def normalize_level(level) -> str:
    s = str(level).strip().upper()
    if s not in LEVELS:
        raise ValueError(f"unknown OOD level {level!r}; want one of {', '.join(LEVELS)}")
    return s


def _inside(x, low, high) -> bool:
    return all(lo <= v <= hi for v, lo, hi in zip(x, low, high))


@dataclass
class Sample:
    rand_vec: np.ndarray
    bodies: dict[str, tuple[np.ndarray, bool]]  # body -> (xy offset, after_reset)


def sample(task: str, level: str, rng: np.random.Generator, max_tries: int = 10000) -> Sample:
    """Draw the reset configuration of one episode."""
    spec = OOD[task]
    lv = spec.levels[normalize_level(level)]
    low = np.asarray(lv.low, dtype=np.float64)
    high = np.asarray(lv.high, dtype=np.float64)
    for _ in range(max_tries):
        v = rng.uniform(low, high)
        if any(_inside(v[list(e.dims)], e.low, e.high) for e in lv.exclude):
            continue
        if spec.min_obj_goal_xy and np.linalg.norm(v[0:2] - v[3:5]) < spec.min_obj_goal_xy:
            continue
        break
    else:  # pragma: no cover - boxes are designed to have room
        raise RuntimeError(f"could not sample {task} level {level}")
    bodies: dict[str, tuple[np.ndarray, bool]] = {}
    for b in lv.bodies:
        for _ in range(max_tries):
            off = rng.uniform(b.low, b.high)
            if b.exclude is None or not _inside(off, *b.exclude):
                break
        bodies[b.body] = (off, b.after_reset)
        for i, idx in enumerate(b.carry):
            v[idx] += off[i]
    return Sample(v, bodies)


def table_markdown() -> str:
    """The ranges as a Markdown table (docs/sim.md is generated from this)."""
    lines = ["| task | level | rand vec low | rand vec high | excluded | bodies moved | note |",
             "|---|---|---|---|---|---|---|"]

    def f(t):
        return "(" + ", ".join(f"{x:g}" for x in t) + ")"

    for task, spec in OOD.items():
        for name in LEVELS:
            lv = spec.levels[name]
            exc = "; ".join(f"dims {list(e.dims)} in {f(e.low)}..{f(e.high)}" for e in lv.exclude) or "-"
            bod = "; ".join(
                f"{b.body} += {f(b.low)}..{f(b.high)}" + (f" not in {f(b.exclude[0])}..{f(b.exclude[1])}" if b.exclude else "")
                for b in lv.bodies) or "-"
            lines.append(f"| {task} | {name} | {f(lv.low)} | {f(lv.high)} | {exc} | {bod} | {lv.note} |")
    return "\n".join(lines)


def as_json() -> dict:
    out = {}
    for task, spec in OOD.items():
        out[task] = {"rand_vec": spec.rand_vec, "levels": {}}
        for name in LEVELS:
            lv = spec.levels[name]
            out[task]["levels"][name] = {
                "low": list(lv.low), "high": list(lv.high),
                "exclude": [{"dims": list(e.dims), "low": list(e.low), "high": list(e.high)} for e in lv.exclude],
                "bodies": [{"body": b.body, "low": list(b.low), "high": list(b.high),
                            "exclude": [list(b.exclude[0]), list(b.exclude[1])] if b.exclude else None}
                           for b in lv.bodies],
                "note": lv.note,
            }
    return out


if __name__ == "__main__":
    print(table_markdown())
