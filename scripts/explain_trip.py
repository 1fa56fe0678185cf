#!/usr/bin/env python3
"""What the robot saw when the energy stop tripped: read a runtime recording.

    .venv/bin/python scripts/explain_trip.py RECORDING.hdf5 [...] [--bundle DIR] [--top 6]

A recording (`energyflow sim eval --record DIR`, or `recording.enabled` on a
robot; layout in runtime/record) holds every running tick's arm state,
command and scores, and the safety events. For each recording this prints how
it ended, the trip event's message, and the tick whose state score
(state_energy) was highest, with the state dimensions farthest from the
demonstrations there: z = (x - mean) / std on the bundle's own standardization
of the state (the manifest's obs norm), named for a 39-wide Meta-World state.

The recording ends at the last running tick before the trip: the tripping
tick's score is in the trip event's message.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# Meta-World v3's 39-wide observation: this frame's 18, the previous frame's
# 18, the goal.
_FRAME = ["hand.x", "hand.y", "hand.z", "gripper",
          "obj.x", "obj.y", "obj.z", "obj.qw", "obj.qx", "obj.qy", "obj.qz",
          "obj2.x", "obj2.y", "obj2.z", "obj2.qw", "obj2.qx", "obj2.qy", "obj2.qz"]
METAWORLD_NAMES = _FRAME + ["prev." + n for n in _FRAME] + ["goal.x", "goal.y", "goal.z"]


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


def explain(path: Path, bundle: Path | None, top: int) -> str:
    rec = read_recording(path)
    if bundle is None:
        bundle = ROOT / "bundles" / rec.env
    mean, std = state_norm(bundle)
    lines = [f"{path}: {rec.env}, {len(rec.state)} running ticks, ended: {rec.stop_reason or 'unknown'}"]
    for e in rec.events:
        if e.get("type") == "trip":
            lines.append(f"  trip at tick {e.get('tick')}: {e.get('reason')}: {e.get('message')}")
    se = rec.scores.get("state_energy")
    if se is None or len(se) == 0 or np.all(np.isnan(se)):
        i = len(rec.state) - 1
        lines.append(f"  no state_energy recorded: the last tick, row {i}")
    else:
        i = int(np.nanargmax(se))
        lines.append(f"  highest state_energy {se[i]:.4g} at row {i} of {len(se)} (last row {se[-1]:.4g})")
    for name, v, z in farthest(rec.state[i], mean, std, top):
        zs = f"{z:+.1f}σ" if math.isfinite(z) else "n/a"
        lines.append(f"    {name:<13} {v:+.4f}  {zs}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--bundle", type=Path, help="the bundle that drove it (default: bundles/<the recording's env>)")
    ap.add_argument("--top", type=int, default=6, help="how many state dimensions to list")
    a = ap.parse_args(argv)
    status = 0
    for p in a.recordings:
        try:
            print(explain(p, a.bundle, a.top))
        except (OSError, ValueError, KeyError) as e:
            print(f"explain_trip.py: {p}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
