import os

os.environ.setdefault("MUJOCO_GL", "osmesa")

import sim  # noqa: E402  (the repository root is on the path: pytest.ini's pythonpath)

# training/ tests (same pytest process) load torch -> triton; triton after OSMesa segfaults.
sim.preload_triton()


def pytest_configure(config):
    # Meta-World's scripted policies warn on every clipped action.
    config.addinivalue_line("filterwarnings", "ignore:Constant\\(s\\) may be too high:UserWarning")
