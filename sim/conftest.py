import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sim  # noqa: E402

# training/ tests (same pytest process) load torch -> triton; triton after OSMesa segfaults.
sim.preload_triton()


def pytest_configure(config):
    # Meta-World's scripted policies warn on every clipped action.
    config.addinivalue_line("filterwarnings", "ignore:Constant\\(s\\) may be too high:UserWarning")
