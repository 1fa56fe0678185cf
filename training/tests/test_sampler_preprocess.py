"""Reference sampler (Algorithm 2) and image preprocessing."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from energyflow.config import Schedule
from energyflow.preprocess import default_spec, preprocess_image
from energyflow.sampler import centered_reward, sample, step_schedule


def gaussian_energy(mu: float, s0: float, sch: Schedule):
    """Exact energy of N(mu, s0^2) data perturbed to noise level sigma(t)."""

    def fn(a, cond, t):
        sig2 = np.asarray([sch.sigma(float(x)) ** 2 for x in t], np.float64).reshape(-1, 1, 1)
        g = (a.astype(np.float64) - mu) / (s0 ** 2 + sig2)
        e = 0.5 * ((a.astype(np.float64) - mu) ** 2 / (s0 ** 2 + sig2)).sum(axis=(1, 2))
        return g.astype(np.float32), e.astype(np.float32)

    return fn


def test_schedule_values():
    s = Schedule()
    assert s.sigma(0.0) == pytest.approx(0.01) and s.sigma(1.0) == pytest.approx(10.0)
    assert s.dsig2dt(0.5) == pytest.approx(2 * s.sigma(0.5) ** 2 * math.log(1000.0))
    ts, cs = step_schedule(s, 4)
    dt = (1.0 - 1e-3) / 4
    np.testing.assert_allclose(ts, [1.0, 1.0 - dt, 1.0 - 2 * dt, 1.0 - 3 * dt], rtol=1e-7)
    np.testing.assert_allclose(cs[0], dt * 0.5 * s.dsig2dt(1.0), rtol=1e-6)


def test_sampler_follows_probability_flow():
    """With the exact Gaussian score, many Euler steps reproduce the closed-form ODE map."""
    sch = Schedule()
    mu, s0 = 0.7, 0.5
    z = np.random.default_rng(0).standard_normal((4, 16, 2)).astype(np.float32)
    res = sample(gaussian_energy(mu, s0, sch), np.zeros((4, 1), np.float32), z, sch, 2000,
                 action_mean=np.array([1.0, -1.0]), action_std=np.array([2.0, 3.0]),
                 ref_actions=np.zeros((16, 16, 2), np.float32))
    scale = math.sqrt(s0 ** 2 + sch.sigma(sch.gamma) ** 2) / math.sqrt(s0 ** 2 + sch.sigma_max ** 2)
    expect = mu + (sch.sigma_max * z - mu) * scale
    np.testing.assert_allclose(res.actions_std, expect, atol=0.02)
    np.testing.assert_allclose(res.actions, res.actions_std * np.array([2.0, 3.0]) + np.array([1.0, -1.0]),
                               rtol=1e-6, atol=1e-6)
    # centered reward = -(E(a_K) - mean_m E(ref_m)); refs at 0 have energy 0.5*mu^2/(s0^2+sig^2) per element
    e_ref = 0.5 * mu ** 2 / (s0 ** 2 + sch.sigma(sch.gamma) ** 2) * 32
    np.testing.assert_allclose(res.ref_energy_mean, e_ref, rtol=1e-5)
    np.testing.assert_allclose(res.centered_reward, -(res.energy - e_ref), rtol=1e-5)
    r2 = centered_reward(gaussian_energy(mu, s0, sch), res.actions_std, np.zeros((4, 1), np.float32),
                         np.zeros((16, 16, 2), np.float32), sch)
    np.testing.assert_allclose(r2, res.centered_reward, rtol=1e-6)


def test_sampler_step_arithmetic():
    """One step, by hand: a1 = sigma_max*z - c0 * grad(sigma_max*z)."""
    sch = Schedule()
    fn = gaussian_energy(0.0, 1.0, sch)
    z = np.ones((1, 16, 1), np.float32)
    res = sample(fn, np.zeros((1, 1), np.float32), z, sch, 1)
    a0 = np.float32(10.0) * z
    dt = 1.0 - 1e-3
    c = np.float32(dt * 0.5 * sch.dsig2dt(1.0))
    g, _ = fn(a0, None, np.array([1.0], np.float32))
    np.testing.assert_array_equal(res.actions_std, a0 - c * g)


def test_preprocess_matches_definition():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    spec = {"resize": [40, 50], "crop": [32, 36], "channel_order": "RGB",
            "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    out = preprocess_image(img, spec)
    assert out.shape == (3, 32, 36) and out.dtype == np.float32
    x = torch.from_numpy(img).float().permute(2, 0, 1)[None]
    x = F.interpolate(x, size=(40, 50), mode="bilinear", align_corners=False, antialias=False)
    x = x[0, :, 4:36, 7:43] / 255.0
    x = (x - torch.tensor(spec["mean"]).view(3, 1, 1)) / torch.tensor(spec["std"]).view(3, 1, 1)
    np.testing.assert_allclose(out, x.numpy(), rtol=0, atol=1e-6)


def test_preprocess_identity_resize_and_errors():
    img = np.full((8, 8, 3), 255, np.uint8)
    spec = {"resize": [8, 8], "crop": [4, 4], "channel_order": "RGB", "mean": [0, 0, 0], "std": [1, 1, 1]}
    np.testing.assert_allclose(preprocess_image(img, spec), np.ones((3, 4, 4)), atol=1e-7)
    with pytest.raises(ValueError):
        preprocess_image(img.astype(np.float32), spec)
    with pytest.raises(ValueError):
        preprocess_image(img[:, :, :2], spec)
    assert default_spec()["resize"] == [104, 104] and default_spec()["crop"] == [96, 96]
