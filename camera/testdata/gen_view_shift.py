"""Render the fixture frames of camera/viewshift_test.go from the simulator.

Per task, the bundles' camera (topview, 96x96, the simulator's fast render):
  <task>-ref.png     the scene at its reset (the reference view)
  <task>-arm.png     30 expert steps later: the arm has moved, the camera has not
  <task>-scene.png   another scene (other seed) at its reset: objects elsewhere, camera not moved
  <task>-knocked.png the -arm frame's scene with the camera knocked (the camera_shift fault)

Run from the repository root:  .venv/bin/python camera/testdata/gen_view_shift.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from sim.world import Fault, World, expert_policy

OUT = Path(__file__).resolve().parent / "view"
TASKS = ("button-press", "drawer-open", "hammer")
STEPS = 30


def main() -> None:
    OUT.mkdir(exist_ok=True)
    w = World(camera_size=(96, 96), camera_name="topview")
    try:
        for task in TASKS:
            frames: dict[str, np.ndarray] = {}
            for name, seed, fault in (("ref", 1000, None), ("knocked", 1000, Fault("camera_shift", STEPS))):
                obs = w.reset(task=task, level="0", seed=seed, fault=fault)
                if name == "ref":
                    frames["ref"] = w.render()
                expert = expert_policy(task)
                for _ in range(STEPS):
                    obs = w.step(expert.get_action(obs)).obs
                frames["arm" if name == "ref" else name] = w.render()
            w.reset(task=task, level="0", seed=1001)
            frames["scene"] = w.render()
            for name, img in frames.items():
                Image.fromarray(np.asarray(img, dtype=np.uint8)).save(OUT / f"{task}-{name}.png")
    finally:
        w.close()


if __name__ == "__main__":
    main()
