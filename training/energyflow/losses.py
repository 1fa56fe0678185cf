"""Denoising score matching loss (paper Algorithm 1 / Eq. dsm_loss_method)."""
from __future__ import annotations

import math
from typing import Optional

import torch

from .config import Schedule


def sigma_t(t: torch.Tensor, s: Schedule) -> torch.Tensor:
    """sigma(t) = sigma_min^(1-t/T) sigma_max^(t/T), elementwise."""
    return s.sigma_min * torch.exp(t * (math.log(s.sigma_max / s.sigma_min) / s.T))


def dsm_loss(model, a0: torch.Tensor, cond: torch.Tensor, schedule: Schedule,
             t: Optional[torch.Tensor] = None, eps: Optional[torch.Tensor] = None,
             generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """sigma(t)^2 * || -dE/da_t + eps/sigma(t) ||^2 averaged over batch and elements.

    ``a0`` [B,T_p,D_a] standardized clean actions, ``cond`` [B,C]. The score is
    obtained by autograd with ``create_graph=True`` so the loss can be
    back-propagated into the energy network's parameters.

    Note the sign: with a_t = a0 + sigma*eps the target score is -eps/sigma, and
    the paper writes the residual as S + eps/sigma with S = -dE/da.
    """
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
    resid = sig * score + eps            # = sigma * (S + eps/sigma)
    # mean over elements (as Diffusion Policy's mse); equals the paper's squared
    # norm divided by T_p*D_a, which only rescales the loss.
    return resid.pow(2).mean()
