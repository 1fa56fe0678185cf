"""Small statistics shared by the toolkit, the evaluation scripts and research/."""
from __future__ import annotations

import math
from typing import Tuple


def wilson(k: int, n: int, z: float = 1.96) -> Tuple[float, float]:
    """Wilson score interval of k successes in n trials (95 % at z = 1.96), clipped
    to [0, 1]; (0, 1) for n = 0. The interval of every success rate the
    repository reports (``python -m energyflow.rollout``, scripts/eval_report.py)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)
