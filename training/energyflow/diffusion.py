"""Diffusion Policy baseline (policy kind ``"diffusion"``, docs/bundle.md): its torch side.

The paper compares EnergyFlow with Diffusion Policy (DP) "on the same 1D U-Net
backbone with the standard vector head (noise prediction, 100 training steps,
DDIM with 20 steps at inference)". This module holds the network and loss of
that baseline; data, windows, normalisation, optimiser, EMA, checkpoints and
bundle plumbing are shared with EnergyFlow.

* :class:`NoiseUNet` - :class:`~energyflow.model.UNetBackbone` plus DP's vector
  head ``Conv1d(down_dims[0], D_a, 1)``: eps(a_k, cond, k) [B, T_p, D_a]. The
  timestep ``k`` (an integer 0..N-1, passed as float32 [B]) is embedded
  directly (time scale 1, ``cfg.time_scale`` is ignored).
* :func:`ddpm_loss` - MSE(eps_pred, eps), k ~ U{0..N-1},
  x_k = sqrt(ab_k) a0 + sqrt(1 - ab_k) eps.
* :class:`TorchEps` - a NoiseUNet behind the reference sampler's interface.

The DDPM schedule (diffusers ``DDPMScheduler(num_train_timesteps=100,
beta_schedule="squaredcos_cap_v2")``: :func:`betas_for_alpha_bar`,
:func:`ddpm_alphas_cumprod`, float64, and the manifest's ``schedule`` block)
lives in :mod:`energyflow.config`; the reference DDIM sampler the Go runtime
is checked against (numpy, ONNX Runtime, no torch) in :mod:`energyflow.ddim`.
Both are re-exported here under their old names.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np
import torch
import torch.nn as nn

from .config import (BETA_SCHEDULE, NUM_TRAIN_TIMESTEPS, PREDICTION_TYPE, ModelConfig, betas_for_alpha_bar,
                     ddpm_alphas_cumprod, schedule_manifest)
from .ddim import (DDIM_STEPS, DDIMResult, EpsFn, OrtEps, ddim_coefficients, ddim_sample, ddim_timesteps,
                   sample_diffusion_bundle)
from .model import UNetBackbone

Tensor = torch.Tensor

#: clip_sample is the data range rounded up to a multiple of this
CLIP_QUANTUM = 0.5


def clip_sample_range(actions_std: np.ndarray, quantum: float = CLIP_QUANTUM) -> float:
    """max |standardized action| rounded up to a multiple of ``quantum`` (the DDIM x0 clip)."""
    a = np.asarray(actions_std, np.float64)
    if a.size == 0:
        return 0.0
    m = float(np.max(np.abs(a)))
    return float(math.ceil(m / quantum - 1e-9) * quantum) if m > 0 else 0.0


# ---------------------------------------------------------------------------
# network
# ---------------------------------------------------------------------------
class NoiseUNet(UNetBackbone):
    """Diffusion Policy's noise-prediction network on the shared U-Net backbone.

    Inputs: ``a`` [B, T_p, D_a] (noisy standardized actions), ``cond``
    [B, cond_dim], ``t`` [B] float32 holding the integer timestep k.
    Output: eps [B, T_p, D_a]. ``self.cfg`` always says ``policy="diffusion"``
    (the bundle writer picks the graph from it).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        if cfg.policy != "diffusion":
            cfg = dataclasses.replace(cfg, policy="diffusion")
        super().__init__(cfg)
        self.final_conv = nn.Conv1d(cfg.down_dims[0], cfg.action_dim, 1)

    def time_input(self, t: Tensor) -> Tensor:
        """DP embeds the integer timestep itself (time scale 1)."""
        return t

    def forward(self, a: Tensor, cond: Tensor, t: Tensor, plain: bool = False) -> Tensor:
        """eps [B, T_p, D_a]; ``plain=True`` uses only export-friendly operators (same values)."""
        g = self.global_cond(cond, t)
        x = self.features(a, g, plain=plain)
        return self.final_conv(x).transpose(1, 2)


def sample_timesteps(batch: int, generator: Optional[torch.Generator] = None, device: Any = None,
                     num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Tensor:
    """k ~ U{0..N-1} as float32 [B] (the network's ``t`` input)."""
    return torch.randint(0, num_timesteps, (batch,), generator=generator, device=device).to(torch.float32)


def ddpm_loss(model: nn.Module, a0: Tensor, cond: Tensor, k: Optional[Tensor] = None, eps: Optional[Tensor] = None,
              generator: Optional[torch.Generator] = None, num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Tensor:
    """MSE(eps_pred, eps) averaged over batch and elements (DP's epsilon objective).

    ``a0`` [B,T_p,D_a] standardized clean actions, ``cond`` [B,C], ``k`` [B]
    integer timesteps (any dtype; default U{0..N-1}), ``eps`` standard normal.
    x_k = sqrt(ab_k) a0 + sqrt(1 - ab_k) eps with the float64 schedule.
    """
    B = a0.shape[0]
    if k is None:
        k = sample_timesteps(B, generator, a0.device, num_timesteps)
    if eps is None:
        eps = torch.randn(a0.shape, device=a0.device, dtype=a0.dtype, generator=generator)
    ab = torch.as_tensor(ddpm_alphas_cumprod(num_timesteps), device=a0.device)[k.long()]
    sa = torch.sqrt(ab).to(a0.dtype).reshape(B, 1, 1)
    sb = torch.sqrt(1.0 - ab).to(a0.dtype).reshape(B, 1, 1)
    x = sa * a0 + sb * eps
    pred = model(x, cond, k.to(a0.dtype))
    return (pred - eps).pow(2).mean()


# ---------------------------------------------------------------------------
# the reference sampler's interface on a torch NoiseUNet
# ---------------------------------------------------------------------------
class TorchEps:
    """A torch :class:`NoiseUNet` (no grad)."""

    def __init__(self, model: NoiseUNet) -> None:
        self.model = model.eval()
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            e = self.model(torch.as_tensor(a, dtype=self.dtype, device=self.device),
                           torch.as_tensor(cond, dtype=self.dtype, device=self.device),
                           torch.as_tensor(t, dtype=self.dtype, device=self.device))
        return e.cpu().numpy().astype(np.float32)


__all__ = ["BETA_SCHEDULE", "CLIP_QUANTUM", "DDIM_STEPS", "DDIMResult", "EpsFn", "NUM_TRAIN_TIMESTEPS", "NoiseUNet",
           "OrtEps", "PREDICTION_TYPE", "TorchEps", "betas_for_alpha_bar", "clip_sample_range", "ddim_coefficients",
           "ddim_sample", "ddim_timesteps", "ddpm_alphas_cumprod", "ddpm_loss", "sample_diffusion_bundle",
           "sample_timesteps", "schedule_manifest"]
