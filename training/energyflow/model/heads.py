"""The two energy heads on the shared trunk, siblings selected by
``ModelConfig.energy_head`` (:func:`energy_model`; :mod:`energyflow.model`):

* ``pooled`` (:class:`EnergyUNet`, the paper's head): the trunk's final
  feature map average-pooled over time, then a spectrally normalised MLP to
  one scalar energy per sample;
* ``denoiser`` (:class:`DenoiserEnergy`): E = 1/2 |c_in a - F(c_in a; s, c_noise)/sigma|^2
  over the Diffusion Policy network F (:class:`VectorUNet`: trunk + DP's
  per-step vector head) with EDM's preconditioning.

Both give ``forward`` (E), ``score`` (autograd, training) and
``energy_and_grad`` (the hand-written VJP the export traces).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .layers import Act, Tensor, act_fwd, act_grad, spectral_norm_linear
from .trunk import UNetBackbone


# --------------------------------------------------------------------------
# the energy network
# --------------------------------------------------------------------------
def autograd_score(energy: Callable[[Tensor, Tensor, Tensor], Tensor], a: Tensor, cond: Tensor, t: Tensor,
                   create_graph: bool = False) -> Tuple[Tensor, Tensor]:
    """(score = -dE/da, energy) of an energy function through autograd (training; export uses the VJPs)."""
    with torch.enable_grad():
        if not a.requires_grad:
            a = a.detach().requires_grad_(True)
        e = energy(a, cond, t)
        (g,) = torch.autograd.grad(e.sum(), a, create_graph=create_graph)
    return -g, e


class EnergyUNet(UNetBackbone):
    """Scalar energy E(a_t, cond, t).

    Inputs: ``a`` [B, T_p, D_a] (standardized actions), ``cond`` [B, cond_dim]
    (flattened history, docs/bundle.md), ``t`` [B] (diffusion time in [0, T]).
    Output: energy [B].
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        c0 = cfg.down_dims[0]
        hd = [c0] + list(cfg.head_dims) + [1]
        self.head = nn.ModuleList([spectral_norm_linear(nn.Linear(a, b), cfg.spectral_norm) for a, b in zip(hd[:-1], hd[1:])])
        self.head_act = Act(cfg.activation)

    def sigma(self, t: Tensor) -> Tensor:
        s = self.cfg.schedule
        return s.sigma_min * torch.exp(t * (math.log(s.sigma_max / s.sigma_min) / s.T))

    def c_in(self, t: Tensor) -> Optional[Tensor]:
        """Input preconditioning factor [B, 1, 1], or None when input_scale is none."""
        if getattr(self.cfg, "input_scale", "none") != "c_in":
            return None
        sig = self.sigma(t.reshape(-1))
        return torch.rsqrt(sig * sig + 1.0).reshape(-1, 1, 1)

    # -- differentiable forward (training) -----------------------------------
    def prior_coef(self, t: Tensor) -> Optional[Tensor]:
        """1/(sigma(t)^2 + 1) [B, 1, 1] for the Gaussian prior term, or None.

        With ``energy_prior: gaussian`` the energy is
        E = f(a_t, s, t) + |a_t|^2 / (2 (sigma^2 + 1)): the exact energy of
        standardized (unit-variance) actions noised to level sigma, the energy
        form of EDM's skip connection. The network f only learns the residual,
        so at sigma_max the field already pulls N(0, sigma_max^2) noise toward
        the data instead of relying on a learned, nearly vanishing gradient.
        E stays one scalar function of a_t: the field stays conservative.
        """
        if getattr(self.cfg, "energy_prior", "none") != "gaussian":
            return None
        sig = self.sigma(t.reshape(-1))
        return (1.0 / (sig * sig + 1.0)).reshape(-1, 1, 1)

    def forward(self, a: Tensor, cond: Tensor, t: Tensor) -> Tensor:
        g = self.global_cond(cond, t)
        a_in = a
        cin = self.c_in(t)
        if cin is not None:
            a = a * cin
        x = self.features(a, g)
        h = x.mean(dim=-1)
        for i, lin in enumerate(self.head):
            h = lin(h)
            if i < len(self.head) - 1:
                h = self.head_act(h)
        e = h.reshape(-1)
        scale = self.energy_factor(t)
        if scale is not None:
            e = e * scale
        pc = self.prior_coef(t)
        if pc is not None:
            e = e + 0.5 * (pc * a_in * a_in).sum(dim=(1, 2))
        return e

    def energy_factor(self, t: Tensor) -> Optional[Tensor]:
        """Output scale [B] of the energy, or None: inv_sigma gives 1/sigma;
        edm gives sqrt(sigma^2 + 1)/sigma = 1/(sigma c_in), so that with the c_in
        input scale sigma * dE/da = df/da is O(1) at every noise level."""
        es = self.cfg.energy_scale
        if es == "none":
            return None
        sig = self.sigma(t.reshape(-1))
        if es == "inv_sigma":
            return 1.0 / sig
        if es == "edm":
            return torch.sqrt(sig * sig + 1.0) / sig
        raise ValueError(f"energy_scale {es!r}: want none, inv_sigma or edm")

    def score(self, a: Tensor, cond: Tensor, t: Tensor, create_graph: bool = False) -> Tuple[Tensor, Tensor]:
        """Return (score = -dE/da, energy) through autograd."""
        return autograd_score(self.forward, a, cond, t, create_graph)

    # -- hand-written VJP (export) -------------------------------------------
    def energy_and_grad(self, a: Tensor, cond: Tensor, t: Tensor) -> Tuple[Tensor, Tensor]:
        """(dE/da [B,T_p,D_a], E [B]) with a hand-written VJP; plain ops only.

        The head must hold plain weights (see :func:`bake_spectral_norm`) when
        this is traced for export; with parametrized weights it still computes
        the right values in eval mode.
        """
        name = self.cfg.activation
        g = self.global_cond(cond, t)
        a_in = a
        cin = self.c_in(t)
        if cin is not None:
            a = a * cin
        x, cache = self.features_cache(a, g)
        L = self.cfg.pred_horizon
        h = x.mean(dim=-1)
        pre = []
        for i, lin in enumerate(self.head):
            h = F.linear(h, lin.weight, lin.bias)
            if i < len(self.head) - 1:
                pre.append(h)
                h = act_fwd(name, h)
        e = h.reshape(-1)
        # ---- backward: seed dE/dE = 1 (or 1/sigma) -------------------------
        # (constant-shaped seeds keep the graph free of Shape/Expand/Where ops)
        gh = self.head[-1].weight  # [1, n]: d h_last / d h_prev, broadcast over batch
        scale = self.energy_factor(t)
        if scale is not None:
            e = e * scale
            gh = gh * scale.reshape(-1, 1)
        for i in range(len(self.head) - 2, -1, -1):
            gh = gh * act_grad(name, pre[i])
            gh = torch.matmul(gh, self.head[i].weight)
        gx = gh.unsqueeze(-1) * torch.full((1, 1, L), 1.0 / L, dtype=gh.dtype, device=gh.device)
        gx = self.features_vjp(gx, cache)
        if cin is not None:
            gx = gx * cin  # chain rule through the input scaling
        pc = self.prior_coef(t)
        if pc is not None:
            e = e + 0.5 * (pc * a_in * a_in).sum(dim=(1, 2))
            gx = gx + pc * a_in
        return gx, e


# --------------------------------------------------------------------------
# the denoiser energy head (training/README.md, "Energy heads and noise levels")
# --------------------------------------------------------------------------
class VectorUNet(UNetBackbone):
    """F(x; s, c_noise): the Diffusion Policy network (trunk + ``Conv1d(C0, D_a, 1)``).

    The same network as :class:`energyflow.diffusion.NoiseUNet` (same trunk,
    per-step vector output, FiLM on the state, same ``final_conv`` name) but
    its noise input is EDM's ``c_noise`` (embedded as ``c_noise *
    cfg.noise_embed_scale``) and its last layer starts at zero, so F = 0 at
    initialisation.
    ``forward_cache`` / ``vjp`` give F and J_F^T g with plain operators only.
    """

    def __init__(self, cfg: ModelConfig, zero_init: bool = True) -> None:
        super().__init__(cfg)
        self.final_conv = nn.Conv1d(cfg.down_dims[0], cfg.action_dim, 1)
        if zero_init:
            nn.init.zeros_(self.final_conv.weight)
            nn.init.zeros_(self.final_conv.bias)

    def time_input(self, c_noise: Tensor) -> Tensor:
        """What the sinusoidal embedding sees: ``c_noise * cfg.noise_embed_scale``."""
        return c_noise * self.cfg.noise_embed_scale

    def forward(self, x: Tensor, cond: Tensor, c_noise: Tensor) -> Tensor:
        """F [B, T_p, D_a] for x [B, T_p, D_a], cond [B, cond_dim], c_noise [B]."""
        g = self.global_cond(cond, c_noise)
        return self.final_conv(self.features(x, g)).transpose(1, 2)

    def forward_cache(self, x: Tensor, cond: Tensor, c_noise: Tensor) -> Tuple[Tensor, Dict[str, Any]]:
        g = self.global_cond(cond, c_noise)
        h, cache = self.features_cache(x, g)
        return F.conv1d(h, self.final_conv.weight, self.final_conv.bias).transpose(1, 2), cache

    def vjp(self, gy: Tensor, cache: Dict[str, Any]) -> Tensor:
        """J_F(x)^T gy [B, T_p, D_a] (with respect to x only)."""
        gh = F.conv_transpose1d(gy.transpose(1, 2), self.final_conv.weight, None)
        return self.features_vjp(gh, cache)


class DenoiserEnergy(nn.Module):
    """E(a, s, sigma) = 1/2 |u|^2,  u = c_in a - F(c_in a; s, c_noise) / sigma.

    A wrapper around the plain network F (:class:`VectorUNet`), as EDM's
    ``EDMPrecond`` wraps its network: c_in = 1/sqrt(sigma^2 + 1),
    c_noise = ln(sigma)/4, sigma = sigma(t) of the geometric schedule
    (sigma_data = 1: actions are standardized). -dE/da = s_EDM - J_F^T s_EDM / sigma
    with s_EDM = -c_in u, the score of EDM's preconditioned denoiser on F; with
    F = 0 (the zero-initialised last layer) E is the Gaussian prior
    |a|^2 / (2 (sigma^2 + 1)). Same inputs and outputs as :class:`EnergyUNet`.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.net = VectorUNet(cfg)

    def precond(self, t: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """(sigma [B,1,1], c_in [B,1,1], c_noise [B]) at diffusion times ``t`` [B]."""
        s = self.cfg.schedule
        lam = math.log(s.sigma_max / s.sigma_min) / s.T
        log_sig = math.log(s.sigma_min) + t.reshape(-1) * lam   # ln sigma(t), exactly affine in t
        sig = torch.exp(log_sig).reshape(-1, 1, 1)
        c_in = torch.rsqrt(sig * sig + 1.0)
        return sig, c_in, 0.25 * log_sig

    def sigma(self, t: Tensor) -> Tensor:
        return self.precond(t)[0].reshape(-1)

    def residual(self, a: Tensor, cond: Tensor, t: Tensor) -> Tensor:
        """u [B, T_p, D_a]."""
        sig, c_in, c_noise = self.precond(t)
        x = c_in * a
        return x - self.net(x, cond, c_noise) / sig

    def half_sq_norm(self, u: Tensor) -> Tensor:
        """1/2 |u|^2 per sample [B], as n * mean (ReduceMean: the operator set the export allows)."""
        n = self.cfg.pred_horizon * self.cfg.action_dim
        return (0.5 * n) * (u * u).mean(dim=(1, 2))

    def forward(self, a: Tensor, cond: Tensor, t: Tensor) -> Tensor:
        return self.half_sq_norm(self.residual(a, cond, t))

    def score(self, a: Tensor, cond: Tensor, t: Tensor, create_graph: bool = False) -> Tuple[Tensor, Tensor]:
        """Return (score = -dE/da, energy) through autograd."""
        return autograd_score(self.forward, a, cond, t, create_graph)

    def energy_and_grad(self, a: Tensor, cond: Tensor, t: Tensor) -> Tuple[Tensor, Tensor]:
        """(dE/da, E): one forward of F, one VJP with cotangent u; plain ops only.

        dE/da = c_in (u - J_F(x)^T u / sigma), x = c_in a (J_F with respect to
        F's input, hence the outer c_in).
        """
        sig, c_in, c_noise = self.precond(t)
        x = c_in * a
        f, cache = self.net.forward_cache(x, cond, c_noise)
        u = x - f / sig
        e = self.half_sq_norm(u)
        jtu = self.net.vjp(u, cache)
        return c_in * (u - jtu / sig), e


def energy_model(cfg: ModelConfig) -> nn.Module:
    """The EnergyFlow network of ``cfg.energy_head``: :class:`EnergyUNet` (pooled) or :class:`DenoiserEnergy`."""
    if cfg.energy_head == "denoiser":
        return DenoiserEnergy(cfg)
    if cfg.energy_head == "pooled":
        return EnergyUNet(cfg)
    raise ValueError(f"unknown energy head {cfg.energy_head!r}")
