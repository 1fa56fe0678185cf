"""``state_energy.onnx``: the reading as one graph, checked against torch
(:mod:`energyflow.state_term`; the shared export helpers are
:mod:`energyflow.export`'s)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Dict

import onnx
import torch

from ..export import ALLOWED_OPS, OPSET, ExportCheckError, export_onnx, graph_ops, rel_err
from ..graphs import ort_session
from .reading import StateEnergyReading

GRAPH_FILE = "state_energy.onnx"
INPUT, OUTPUT = "cond", "state_energy"
#: shape-computing operators a TensorRT-friendly graph must not contain
SHAPE_OPS = frozenset({"Shape", "Where", "Equal", "Cast", "Expand", "ConstantOfShape"})
EXPORT_TOL = 1e-5


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------
def export_state_energy(reading: StateEnergyReading, path: str | Path, tol: float = EXPORT_TOL,
                        seed: int = 0) -> Dict[str, float]:
    """Write ``state_energy.onnx`` and check it against torch (float64) on random cond rows.

    Refuses (deletes the file, raises :class:`~energyflow.export.ExportCheckError`)
    operators outside :data:`~energyflow.export.ALLOWED_OPS`, shape-computing
    ones, or a relative error ‖ort − torch‖/‖torch‖ above ``tol`` at batch 1 or 7.
    """
    path = Path(path)
    m = copy.deepcopy(reading).to("cpu", torch.float32).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    d = m.net.cond_dim
    export_onnx(m, (torch.zeros(2, d),), path, [INPUT], [OUTPUT], {INPUT: {0: "batch"}, OUTPUT: {0: "batch"}})
    try:
        ops = set(graph_ops(path))
        bad = sorted((ops - ALLOWED_OPS) | (ops & SHAPE_OPS))
        if bad:
            raise ExportCheckError(f"{path.name} uses operators outside the allowed set: {bad}")
        sess = ort_session(path, threads=1)
        ref = copy.deepcopy(reading).to("cpu", torch.float64).eval()
        gen = torch.Generator().manual_seed(seed)
        worst = 0.0
        for B, scale in ((1, 1.0), (7, 1.0), (7, 4.0)):
            c = torch.randn(B, d, generator=gen) * scale
            (y,) = sess.run([OUTPUT], {INPUT: c.numpy()})
            with torch.no_grad():
                y_ref = ref(c.double()).numpy()
            if y.shape != y_ref.shape:
                raise ExportCheckError(f"{path.name}: output shape {y.shape}, torch {y_ref.shape}")
            worst = max(worst, rel_err(y, y_ref))
        if not worst <= tol:
            raise ExportCheckError(f"{path.name} differs from torch: relative error {worst:.3g} > {tol}")
        model = onnx.load(str(path))
        if model.opset_import[0].version != OPSET:
            raise ExportCheckError(f"{path.name}: opset {model.opset_import[0].version}, want {OPSET}")
        return {"state_energy": worst}
    except Exception:
        if path.exists():
            path.unlink()
        raise
