"""pytest setup for research/ (make test-research), as sim/conftest.py does for
sim/: headless MuJoCo, and triton's library loaded before OSMesa's (these
analyses import torch and the simulator in one process)."""
import os

os.environ.setdefault("MUJOCO_GL", "osmesa")

import sim  # noqa: E402

sim.preload_triton()
