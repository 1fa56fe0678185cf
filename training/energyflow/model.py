"""EnergyFlow energy networks E(a_t, cond, t) (paper appendix C; training/README.md, "Energy heads and noise levels").

Two energy heads on the same Diffusion-Policy style 1D temporal conditional
U-Net trunk (:class:`UNetBackbone`: time/state conditioning, down/mid/up
residual blocks, final conv block), selected by ``ModelConfig.energy_head``
(:func:`energy_model`):

* ``pooled`` (:class:`EnergyUNet`, the paper's head): the final feature map is
  average-pooled over time and mapped by a spectrally normalised MLP to one
  scalar energy per sample;
* ``denoiser`` (:class:`DenoiserEnergy`): a wrapper around the Diffusion
  Policy network F (:class:`VectorUNet`: trunk + DP's per-step vector head),
  E = 1/2 |c_in a - F(c_in a; s, c_noise)/sigma|^2 with EDM's preconditioning.

The trunk is also shared with the Diffusion Policy baseline
(:class:`energyflow.diffusion.NoiseUNet`).

Every layer exposes two code paths:

* ``forward``: ordinary differentiable PyTorch (used for training, where the
  score is ``-autograd.grad(E, a_t, create_graph=True)``);
* ``forward_cache`` / ``vjp``: the same forward with saved intermediates and a
  hand-written vector-Jacobian product with respect to the *action* input only.
  This path uses only plain tensor operators so that ``torch.onnx.export``
  turns it into opset-17 ONNX (see :mod:`energyflow.export`).

``cond`` (flattened observation history, see docs/bundle.md) and ``t`` only go
through forward computations (state encoder, time embedding, FiLM
projections); no gradient is taken with respect to them in the export path.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig

Tensor = torch.Tensor


# --------------------------------------------------------------------------
# activations
# --------------------------------------------------------------------------
def act_fwd(name: str, x: Tensor) -> Tensor:
    """Activation used in the export path (plain ops only)."""
    if name == "mish":
        return x * torch.tanh(F.softplus(x))
    if name == "softplus":
        return F.softplus(x)
    if name == "silu":
        return x * torch.sigmoid(x)
    raise ValueError(f"unknown activation {name!r} (mish|softplus|silu)")


def act_grad(name: str, x: Tensor) -> Tensor:
    """Derivative of the activation at ``x``."""
    if name == "mish":
        tsp = torch.tanh(F.softplus(x))
        return tsp + x * torch.sigmoid(x) * (1.0 - tsp * tsp)
    if name == "softplus":
        return torch.sigmoid(x)
    if name == "silu":
        s = torch.sigmoid(x)
        return s * (1.0 + x * (1.0 - s))
    raise ValueError(f"unknown activation {name!r} (mish|softplus|silu)")


class Act(nn.Module):
    """Selectable C^2 activation (Mish by default; the official code uses Softplus)."""

    def __init__(self, name: str = "mish") -> None:
        super().__init__()
        act_fwd(name, torch.zeros(1))  # validate
        self.name = name

    def forward(self, x: Tensor) -> Tensor:
        if self.name == "mish":
            return F.mish(x)
        if self.name == "softplus":
            return F.softplus(x)
        return F.silu(x)

    def extra_repr(self) -> str:
        return self.name


# --------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------
class GroupNormVJP(nn.GroupNorm):
    """GroupNorm with an explicit forward-with-cache and input VJP."""

    #: static sequence length (set by the owning block); keeps traced reshapes constant
    seq_len: int = 0

    def forward_cache(self, x: Tensor) -> Tuple[Tensor, Dict[str, Tensor]]:
        C, L, G = self.num_channels, self.seq_len or int(x.shape[-1]), self.num_groups
        xr = x.reshape(-1, G, (C // G) * L)
        mu = xr.mean(dim=-1, keepdim=True)
        xc = xr - mu
        var = (xc * xc).mean(dim=-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(var + self.eps)
        xhat = (xc * rstd).reshape(-1, C, L)
        y = xhat * self.weight.reshape(1, C, 1) + self.bias.reshape(1, C, 1)
        return y, {"xhat": xhat, "rstd": rstd}

    def vjp(self, g: Tensor, cache: Dict[str, Tensor]) -> Tensor:
        xhat, rstd = cache["xhat"], cache["rstd"]
        C, L, G = self.num_channels, self.seq_len or int(xhat.shape[-1]), self.num_groups
        n = (C // G) * L
        gx = (g * self.weight.reshape(1, C, 1)).reshape(-1, G, n)
        xh = xhat.reshape(-1, G, n)
        m1 = gx.mean(dim=-1, keepdim=True)
        m2 = (gx * xh).mean(dim=-1, keepdim=True)
        return (rstd * (gx - m1 - xh * m2)).reshape(-1, C, L)


class Conv1dBlock(nn.Module):
    """Conv1d -> GroupNorm -> activation."""

    def __init__(self, cin: int, cout: int, kernel: int, n_groups: int, act: str, length: int = 0) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, padding=kernel // 2)
        self.norm = GroupNormVJP(n_groups, cout)
        self.norm.seq_len = length
        self.act = Act(act)
        self.pad = kernel // 2

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.norm(self.conv(x)))

    def forward_cache(self, x: Tensor) -> Tuple[Tensor, Dict[str, Any]]:
        z = F.conv1d(x, self.conv.weight, self.conv.bias, padding=self.pad)
        yn, nc = self.norm.forward_cache(z)
        return act_fwd(self.act.name, yn), {"norm": nc, "pre": yn}

    def vjp(self, g: Tensor, cache: Dict[str, Any]) -> Tensor:
        g = g * act_grad(self.act.name, cache["pre"])
        g = self.norm.vjp(g, cache["norm"])
        return F.conv_transpose1d(g, self.conv.weight, None, padding=self.pad)


class CondResBlock(nn.Module):
    """Conditional residual block with FiLM (Diffusion Policy, cond_predict_scale)."""

    def __init__(self, cin: int, cout: int, cond_dim: int, kernel: int, n_groups: int, act: str,
                 length: int = 0) -> None:
        super().__init__()
        self.cin = cin
        self.block0 = Conv1dBlock(cin, cout, kernel, n_groups, act, length)
        self.block1 = Conv1dBlock(cout, cout, kernel, n_groups, act, length)
        self.cond_act = Act(act)
        self.cond_lin = nn.Linear(cond_dim, 2 * cout)
        self.res_conv = nn.Conv1d(cin, cout, 1) if cin != cout else None
        self.cout = cout

    def film(self, gcond: Tensor) -> Tuple[Tensor, Tensor]:
        e = self.cond_lin(act_fwd(self.cond_act.name, gcond)).reshape(-1, 2, self.cout, 1)
        return e[:, 0], e[:, 1]

    def forward(self, x: Tensor, gcond: Tensor) -> Tensor:
        e = self.cond_lin(self.cond_act(gcond)).reshape(-1, 2, self.cout, 1)
        h = self.block0(x) * e[:, 0] + e[:, 1]
        h = self.block1(h)
        r = x if self.res_conv is None else self.res_conv(x)
        return h + r

    def forward_cache(self, x: Tensor, gcond: Tensor) -> Tuple[Tensor, Dict[str, Any]]:
        scale, bias = self.film(gcond)
        h0, c0 = self.block0.forward_cache(x)
        h1, c1 = self.block1.forward_cache(h0 * scale + bias)
        r = x if self.res_conv is None else F.conv1d(x, self.res_conv.weight, self.res_conv.bias)
        return h1 + r, {"c0": c0, "c1": c1, "scale": scale}

    def vjp(self, g: Tensor, cache: Dict[str, Any]) -> Tensor:
        gh = self.block1.vjp(g, cache["c1"]) * cache["scale"]
        gx = self.block0.vjp(gh, cache["c0"])
        if self.res_conv is None:
            return gx + g
        return gx + F.conv_transpose1d(g, self.res_conv.weight, None)


class Downsample1d(nn.Module):
    """Strided Conv1d(k=3, s=2, p=1): L -> L/2."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 3, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)

    def vjp(self, g: Tensor) -> Tensor:
        return F.conv_transpose1d(g, self.conv.weight, None, stride=2, padding=1, output_padding=1)


class Upsample1d(nn.Module):
    """ConvTranspose1d(k=4, s=2, p=1): L -> 2L; its VJP is a strided Conv1d."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(dim, dim, 4, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)

    def vjp(self, g: Tensor) -> Tensor:
        return F.conv1d(g, self.conv.weight, None, stride=2, padding=1)


class SinusoidalPosEmb(nn.Module):
    """Sinusoidal embedding of a continuous scalar."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        half = dim // 2
        freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))
        self.register_buffer("freqs", freqs, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        e = x.reshape(-1, 1) * self.freqs.reshape(1, -1)
        return torch.cat([torch.sin(e), torch.cos(e)], dim=-1)


def _sn(layer: nn.Linear, enabled: bool) -> nn.Module:
    if not enabled:
        return layer
    return torch.nn.utils.parametrizations.spectral_norm(layer)


# --------------------------------------------------------------------------
# the shared U-Net trunk
# --------------------------------------------------------------------------
class UNetBackbone(nn.Module):
    """Diffusion Policy's 1-D temporal conditional U-Net trunk (no output head).

    Shared by :class:`EnergyUNet` (scalar energy head) and
    :class:`energyflow.diffusion.NoiseUNet` (Diffusion Policy's vector head).
    The layers are attributes of the instance itself, not of a sub-module, so
    a subclass's ``state_dict`` keys are flat (``time_lin1.weight``,
    ``down.0.0.block0.conv.weight``, ``final_block.conv.weight``, ...) and
    existing EnergyFlow checkpoints keep loading. The construction order (and
    so the parameter initialisation for a given seed) is the one EnergyUNet
    always had.

    FiLM input = [time MLP(sinusoidal(time_input(t))), state MLP(cond)];
    :meth:`features` maps ``a`` [B, T_p, D_a] to the final feature map
    [B, down_dims[0], T_p].
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        act = cfg.activation
        if cfg.pred_horizon % (2 ** (len(cfg.down_dims) - 1)) != 0:
            raise ValueError("pred_horizon must be divisible by 2^(len(down_dims)-1)")
        for d in cfg.down_dims:
            if d % cfg.n_groups:
                raise ValueError(f"down dim {d} not divisible by n_groups {cfg.n_groups}")
        ted = cfg.time_embed_dim
        self.time_emb = SinusoidalPosEmb(ted)
        self.time_lin1 = nn.Linear(ted, ted * 4)
        self.time_act = Act(act)
        self.time_lin2 = nn.Linear(ted * 4, ted)
        # state encoder: flattened history -> 2-layer MLP
        self.enc_lin1 = nn.Linear(cfg.cond_dim, cfg.state_hidden)
        self.enc_act = Act(act)
        self.enc_lin2 = nn.Linear(cfg.state_hidden, cfg.state_hidden)
        gdim = ted + cfg.state_hidden

        dims = [cfg.action_dim] + list(cfg.down_dims)
        in_out = list(zip(dims[:-1], dims[1:]))
        k, G = cfg.kernel_size, cfg.n_groups
        self.down = nn.ModuleList()
        L = cfg.pred_horizon
        for i, (di, do) in enumerate(in_out):
            last = i == len(in_out) - 1
            self.down.append(nn.ModuleList([
                CondResBlock(di, do, gdim, k, G, act, L),
                CondResBlock(do, do, gdim, k, G, act, L),
                Downsample1d(do) if not last else nn.Identity(),
            ]))
            if not last:
                L //= 2
        mid = dims[-1]
        self.mid = nn.ModuleList([CondResBlock(mid, mid, gdim, k, G, act, L),
                                  CondResBlock(mid, mid, gdim, k, G, act, L)])
        self.up = nn.ModuleList()
        for di, do in reversed(in_out[1:]):
            self.up.append(nn.ModuleList([
                CondResBlock(do * 2, di, gdim, k, G, act, L),
                CondResBlock(di, di, gdim, k, G, act, L),
                Upsample1d(di),
            ]))
            L *= 2
        c0 = cfg.down_dims[0]
        self.final_block = Conv1dBlock(c0, c0, k, G, act, L)

    # -- conditioning (forward only, no VJP needed) --------------------------
    def time_input(self, t: Tensor) -> Tensor:
        """What the sinusoidal embedding sees: ``t * cfg.time_scale`` (EnergyFlow's continuous t)."""
        return t * self.cfg.time_scale

    def global_cond(self, cond: Tensor, t: Tensor) -> Tensor:
        """Concatenate time embedding and state encoding (the FiLM input)."""
        name = self.cfg.activation
        te = self.time_emb(self.time_input(t))
        te = self.time_lin2(act_fwd(name, self.time_lin1(te)))
        se = self.enc_lin2(act_fwd(name, self.enc_lin1(cond)))
        return torch.cat([te, se], dim=-1)

    def features(self, a: Tensor, g: Tensor, plain: bool = False) -> Tensor:
        """U-Net trunk: ``a`` [B, T_p, D_a], FiLM input ``g`` -> final feature map [B, C0, T_p].

        ``plain=True`` runs the same computation through the blocks'
        ``forward_cache`` (plain tensor operators, constant reshapes, no
        GroupNorm/Mish operators) so that it exports to the restricted ONNX
        operator set; the caches are discarded.
        """
        x = a.transpose(1, 2)
        hs = []
        for r1, r2, ds in self.down:
            x = _res(r2, _res(r1, x, g, plain), g, plain)
            hs.append(x)
            if isinstance(ds, Downsample1d):
                x = ds(x)
        for r in self.mid:
            x = _res(r, x, g, plain)
        for r1, r2, us in self.up:
            x = torch.cat([x, hs.pop()], dim=1)
            x = us(_res(r2, _res(r1, x, g, plain), g, plain))
        return self.final_block.forward_cache(x)[0] if plain else self.final_block(x)


    def features_cache(self, a: Tensor, g: Tensor) -> Tuple[Tensor, Dict[str, Any]]:
        """:meth:`features` with saved intermediates for :meth:`features_vjp` (plain operators)."""
        x = a.transpose(1, 2)
        down_c: List[Any] = []
        hs = []
        for r1, r2, ds in self.down:
            x, c1 = r1.forward_cache(x, g)
            x, c2 = r2.forward_cache(x, g)
            down_c.append((c1, c2))
            hs.append(x)
            if isinstance(ds, Downsample1d):
                x = F.conv1d(x, ds.conv.weight, ds.conv.bias, stride=2, padding=1)
        mid_c = []
        for r in self.mid:
            x, c = r.forward_cache(x, g)
            mid_c.append(c)
        up_c = []
        for r1, r2, us in self.up:
            x = torch.cat([x, hs.pop()], dim=1)
            x, c1 = r1.forward_cache(x, g)
            x, c2 = r2.forward_cache(x, g)
            up_c.append((c1, c2))
            x = F.conv_transpose1d(x, us.conv.weight, us.conv.bias, stride=2, padding=1)
        x, fc = self.final_block.forward_cache(x)
        return x, {"down": down_c, "mid": mid_c, "up": up_c, "final": fc}

    def features_vjp(self, gx: Tensor, cache: Dict[str, Any]) -> Tensor:
        """Hand-written VJP of :meth:`features_cache`: cotangent [B, C0, T_p] -> d/da [B, T_p, D_a]."""
        gx = self.final_block.vjp(gx, cache["final"])
        n_skip = len(self.down)
        gskips: List[Optional[Tensor]] = [None] * n_skip
        for j in range(len(self.up) - 1, -1, -1):
            r1, r2, us = self.up[j]
            c1, c2 = cache["up"][j]
            gx = us.vjp(gx)
            gx = r2.vjp(gx, c2)
            gx = r1.vjp(gx, c1)
            half = r1.cin // 2
            gskips[n_skip - 1 - j] = gx[:, half:]
            gx = gx[:, :half]
        for j in range(len(self.mid) - 1, -1, -1):
            gx = self.mid[j].vjp(gx, cache["mid"][j])
        for i in range(len(self.down) - 1, -1, -1):
            r1, r2, ds = self.down[i]
            if isinstance(ds, Downsample1d):
                gx = ds.vjp(gx)
            gs = gskips[i]
            if gs is not None:
                gx = gx + gs
            c1, c2 = cache["down"][i]
            gx = r2.vjp(gx, c2)
            gx = r1.vjp(gx, c1)
        return gx.transpose(1, 2)

def _res(block: CondResBlock, x: Tensor, g: Tensor, plain: bool) -> Tensor:
    """One conditional residual block, through ``forward`` or (``plain``) ``forward_cache``."""
    return block.forward_cache(x, g)[0] if plain else block(x, g)


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
        self.head = nn.ModuleList([_sn(nn.Linear(a, b), cfg.spectral_norm) for a, b in zip(hd[:-1], hd[1:])])
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


def recompute_spectral_norm(model: nn.Module) -> int:
    """Set every spectral-norm parametrization's (u, v) to the exact top singular
    pair of its *current* weight (in place); returns how many layers were updated.

    An EMA averages the weights but copies the live model's power-iteration
    vectors, which belong to other weights; in eval mode the layer divides by
    u^T W v, so the averaged layer would not have spectral norm 1. Call this on
    the averaged model before evaluating or exporting it.
    """
    from torch.nn.utils import parametrize

    n = 0
    with torch.no_grad():
        for mod in model.modules():
            if not parametrize.is_parametrized(mod, "weight"):
                continue
            plist = mod.parametrizations.weight
            for par in plist:
                if not (hasattr(par, "_u") and hasattr(par, "_v") and hasattr(par, "_reshape_weight_to_matrix")):
                    continue
                wm = par._reshape_weight_to_matrix(plist.original.detach())
                U, _, Vh = torch.linalg.svd(wm.double(), full_matrices=False)
                par._u.copy_(U[:, 0].to(par._u.dtype))
                par._v.copy_(Vh[0].to(par._v.dtype))
                n += 1
    return n


def bake_spectral_norm(model: nn.Module) -> nn.Module:
    """Replace spectral-norm-parametrized Linear layers by plain ``nn.Linear`` (in place).

    The model is put in eval mode first so no power iteration runs. Layers are
    *replaced* rather than passed to ``remove_parametrizations``: that function
    deletes the property from the dynamically created class, which a
    ``deepcopy`` shares with the original model and would break it.
    """
    from torch.nn.utils import parametrize

    model.eval()
    for parent in list(model.modules()):
        for cname, child in list(parent.named_children()):
            if parametrize.is_parametrized(child, "weight") and isinstance(child, nn.Linear):
                with torch.no_grad():
                    w = child.weight.detach().clone()
                    plain = nn.Linear(child.in_features, child.out_features, child.bias is not None)
                    plain = plain.to(w.device, w.dtype)
                    plain.weight.copy_(w)
                    if child.bias is not None:
                        plain.bias.copy_(child.bias.detach())
                setattr(parent, cname, plain)
    model.eval()
    return model


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
