"""The Diffusion Policy baseline's reference DDIM sampler (numpy, no torch).

What the Go runtime is checked against for ``policy: diffusion`` bundles
(docs/bundle.md, "DDIM sampler"), as :mod:`energyflow.sampler` is for
EnergyFlow's Algorithm 2: diffusers ``DDIMScheduler`` with eta=0,
``timestep_spacing="leading"``, ``set_alpha_to_one=True``, ``steps_offset=0``
and the clipped x0 fed back into eps (diffusers' ``use_clipped_model_output``).
The noise network is pluggable: :class:`OrtEps` runs a bundle's ``eps.onnx``;
:class:`energyflow.diffusion.TorchEps` a torch NoiseUNet.

Arithmetic convention (what the Go side reproduces): the per-step scalars
sqrt(ab_t), sqrt(1-ab_t), sqrt(ab_prev), sqrt(1-ab_prev) are computed in
float64 from the float64 ``alphas_cumprod`` and rounded to float32; all tensor
arithmetic is float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Tuple

import numpy as np

from .bundle import read_manifest
from .graphs import ort_session

DDIM_STEPS = 20


class EpsFn(Protocol):
    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        """eps [B,T_p,D_a] for float32 a [B,T_p,D_a], cond [B,C], t [B] (integer timesteps as float32)."""


class OrtEps:
    """A bundle's ``eps.onnx`` in ONNX Runtime (CPU)."""

    def __init__(self, path: str | Path, threads: int = 1) -> None:
        self.sess = ort_session(path, threads=threads, inter_threads=1)

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        (eps,) = self.sess.run(["eps"], {"a_t": np.ascontiguousarray(a, np.float32),
                                         "cond": np.ascontiguousarray(cond, np.float32),
                                         "t": np.ascontiguousarray(t, np.float32)})
        return eps


def ddim_timesteps(num_timesteps: int, steps: int) -> np.ndarray:
    """Leading spacing, steps_offset 0: (arange(S) * (N // S)) reversed, int64 [S]."""
    if not 1 <= steps <= num_timesteps:
        raise ValueError(f"DDIM steps must be in 1..{num_timesteps}, got {steps}")
    return (np.arange(steps, dtype=np.int64) * (num_timesteps // steps))[::-1].copy()


def ddim_coefficients(alphas_cumprod: np.ndarray, steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """Timesteps [S] and float32 per-step scalars [S, 4] (see :func:`ddim_sample`).

    Columns: sqrt(ab_t), sqrt(1-ab_t), sqrt(ab_prev), sqrt(1-ab_prev), each
    computed in float64 and rounded to float32; ab_prev = alphas_cumprod[t - N//S]
    or 1.0 when that index is negative (set_alpha_to_one).
    """
    ac = np.asarray(alphas_cumprod, np.float64)
    ts = ddim_timesteps(len(ac), steps)
    ratio = len(ac) // steps
    rows = []
    for t in ts:
        ab = float(ac[t])
        ab_prev = float(ac[t - ratio]) if t - ratio >= 0 else 1.0
        rows.append([math.sqrt(ab), math.sqrt(1.0 - ab), math.sqrt(ab_prev), math.sqrt(1.0 - ab_prev)])
    return ts, np.asarray(rows, np.float64).astype(np.float32)


@dataclass
class DDIMResult:
    actions: np.ndarray          # [B,T_p,D_a] un-standardized
    actions_std: np.ndarray      # [B,T_p,D_a] standardized (network space)


def ddim_sample(fn: EpsFn, cond: np.ndarray, noise: np.ndarray, alphas_cumprod: np.ndarray,
                steps: int = DDIM_STEPS, clip_sample: float = 0.0, action_mean: Optional[np.ndarray] = None,
                action_std: Optional[np.ndarray] = None) -> DDIMResult:
    """Deterministic DDIM (eta = 0) from x = z ~ N(0, I).

    ::

        for t in timesteps:                        # e.g. 95, 90, ..., 0 for N=100, S=20
            eps = eps_net(x, cond, t)
            x0  = (x - sqrt(1-ab_t) * eps) / sqrt(ab_t)
            if clip_sample > 0:
                x0  = clip(x0, -clip_sample, clip_sample)
                eps = (x - sqrt(ab_t) * x0) / sqrt(1-ab_t)     # skipped if sqrt(1-ab_t) == 0
            x = sqrt(ab_prev) * x0 + sqrt(1-ab_prev) * eps
        actions = x * std + mean

    The scalars come from :func:`ddim_coefficients` (float64, rounded to
    float32); ``x``, ``eps`` and ``x0`` are float32 and every operation is
    float32, in the order written (docs/bundle.md, "DDIM sampler").
    """
    cond = np.asarray(cond, np.float32)
    x = np.asarray(noise, np.float32).copy()
    B = x.shape[0]
    ts, co = ddim_coefficients(alphas_cumprod, steps)
    clip = np.float32(clip_sample)
    for t, (sa, sb, sp, sq) in zip(ts, co):
        eps = np.asarray(fn(x, cond, np.full((B,), np.float32(t), np.float32)), np.float32)
        x0 = ((x - sb * eps) / sa).astype(np.float32)
        if clip > 0:
            x0 = np.clip(x0, -clip, clip).astype(np.float32)
            if sb > 0:  # ab_t = 1 would give 0/0; eps is then multiplied by sqrt(1-ab_prev) = 0 anyway
                eps = ((x - sa * x0) / sb).astype(np.float32)
        x = (sp * x0 + sq * eps).astype(np.float32)
    if action_mean is not None and action_std is not None:
        actions = (x * np.asarray(action_std, np.float32) + np.asarray(action_mean, np.float32)).astype(np.float32)
    else:
        actions = x.copy()
    return DDIMResult(actions=actions, actions_std=x)


def sample_diffusion_bundle(bundle_dir: str | Path, cond: np.ndarray, noise: np.ndarray,
                            steps: Optional[int] = None, threads: int = 1) -> DDIMResult:
    """Run the reference DDIM sampler on a diffusion bundle with ONNX Runtime."""
    man = read_manifest(bundle_dir)
    if man.get("policy") != "diffusion":
        raise ValueError(f"{bundle_dir}: policy {man.get('policy')!r} is not a diffusion bundle")
    sch = man["schedule"]
    fn = OrtEps(Path(bundle_dir) / man["graphs"]["eps"]["file"], threads=threads)
    return ddim_sample(fn, cond, noise, np.asarray(sch["alphas_cumprod"], np.float64),
                       steps or man["sampler"]["steps"], sch["clip_sample"],
                       np.asarray(man["action_norm"]["mean"], np.float32),
                       np.asarray(man["action_norm"]["std"], np.float32))
