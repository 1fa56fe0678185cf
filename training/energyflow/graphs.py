"""ONNX graphs on disk: an ONNX Runtime session and the operators a graph uses.

The one place the toolkit opens ONNX Runtime sessions (the reference
samplers, the export self-checks, calibration, the fixtures) and lists a
graph's operators (``energyflow inspect``, the export's operator gate).
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import onnx
import onnxruntime as ort


def ort_session(path: str | Path, threads: Optional[int] = None,
                inter_threads: Optional[int] = None) -> ort.InferenceSession:
    """``path`` in ONNX Runtime on the CPU; ``threads`` / ``inter_threads`` set the
    intra- / inter-op thread counts (None: ONNX Runtime's default)."""
    so = ort.SessionOptions()
    if threads is not None:
        so.intra_op_num_threads = threads
    if inter_threads is not None:
        so.inter_op_num_threads = inter_threads
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def graph_ops(path: str | Path) -> List[str]:
    """Sorted operator types used in an ONNX file."""
    m = onnx.load(str(path))
    return sorted({n.op_type for n in m.graph.node})
