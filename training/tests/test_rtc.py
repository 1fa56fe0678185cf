"""Real-time chunking in the reference sampler (the Go engines.Guide)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from energyflow.config import Schedule
from energyflow.sampler import Guide, chunk_weights, sample


def quad_fn(mu: np.ndarray):
    """E = 1/2 (1 + t) |a - mu|^2 per row: an analytic energy."""

    def fn(a: np.ndarray, cond: np.ndarray, t: np.ndarray):
        s = (1.0 + t.astype(np.float32))[:, None, None]
        d = a - mu
        return (s * d).astype(np.float32), (0.5 * s[:, 0, 0] * (d * d).sum(axis=(1, 2))).astype(np.float32)

    return fn


@pytest.mark.parametrize("tp,start,delay,overlap,want", [
    (6, 1, 2, 4, [0, 1, 1, None, None, 0]),
    (4, 1, 9, 2, [0, 1, 1, 0]),
    (4, 2, 1, 10, [0, 0, 1, None]),
    (4, 1, 2, 0, [0, 0, 0, 0]),
])
def test_chunk_weights(tp: int, start: int, delay: int, overlap: int, want: list) -> None:
    w = chunk_weights(tp, start, delay, overlap)
    assert w.dtype == np.float32 and w.shape == (tp,)
    ov = max(0, min(overlap, tp - start))
    d = min(delay, ov)
    for j, x in enumerate(want):
        if x is None:
            c = (ov - (j - start)) / (ov - d + 1)
            x = c * math.expm1(c) / (math.e - 1)
        assert w[j] == pytest.approx(x, abs=1e-7)


@pytest.mark.parametrize("mode,strength", [("noisy", 50.0), ("denoised", 1.0)])
def test_guide_holds_actions_on_the_committed_ones(mode: str, strength: float) -> None:
    tp, da = 4, 2
    mu = np.zeros((1, tp, da), np.float32)
    committed = np.full((tp, da), 2.0, np.float32)
    weights = np.array([1, 1, 0.5, 0], np.float32)
    z = np.random.default_rng(0).normal(size=(1, tp, da)).astype(np.float32)
    sch = Schedule()
    mean, std = np.zeros(da, np.float32), np.ones(da, np.float32)
    free = sample(quad_fn(mu), np.zeros((1, 1), np.float32), z, sch, 10, mean, std)
    res = sample(quad_fn(mu), np.zeros((1, 1), np.float32), z, sch, 10, mean, std,
                 guide=Guide(mode=mode, strength=strength, actions=committed, weights=weights))
    assert np.allclose(res.actions[0, :2], 2.0, atol=0.05)          # held
    assert np.all(np.abs(res.actions[0, 2] - 2) < np.abs(free.actions[0, 2] - 2))  # pulled part way
    assert np.allclose(res.actions[0, 3], free.actions[0, 3], atol=0.2)  # free: near the energy's minimum


@pytest.mark.parametrize("kw,msg", [
    ({"mode": "on"}, "mode"),
    ({"strength": 0.0}, "strength"),
    ({"strength": float("inf")}, "strength"),
    ({"mode": "denoised", "strength": 1.5}, "strength"),
    ({"weights": np.array([1, -0.5, 0, 0], np.float32)}, "weights"),
    ({"weights": np.array([1, np.nan, 0, 0], np.float32)}, "weights"),
])
def test_guide_refuses_bad_input(kw: dict, msg: str) -> None:
    args = {"mode": "noisy", "strength": 1.0, "actions": np.zeros((4, 2), np.float32),
            "weights": np.array([1, 1, 0, 0], np.float32)}
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        Guide(**args)
