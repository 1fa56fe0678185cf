"""Real-time chunking and warm starts in the reference sampler (the Go engines.Guide and
engines.SampleWarm)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from energyflow.config import Schedule
from energyflow.sampler import Guide, Warm, chunk_weights, sample, step_schedule, warm_schedule


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


# Warm starts

SCH = Schedule(sigma_min=0.01, sigma_max=10.0, T=1.0, gamma=0.001)
MEAN = np.array([0.5, -1.0], np.float32)
STD = np.array([2.0, 0.5], np.float32)


def test_warm_schedule_at_sigma_max_is_the_cold_one() -> None:
    ts, cs = warm_schedule(SCH, SCH.sigma_max, 10)
    ts0, cs0 = step_schedule(SCH, 10)
    assert np.array_equal(ts, ts0) and np.array_equal(cs, cs0)


def test_warm_at_sigma_max_from_the_mean_is_the_cold_sample() -> None:
    rng = np.random.default_rng(0)
    mu = rng.standard_normal((1, 4, 2)).astype(np.float32)
    z = rng.standard_normal((1, 4, 2)).astype(np.float32)
    cond = np.zeros((1, 3), np.float32)
    cold = sample(quad_fn(mu), cond, z, SCH, 10, MEAN, STD)
    warm = sample(quad_fn(mu), cond, z, SCH, 0, MEAN, STD,
                  warm=Warm(actions=np.broadcast_to(MEAN, (4, 2)), sigma=SCH.sigma_max, steps=10))
    assert np.array_equal(cold.actions, warm.actions)


@pytest.mark.parametrize("sigma,steps", [(1.0, 4), (0.3, 2)])
def test_warm_matches_float64(sigma: float, steps: int) -> None:
    rng = np.random.default_rng(1)
    mu = rng.standard_normal((1, 4, 2))
    z = rng.standard_normal((1, 4, 2))
    plan = rng.standard_normal((4, 2))
    got = sample(quad_fn(mu.astype(np.float32)), np.zeros((1, 3), np.float32), z, SCH, 0, MEAN, STD,
                 warm=Warm(actions=plan, sigma=sigma, steps=steps))
    a = (plan - MEAN) / STD + sigma * z
    start = SCH.T * math.log(sigma / SCH.sigma_min) / math.log(SCH.sigma_max / SCH.sigma_min)
    dt = (start - SCH.gamma) / steps
    for k in range(steps):
        t = start - k * dt
        a = a - dt * 0.5 * SCH.dsig2dt(t) * (1 + t) * (a - mu)
    np.testing.assert_allclose(got.actions, a * STD + MEAN, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sigma,steps", [(20.0, 3), (SCH.sigma(SCH.gamma), 3), (1.0, 0)])
def test_warm_refusals(sigma: float, steps: int) -> None:
    with pytest.raises(ValueError, match="warm-start"):
        warm_schedule(SCH, sigma, steps)
