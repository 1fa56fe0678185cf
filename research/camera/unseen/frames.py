"""Frames for the unseen-colour check, as the runtime's camera delivers them: rendered, JPEG-encoded as the bridge does.

    .venv/bin/python -m research.camera.unseen.frames --task button-press --out build/unseen/button-press-clean --seed 60000 --episodes 20
    .venv/bin/python -m research.camera.unseen.frames --task button-press --out build/unseen/button-press-object --seed 50000 --episodes 10 --fault object

The task's top view (or `--camera NAME`), 96×96, the scripted expert driving, 70 steps an episode,
each frame written as the JPEG the bridge would stream (quality 90,
sim/bridge.py): OUT/EEEE_SS.jpg (episode, step). `decode` (Go) turns them into
the runtime's RGB and `table` reads them through the bundle's palette.
"""
from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Optional, Sequence

from PIL import Image

from sim.world import Fault, World, expert_policy

#: the bridge's JPEG quality (sim/bridge.py)
QUALITY = 90
STEPS = 70


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="button-press")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--fault", default=None, help="a sim fault from step 30 (object)")
    p.add_argument("--camera", default="topview", help="the Meta-World camera to render (default topview)")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    w = World(task=a.task, camera_size=(96, 96), camera_name=a.camera)
    pol = expert_policy(a.task)
    for e in range(a.episodes):
        obs = w.reset(level="0", seed=a.seed + e, fault=Fault(kind=a.fault, step=30) if a.fault else None)
        for k in range(STEPS):
            b = io.BytesIO()
            Image.fromarray(w.render()).save(b, format="JPEG", quality=QUALITY)
            (out / f"{e:04d}_{k:02d}.jpg").write_bytes(b.getvalue())
            obs = w.step(pol.get_action(obs)).obs
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
