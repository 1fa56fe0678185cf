"""The layers of the energy networks: each with a differentiable ``forward`` and,
for the export path, a ``forward_cache`` / ``vjp`` pair of plain tensor
operators (the hand-written vector-Jacobian product with respect to the
action input; :mod:`energyflow.model`). Also the spectral-norm utilities the
pooled head's read-out needs.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

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



# --------------------------------------------------------------------------
# spectral normalisation
# --------------------------------------------------------------------------
def spectral_norm_linear(layer: nn.Linear, enabled: bool) -> nn.Module:
    """``layer`` with a spectral-norm parametrization of its weight, or ``layer`` itself when not ``enabled``."""
    if not enabled:
        return layer
    return torch.nn.utils.parametrizations.spectral_norm(layer)



def recompute_spectral_norm(model: nn.Module) -> int:
    """Set every spectral-norm parametrization's (u, v) to the exact top singular
    pair of its *current* weight (in place); returns how many layers were updated.

    An EMA averages the weights but copies the live model's power-iteration
    vectors, which belong to other weights; in eval mode the layer divides by
    u^T W v, so the averaged layer would not have spectral norm 1. Call this on
    the averaged model before evaluating or exporting it.
    """
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
