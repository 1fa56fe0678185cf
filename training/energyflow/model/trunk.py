"""The shared U-Net trunk: Diffusion Policy's 1-D temporal conditional U-Net
without an output head (:mod:`energyflow.model`). Both energy heads
(:mod:`energyflow.model.heads`) and the Diffusion Policy baseline
(:class:`energyflow.diffusion.NoiseUNet`) put their head on it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import ModelConfig
from .layers import Act, CondResBlock, Conv1dBlock, Downsample1d, SinusoidalPosEmb, Tensor, Upsample1d, act_fwd


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
