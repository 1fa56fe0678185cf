"""Reference sampler (paper Algorithm 2) and centered shaping reward.

This is the ground truth the Go runtime is checked against (docs/bundle.md):

```
sigma(t)   = sigma_min^(1-t/T) * sigma_max^(t/T)
dsig2dt(t) = 2 * sigma(t)^2 * ln(sigma_max/sigma_min) / T
a_0 = sigma_max * z
dt = (T - gamma) / K
for k in 0..K-1: t_k = T - k*dt;  a = a - dt * 0.5 * dsig2dt(t_k) * grad_a(a, cond, t_k)
energy = E(a, cond, gamma)
actions = a * action_norm.std + action_norm.mean
centered_reward = -(energy - mean_m E(ref_m, cond, gamma))
```

Arithmetic convention (what the Go side reproduces): the schedule scalars
``t_k`` and ``c_k = dt * 0.5 * dsig2dt(t_k)`` are computed in float64 and then
rounded to float32; ``a`` is float32 and updated as ``a - float32(c_k) * grad``
in float32; ``a_0 = float32(sigma_max) * z`` in float32.

Real-time chunking (:class:`Guide`, the Go ``engines.Guide``): the sampler
descends ``E + 1/2 (strength/sigma^2) sum_j W_j |x_j - c_j|^2`` with x the noisy
actions ("noisy") or the denoised estimate a - sigma^2 grad ("denoised").
With ``kappa = dt ln(sigma_max/sigma_min)/T`` (= c_k / sigma_k^2) and
``p = float32(kappa) * float32(strength) * W_j`` in float32, one step reads::

    denoised: a = (a - c_k*grad) - p*((a - float32(sigma_k^2)*grad) - c)
    noisy:    a = ((a - c_k*grad) + p*c) / (1 + p)

The energy-gradient function is pluggable: :class:`OrtEnergyGrad` runs a
bundle's ``energy_grad.onnx`` in ONNX Runtime (what the fixtures use) and
:class:`TorchEnergyGrad` runs a torch :class:`~energyflow.model.EnergyUNet`
through autograd.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Tuple

import numpy as np

from .bundle import read_manifest
from .config import Schedule
from .graphs import ort_session


class EnergyGradFn(Protocol):
    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(grad_a [B,T_p,D_a], energy [B]) for float32 inputs a [B,T_p,D_a], cond [B,C], t [B]."""


class OrtEnergyGrad:
    """``energy_grad.onnx`` in ONNX Runtime (CPU)."""

    def __init__(self, path: str | Path, threads: int = 1) -> None:
        self.sess = ort_session(path, threads=threads, inter_threads=1)

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        g, e = self.sess.run(["grad_a", "energy"], {"a_t": np.ascontiguousarray(a, np.float32),
                                                     "cond": np.ascontiguousarray(cond, np.float32),
                                                     "t": np.ascontiguousarray(t, np.float32)})
        return g, e


class TorchEnergyGrad:
    """A torch :class:`EnergyUNet` through autograd (or its hand-written VJP)."""

    def __init__(self, model, use_vjp: bool = False) -> None:
        import torch  # heavy (~2 s, ~1 GB): the ONNX Runtime sampler (rollouts, calibration) runs without it

        self.torch = torch
        self.model = model.eval()
        self.use_vjp = use_vjp
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        at = torch.as_tensor(a, dtype=self.dtype, device=self.device)
        ct = torch.as_tensor(cond, dtype=self.dtype, device=self.device)
        tt = torch.as_tensor(t, dtype=self.dtype, device=self.device)
        if self.use_vjp:
            with torch.no_grad():
                g, e = self.model.energy_and_grad(at, ct, tt)
        else:
            s, e = self.model.score(at, ct, tt)
            g = -s
        return (g.detach().cpu().numpy().astype(np.float32), e.detach().cpu().numpy().astype(np.float32))


def step_schedule(schedule: Schedule, steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """float32 times t_k and step coefficients c_k = dt*0.5*dsig2dt(t_k), k = 0..K-1."""
    dt = (schedule.T - schedule.gamma) / steps
    ts = [schedule.T - k * dt for k in range(steps)]
    cs = [dt * 0.5 * schedule.dsig2dt(t) for t in ts]
    return np.asarray(ts, np.float32), np.asarray(cs, np.float32)


@dataclass
class Guide:
    """Real-time chunking's constraint (docs/engines.md): ``actions`` [T_p,D_a]
    un-standardized committed actions, ``weights`` [T_p] in [0, 1], ``mode``
    "noisy" or "denoised", ``strength`` finite above 0 (at most 1 denoised)."""

    mode: str
    strength: float
    actions: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        if self.mode not in ("noisy", "denoised"):
            raise ValueError(f"guide mode {self.mode!r}: want noisy or denoised")
        if not (0.0 < self.strength < math.inf) or (self.mode == "denoised" and self.strength > 1):
            raise ValueError(f"guide strength {self.strength}: want a finite value above 0, at most 1 with denoised")
        w = np.asarray(self.weights, np.float32)
        if not np.all((w >= 0) & (w <= 1)):
            raise ValueError("guide weights: want finite values in [0, 1]")


@dataclass
class Warm:
    """A warm start (Go ``engines.Warm``): ``actions`` [T_p,D_a] un-standardized
    (the committed plan shifted to the new observation), noised to ``sigma``
    (above sigma(gamma), at most sigma_max), then ``steps`` Euler steps to gamma."""

    actions: np.ndarray
    sigma: float
    steps: int


def warm_schedule(schedule: Schedule, sigma: float, steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """float32 t_k and c_k of ``steps`` Euler steps from the time where sigma(t) = ``sigma``
    down to gamma (Go ``Schedule.WarmSteps``); at sigma_max, ``step_schedule``'s."""
    lo = schedule.sigma(schedule.gamma)
    if not (lo < sigma <= schedule.sigma_max):
        raise ValueError(f"warm-start sigma {sigma}: want above sigma(gamma) = {lo:.4g}, at most sigma_max = {schedule.sigma_max}")
    if steps < 1:
        raise ValueError(f"warm-start steps {steps}: want at least 1")
    start = schedule.T
    if sigma < schedule.sigma_max:
        start = schedule.T * math.log(sigma / schedule.sigma_min) / math.log(schedule.sigma_max / schedule.sigma_min)
    dt = (start - schedule.gamma) / steps
    ts = [start - float(k * dt) for k in range(steps)]
    return (np.asarray(ts, np.float32),
            np.asarray([dt * 0.5 * schedule.dsig2dt(t) for t in ts], np.float32))


def chunk_weights(pred_horizon: int, start: int, delay: int, overlap: int) -> np.ndarray:
    """RTC's mask (Go ``engines.ChunkWeights``): 1 on the first ``delay`` of the
    ``overlap`` committed actions from prediction index ``start``, then
    c (e^c - 1)/(e - 1) with c = (overlap - i)/(overlap - delay + 1), else 0."""
    w = np.zeros(pred_horizon, np.float32)
    overlap = max(0, min(overlap, pred_horizon - start))
    delay = max(0, min(delay, overlap))
    for i in range(overlap):
        if i < delay:
            w[start + i] = 1.0
        else:
            c = (overlap - i) / (overlap - delay + 1)
            w[start + i] = np.float32(c * math.expm1(c) / (math.e - 1))
    return w


def step_sigma2(schedule: Schedule, steps: int) -> np.ndarray:
    """float32 sigma(t_k)^2, k = 0..K-1 (the guide's denoised estimate)."""
    dt = (schedule.T - schedule.gamma) / steps
    return np.asarray([schedule.sigma(schedule.T - k * dt) ** 2 for k in range(steps)], np.float32)


@dataclass
class SampleResult:
    actions: np.ndarray          # [B,T_p,D_a] un-standardized
    actions_std: np.ndarray      # [B,T_p,D_a] standardized (network space)
    energy: np.ndarray           # [B]
    ref_energy_mean: Optional[np.ndarray] = None   # [B]
    centered_reward: Optional[np.ndarray] = None   # [B]


def reference_energy_mean(fn: EnergyGradFn, cond: np.ndarray, ref_actions: np.ndarray,
                          schedule: Schedule) -> np.ndarray:
    """mean_m E(ref_m, cond, gamma) for each row of ``cond`` (float64 mean of float32 energies)."""
    B = cond.shape[0]
    M = ref_actions.shape[0]
    a = np.broadcast_to(ref_actions[None], (B,) + ref_actions.shape).reshape((B * M,) + ref_actions.shape[1:])
    c = np.repeat(cond, M, axis=0)
    t = np.full((B * M,), schedule.gamma, np.float32)
    _, e = fn(a.astype(np.float32), c.astype(np.float32), t)
    return e.reshape(B, M).astype(np.float64).mean(axis=1)


def centered_reward(fn: EnergyGradFn, actions_std: np.ndarray, cond: np.ndarray, ref_actions: np.ndarray,
                    schedule: Schedule) -> np.ndarray:
    """Paper eq. (centered shaping): -(E(a, s, gamma) - mean_m E(ref_m, s, gamma)) for given
    standardized action chunks ``actions_std`` [B,T_p,D_a] (not necessarily sampled)."""
    a = np.asarray(actions_std, np.float32)
    cond = np.asarray(cond, np.float32)
    _, e = fn(a, cond, np.full((a.shape[0],), np.float32(schedule.gamma), np.float32))
    return -(e.astype(np.float64) - reference_energy_mean(fn, cond, np.asarray(ref_actions, np.float32), schedule))


def sample(fn: EnergyGradFn, cond: np.ndarray, noise: np.ndarray, schedule: Schedule, steps: int,
           action_mean: Optional[np.ndarray] = None, action_std: Optional[np.ndarray] = None,
           ref_actions: Optional[np.ndarray] = None, guide: Optional[Guide] = None,
           warm: Optional[Warm] = None) -> SampleResult:
    """Algorithm 2. ``cond`` [B,C], ``noise`` z [B,T_p,D_a] standard normal; with
    ``guide`` (needs the action norm), real-time chunking on every row; with ``warm``
    (needs the action norm; ``steps`` is then ignored), from the warm start."""
    cond = np.asarray(cond, np.float32)
    a = np.float32(schedule.sigma_max) * np.asarray(noise, np.float32)
    B = a.shape[0]
    if warm is None:
        ts, cs = step_schedule(schedule, steps)
    else:
        if guide is not None or action_mean is None or action_std is None:
            raise ValueError("a warm start needs the action norm and no guide")
        ts, cs = warm_schedule(schedule, warm.sigma, warm.steps)
        steps = warm.steps
        x0 = ((np.asarray(warm.actions, np.float32) - np.asarray(action_mean, np.float32))
              / np.asarray(action_std, np.float32)).astype(np.float32)
        a = (x0 + np.float32(warm.sigma) * np.asarray(noise, np.float32)).astype(np.float32)
    s2 = step_sigma2(schedule, steps)
    if guide is not None:
        if action_mean is None or action_std is None:
            raise ValueError("a guide needs the action norm (action_mean, action_std)")
        c = ((np.asarray(guide.actions, np.float32) - np.asarray(action_mean, np.float32))
             / np.asarray(action_std, np.float32)).astype(np.float32)
        dt = (schedule.T - schedule.gamma) / steps
        kappa = np.float32(dt * math.log(schedule.sigma_max / schedule.sigma_min) / schedule.T)
        p = ((kappa * np.float32(guide.strength)) * np.asarray(guide.weights, np.float32))[:, None]
        p = np.broadcast_to(p, c.shape).astype(np.float32)
        c = np.where(p > 0, c, np.float32(0)).astype(np.float32)
    for k in range(steps):
        g, _ = fn(a, cond, np.full((B,), ts[k], np.float32))
        g = g.astype(np.float32)
        if guide is None:
            a = (a - cs[k] * g).astype(np.float32)
            continue
        step = (a - cs[k] * g).astype(np.float32)
        if guide.mode == "denoised":
            r = ((a - s2[k] * g).astype(np.float32) - c).astype(np.float32)
            held = (step - p * r).astype(np.float32)
        else:
            held = ((step + p * c).astype(np.float32) / (np.float32(1) + p)).astype(np.float32)
        a = np.where(p > 0, held, step).astype(np.float32)
    _, energy = fn(a, cond, np.full((B,), np.float32(schedule.gamma), np.float32))
    energy = energy.astype(np.float32)
    if action_mean is not None and action_std is not None:
        actions = (a * np.asarray(action_std, np.float32) + np.asarray(action_mean, np.float32)).astype(np.float32)
    else:
        actions = a.copy()
    res = SampleResult(actions=actions, actions_std=a, energy=energy)
    if ref_actions is not None:
        ref_mean = reference_energy_mean(fn, cond, np.asarray(ref_actions, np.float32), schedule)
        res.ref_energy_mean = ref_mean
        res.centered_reward = -(energy.astype(np.float64) - ref_mean)
    return res


def sample_bundle(bundle_dir: str | Path, cond: np.ndarray, noise: np.ndarray, steps: Optional[int] = None,
                  threads: int = 1, guide: Optional[Guide] = None) -> SampleResult:
    """Run Algorithm 2 on a bundle directory with ONNX Runtime."""
    man = read_manifest(bundle_dir)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    fn = OrtEnergyGrad(Path(bundle_dir) / man["graphs"]["energy_grad"]["file"], threads=threads)
    return sample(fn, cond, noise, sch, steps or man["sampler"]["steps"],
                  np.asarray(man["action_norm"]["mean"], np.float32), np.asarray(man["action_norm"]["std"], np.float32),
                  np.asarray(man["reference_actions"], np.float32), guide=guide)
