"""Denoising score matching loss (paper Algorithm 1 / Eq. dsm_loss_method) and its noise levels.

Noise levels: t ~ U[0, T] on the geometric schedule (Algorithm 1,
:func:`sample_t_uniform`) or EDM's log-normal law, ln sigma ~ N(mean, std^2)
clipped to [sigma_min, sigma_max] and mapped back to t for the network
(:func:`sample_t_lognormal`). Weighting: lambda = sigma^2 (Algorithm 1) or
EDM's lambda(sigma) = (sigma^2 + 1)/sigma^2 on the denoiser error, which is
(sigma^2 + 1) |sigma (-dE/da) + eps|^2 here (``weighting="edm"``).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from .config import LOSS_WEIGHTINGS, Schedule


def sigma_t(t: torch.Tensor, s: Schedule) -> torch.Tensor:
    """sigma(t) = sigma_min^(1-t/T) sigma_max^(t/T), elementwise."""
    return s.sigma_min * torch.exp(t * (math.log(s.sigma_max / s.sigma_min) / s.T))


def t_of_sigma(sigma: torch.Tensor, s: Schedule) -> torch.Tensor:
    """The inverse of :func:`sigma_t`: t = T ln(sigma/sigma_min) / ln(sigma_max/sigma_min)."""
    return s.T * torch.log(sigma / s.sigma_min) / math.log(s.sigma_max / s.sigma_min)


def sample_t_uniform(batch: int, s: Schedule, generator: Optional[torch.Generator] = None,
                     device: Optional[torch.device] = None) -> torch.Tensor:
    """t ~ U[0, T] (Algorithm 1)."""
    return torch.rand(batch, generator=generator, device=device) * s.T


def sample_t_lognormal(batch: int, s: Schedule, mean: float, std: float,
                       generator: Optional[torch.Generator] = None,
                       device: Optional[torch.device] = None) -> torch.Tensor:
    """t of sigma with ln sigma ~ N(mean, std^2) clipped to [ln sigma_min, ln sigma_max] (EDM's law).

    Clipping in ln sigma keeps t exactly in [0, T]; the clipped mass sits at the
    schedule's ends (for mean -0.5, std 1.2: ~1 % at sigma_max, ~0.03 % at sigma_min).
    """
    lo, hi = math.log(s.sigma_min), math.log(s.sigma_max)
    ln_sig = (mean + std * torch.randn(batch, generator=generator, device=device)).clamp(lo, hi)
    return s.T * (ln_sig - lo) / (hi - lo)


def dsm_loss(model, a0: torch.Tensor, cond: torch.Tensor, schedule: Schedule,
             t: Optional[torch.Tensor] = None, eps: Optional[torch.Tensor] = None,
             generator: Optional[torch.Generator] = None, weighting: str = "sigma2",
             target: Optional[torch.Tensor] = None) -> torch.Tensor:
    """w(sigma) * sigma(t)^2 * || -dE/da_t + eps/sigma(t) ||^2 averaged over batch and elements.

    ``a0`` [B,T_p,D_a] standardized clean actions, ``cond`` [B,C]. The score is
    obtained by autograd with ``create_graph=True`` so the loss can be
    back-propagated into the energy network's parameters. ``weighting``:
    ``sigma2`` (w = 1, Algorithm 1) or ``edm`` (w = sigma^2 + 1: EDM's
    lambda(sigma) = (sigma^2+1)/sigma^2 on |D - a0|^2 = sigma^2 |sigma S + eps|^2,
    D = a_t + sigma^2 S).

    Note the sign: with a_t = a0 + sigma*eps the target score is -eps/sigma, and
    the paper writes the residual as S + eps/sigma with S = -dE/da.

    ``target`` replaces ``eps`` in the residual (not in a_t): a teacher's
    estimate of the noise at a_t (:mod:`energyflow.distill`).
    """
    if weighting not in LOSS_WEIGHTINGS:
        raise ValueError(f"unknown loss weighting {weighting!r}: want one of {', '.join(LOSS_WEIGHTINGS)}")
    B = a0.shape[0]
    if t is None:
        t = torch.rand(B, device=a0.device, dtype=a0.dtype, generator=generator) * schedule.T
    if eps is None:
        eps = torch.randn(a0.shape, device=a0.device, dtype=a0.dtype, generator=generator)
    sig = sigma_t(t, schedule).reshape(B, 1, 1)
    a_t = (a0 + sig * eps).detach().requires_grad_(True)
    e = model(a_t, cond, t)
    (dE,) = torch.autograd.grad(e.sum(), a_t, create_graph=True)
    score = -dE
    resid = sig * score + (eps if target is None else target)   # = sigma * (S + eps/sigma)
    # mean over elements (as Diffusion Policy's mse); equals the paper's squared
    # norm divided by T_p*D_a, which only rescales the loss.
    sq = resid.pow(2)
    if weighting == "edm":
        sq = (sig * sig + 1.0) * sq
    return sq.mean()
