#!/usr/bin/env python3
"""What the robot saw when the energy stop tripped: read a runtime recording.

    .venv/bin/python -m research.stop.explain_trip RECORDING.hdf5 [...] [--bundle DIR] [--top 6]
    .venv/bin/python -m research.stop.explain_trip --summary DIR/recordings/*/*.hdf5 [--outcomes DIR/*.json]
    .venv/bin/python -m research.stop.explain_trip RECORDING.hdf5 --rows 100-119,200,300

A recording (`energyflow sim eval --record DIR`, or `recording.enabled` on a
robot; layout in runtime/record) holds every running tick's arm state,
command and scores, and the safety events. For each recording this prints how
it ended, the trip event's message, and the tick whose state score
(state_energy) was highest, with the state dimensions farthest from the
demonstrations there: z = (x - mean) / std on the bundle's own standardization
of the state (the manifest's obs norm), named for a 39-wide Meta-World state.

The recording ends at the last running tick before the trip: the tripping
tick's score is in the trip event's message.

For a Meta-World state it also gives the object's pose at that tick: how far
it has turned since the episode's first recorded tick, and its tilt (the
angle between its own z axis and the world's; a puck lying on its side reads
90°). --summary prints one line per recording instead, then a table per
outcome (how many peaked with the object turned 10° or more), and --outcomes joins
each with how its episode ended, read from `sim eval --json` files by the
seed in the recording's folder name (TASK_SEED, as `sim eval --record`
names it). --rows prints the given rows after the explanation: the state
score, the object's pose, its height, the hand's position and the gripper.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# Meta-World v3's 39-wide observation: this frame's 18, the previous frame's
# 18, the goal.
_FRAME = ["hand.x", "hand.y", "hand.z", "gripper",
          "obj.x", "obj.y", "obj.z", "obj.qw", "obj.qx", "obj.qy", "obj.qz",
          "obj2.x", "obj2.y", "obj2.z", "obj2.qw", "obj2.qx", "obj2.qy", "obj2.qz"]
METAWORLD_NAMES = _FRAME + ["prev." + n for n in _FRAME] + ["goal.x", "goal.y", "goal.z"]
_AT = {n: i for i, n in enumerate(METAWORLD_NAMES)}
_QUAT = slice(_AT["obj.qw"], _AT["obj.qz"] + 1)  # the first object's (w, x, y, z)


@dataclass
class Recording:
    """One episode of a runtime recording."""
    env: str
    state: np.ndarray            # [L, D]
    scores: dict[str, np.ndarray]
    events: list[dict]
    stop_reason: str


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def read_recording(path: Path) -> Recording:
    """Reads the first episode of a runtime recording (one per file)."""
    import h5py

    with h5py.File(path, "r") as h:
        env = _text(h["data"].attrs.get("env", ""))
        d = h["data/demo_0"]
        obs = d["obs"]
        names = [k for k in obs if obs[k].ndim == 2]
        if not names:
            raise ValueError(f"{path}: no state observation (obs/<key> of shape [L, D])")
        state = np.asarray(obs[names[0]], dtype=np.float64)
        scores = {k: np.asarray(v, dtype=np.float64) for k, v in d["scores"].items()} if "scores" in d else {}
        events = json.loads(_text(d.attrs.get("safety_events", "[]")) or "[]") or []
        return Recording(env, state, scores, events, _text(d.attrs.get("stop_reason", "")))


def state_norm(bundle: Path) -> tuple[np.ndarray, np.ndarray]:
    """The bundle's standardization of the state input (mean, std)."""
    m = json.loads((bundle / "manifest.json").read_text())
    for o in m.get("obs", []):
        if o.get("kind") == "state" and o.get("norm"):
            return np.asarray(o["norm"]["mean"], dtype=np.float64), np.asarray(o["norm"]["std"], dtype=np.float64)
    raise ValueError(f"{bundle}: the manifest has no state norm")


def farthest(x: np.ndarray, mean: np.ndarray, std: np.ndarray, top: int) -> list[tuple[str, float, float]]:
    """The top dimensions of x by |z|: (name, value, z)."""
    if x.shape != mean.shape:
        raise ValueError(f"state width {x.shape[0]}, the bundle's norm {mean.shape[0]}")
    z = (x - mean) / np.where(std > 0, std, 1.0)
    names = METAWORLD_NAMES if x.shape[0] == len(METAWORLD_NAMES) else [f"state[{i}]" for i in range(x.shape[0])]
    order = np.argsort(-np.abs(z))[:top]
    return [(names[i], float(x[i]), float(z[i])) for i in order]


def _quat(x: np.ndarray) -> np.ndarray | None:
    """The first object's unit quaternion (w, x, y, z) of a Meta-World state; None for other widths."""
    if x.shape[0] != len(METAWORLD_NAMES):
        return None
    q = np.asarray(x[_QUAT], dtype=np.float64)
    n = float(np.linalg.norm(q))
    return q / n if n > 0 else None


def turned_deg(q: np.ndarray, q0: np.ndarray) -> float:
    """The angle of the rotation that takes orientation q0 to q, in degrees."""
    return math.degrees(2 * math.acos(min(1.0, abs(float(np.dot(q, q0))))))


def tilt_deg(q: np.ndarray) -> float:
    """The angle between the body's z axis and the world's, in degrees."""
    _, x, y, _ = q
    return math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y)))))


def object_pose(rec: Recording, i: int) -> tuple[float, float] | None:
    """(turned since the first tick, tilt) of the object at row i, degrees; None without a Meta-World state."""
    q, q0 = _quat(rec.state[i]), _quat(rec.state[0])
    if q is None or q0 is None:
        return None
    return turned_deg(q, q0), tilt_deg(q)


def highest(rec: Recording) -> int | None:
    """The row of the highest state_energy; None when none was recorded."""
    se = rec.scores.get("state_energy")
    if se is None or len(se) == 0 or np.all(np.isnan(se)):
        return None
    return int(np.nanargmax(se))


def explain(path: Path, bundle: Path | None, top: int) -> str:
    rec = read_recording(path)
    if bundle is None:
        bundle = ROOT / "bundles" / rec.env
    mean, std = state_norm(bundle)
    lines = [f"{path}: {rec.env}, {len(rec.state)} running ticks, ended: {rec.stop_reason or 'unknown'}"]
    for e in rec.events:
        if e.get("type") == "trip":
            lines.append(f"  trip at tick {e.get('tick')}: {e.get('reason')}: {e.get('message')}")
    i = highest(rec)
    if i is None:
        i = len(rec.state) - 1
        lines.append(f"  no state_energy recorded: the last tick, row {i}")
    else:
        se = rec.scores["state_energy"]
        lines.append(f"  highest state_energy {se[i]:.4g} at row {i} of {len(se)} (last row {se[-1]:.4g})")
    pose = object_pose(rec, i)
    if pose is not None:
        lines.append(f"  the object there: turned {pose[0]:.0f}° since row 0, tilted {pose[1]:.0f}°")
    for name, v, z in farthest(rec.state[i], mean, std, top):
        zs = f"{z:+.1f}σ" if math.isfinite(z) else "n/a"
        lines.append(f"    {name:<13} {v:+.4f}  {zs}")
    return "\n".join(lines)


def parse_rows(spec: str) -> list[int]:
    """Rows from "100-119,200,300" (ranges inclusive)."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"--rows: {part!r} is not a row or a range FROM-TO")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"--rows: {part!r} ends before it starts")
        out.extend(range(a, b + 1))
    return out


def rows_table(rec: Recording, rows: list[int]) -> str:
    """The given rows: state score, object pose and height, hand position, gripper (Meta-World widths)."""
    se = rec.scores.get("state_energy")
    lines = ["  row  state_energy  turned  tilt  obj.z   hand x, y, z            gripper"]
    for i in rows:
        if i >= len(rec.state):
            raise ValueError(f"--rows: row {i}, the recording has {len(rec.state)}")
        x = rec.state[i]
        v = f"{se[i]:12.4g}" if se is not None and i < len(se) else f"{'n/a':>12}"
        pose = object_pose(rec, i)
        if pose is None:
            lines.append(f"  {i:>3}  {v}")
            continue
        hand = ", ".join(f"{x[_AT[n]]:+.3f}" for n in ("hand.x", "hand.y", "hand.z"))
        lines.append(f"  {i:>3}  {v}  {pose[0]:5.0f}°  {pose[1]:3.0f}°  {x[_AT['obj.z']]:+.3f}  "
                     f"{hand}  {x[_AT['gripper']]:+.2f}")
    return "\n".join(lines)


def read_outcomes(paths: list[Path]) -> dict[tuple[str | None, int], str]:
    """(task, seed) → how the episode ended ("success", "truncated", ...), from `sim eval --json` files.

    The task is the file's own "task" (None in a file without one): the tasks of one folder of
    research/stop/level0_hours.sh share their seeds, so a seed alone does not name an episode.
    """
    out: dict[tuple[str | None, int], str] = {}
    for p in paths:
        s = json.loads(p.read_text())
        task = s.get("task")
        for r in s.get("results", []):
            out[(task, int(r["seed"]))] = str(r.get("end", "success" if r.get("success") else "failure"))
    return out


def seed_of(path: Path) -> int | None:
    """The seed in a recording's folder name (TASK_SEED), or None."""
    tail = path.parent.name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def outcome_of(path: Path, outcomes: dict[tuple[str | None, int], str]) -> str:
    """How the episode of the recording at path ended, by its folder's TASK_SEED; "?" when unknown.

    A result from a file that names no task matches by seed alone (of several such files with the
    same seed, the last one read).
    """
    seed = seed_of(path)
    if seed is None:
        return "?"
    task = path.parent.name.rsplit("_", 1)[0]
    if (task, seed) in outcomes:
        return outcomes[(task, seed)]
    return outcomes.get((None, seed), "?")


@dataclass
class Peak:
    """One recording's summary: how its episode ended, and its highest state score."""
    name: str
    ended: str
    ticks: int
    score: float | None = None   # the highest state_energy; None when none was recorded
    row: int = -1
    pose: tuple[float, float] | None = None  # (turned, tilt) of the object there, degrees
    farthest: tuple[str, float] | None = None  # the state dimension farthest from the demonstrations, its z


def summarize(path: Path, bundle: Path | None, outcomes: dict[tuple[str | None, int], str]) -> Peak:
    """A recording's Peak: its episode's outcome by task and seed (``outcomes``), its highest state score."""
    rec = read_recording(path)
    if bundle is None:
        bundle = ROOT / "bundles" / rec.env
    mean, std = state_norm(bundle)
    name = path.parent.name if seed_of(path) is not None else path.name
    p = Peak(name, outcome_of(path, outcomes), len(rec.state))
    i = highest(rec)
    if i is not None:
        (dim, _, z), = farthest(rec.state[i], mean, std, 1)
        p.score, p.row, p.pose, p.farthest = float(rec.scores["state_energy"][i]), i, object_pose(rec, i), (dim, z)
    return p


def summary_line(p: Peak) -> str:
    """One line: the episode, how it ended, its highest state_energy and the object's pose there."""
    if p.score is None:
        return f"{p.name:<24} {p.ended:<9} {p.ticks:>4} ticks  no state_energy"
    at = f"turned {p.pose[0]:5.0f}° tilt {p.pose[1]:5.0f}°" if p.pose is not None else "pose n/a"
    return (f"{p.name:<24} {p.ended:<9} {p.ticks:>4} ticks  max state_energy {p.score:10.4g}"
            f" at row {p.row:>3}  {at}  farthest {p.farthest[0]} {p.farthest[1]:+.1f}σ")


def tally(peaks: list[Peak], turned: float = 10.0) -> str:
    """Per outcome: the episodes, their peaks' median and largest, and how many peaked with the object
    turned at least ``turned`` degrees since the start (and those peaks' median)."""
    lines = [f"| ended | episodes | highest state_energy: median / max | object turned ≥ {turned:g}° at the peak | their peaks: median / max |",
             "|---|---|---|---|---|"]
    for ended in sorted({p.ended for p in peaks}):
        ps = [p for p in peaks if p.ended == ended and p.score is not None]
        if not ps:
            continue
        sc = np.array([p.score for p in ps])
        tt = np.array([p.score for p in ps if p.pose is not None and p.pose[0] >= turned])
        their = f"{np.median(tt):.4g} / {tt.max():.4g}" if len(tt) else "–"
        lines.append(f"| {ended} | {len(ps)} | {np.median(sc):.4g} / {sc.max():.4g} | {len(tt)} | {their} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--bundle", type=Path, help="the bundle that drove it (default: bundles/<the recording's env>)")
    ap.add_argument("--top", type=int, default=6, help="how many state dimensions to list")
    ap.add_argument("--summary", action="store_true", help="one line per recording")
    ap.add_argument("--rows", default="", help="also print these rows (\"100-119,200\"): score, object pose, hand, gripper")
    ap.add_argument("--outcomes", type=Path, nargs="+", default=[],
                    help="sim eval --json files: how each episode ended, joined by the task and seed in the recording's folder name")
    a = ap.parse_args(argv)
    try:
        outcomes = read_outcomes(a.outcomes)
    except (OSError, ValueError, KeyError) as e:
        print(f"explain_trip.py: --outcomes: {e}", file=sys.stderr)
        return 2
    try:
        rows = parse_rows(a.rows)
    except ValueError as e:
        print(f"explain_trip.py: {e}", file=sys.stderr)
        return 2
    status = 0
    peaks: list[Peak] = []
    for p in a.recordings:
        try:
            if a.summary:
                peaks.append(summarize(p, a.bundle, outcomes))
                print(summary_line(peaks[-1]))
            else:
                print(explain(p, a.bundle, a.top))
            if rows:
                print(rows_table(read_recording(p), rows))
        except (OSError, ValueError, KeyError) as e:
            print(f"explain_trip.py: {p}: {e}", file=sys.stderr)
            status = 1
    if a.summary and peaks:
        print("\n" + tally(peaks))
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    sys.exit(main())
