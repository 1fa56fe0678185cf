"""Warm starts in the reference sampler (the Go engines.SampleWarm)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from energyflow.config import Schedule
from energyflow.sampler import Warm, sample, warm_schedule, step_schedule


def quad_fn(mu: np.ndarray):
    """E = 1/2 (1 + t) |a - mu|^2 per row: an analytic energy."""

    def fn(a: np.ndarray, cond: np.ndarray, t: np.ndarray):
        s = (1.0 + t.astype(np.float32))[:, None, None]
        d = a - mu
        return (s * d).astype(np.float32), (0.5 * s[:, 0, 0] * (d * d).sum(axis=(1, 2))).astype(np.float32)

    return fn

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
