"""The simulated robot: Meta-World behind the interfaces of real hardware (docs/sim.md)."""

import os
import sys

# Headless rendering; must be set before mujoco is first imported.
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("LP_NUM_THREADS", "0")


def preload_triton() -> None:
    """Load triton's native library before OSMesa's LLVM enters the process.

    With MUJOCO_GL=osmesa, ``import mujoco`` loads libOSMesa (Mesa's llvmpipe,
    LLVM 15); if PyTorch later loads triton's libtriton (its own LLVM) the
    process segfaults. The other order is fine. Call this before importing
    mujoco in any process that also uses torch (the pytest run of training + sim
    does, via sim/conftest.py).
    """
    if "mujoco" in sys.modules:
        return
    try:
        import triton._C.libtriton  # noqa: F401
    except Exception:  # noqa: BLE001 - no triton, nothing to protect
        pass


if "torch" in sys.modules:
    preload_triton()
