"""The state network g(s, σ) and its denoising score-matching loss; the
subpackage's errors, configuration and noise levels (:mod:`energyflow.state_term`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class StateTermError(ValueError):
    """The state term cannot be trained for this bundle / data."""


def sigma_grid(n: int = 8, sigma_min: float = 0.05, sigma_max: float = 3.0) -> np.ndarray:
    """``n`` log-spaced noise levels from ``sigma_min`` to ``sigma_max``, float32."""
    if n < 1 or not 0 < sigma_min <= sigma_max:
        raise StateTermError(f"noise levels: want n >= 1 and 0 < sigma_min <= sigma_max, "
                             f"got n={n}, sigma_min={sigma_min}, sigma_max={sigma_max}")
    return np.exp(np.linspace(math.log(sigma_min), math.log(sigma_max), n)).astype(np.float32)


@dataclass
class StateTermConfig:
    hidden: Tuple[int, ...] = (256, 256)
    sigmas: int = 8
    sigma_min: float = 0.05
    sigma_max: float = 3.0
    steps: int = 4000
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    noise_freqs: int = 8
    seed: int = 0
    transition: bool = True        # add the transition term when cond holds T_o >= 2 frames
    transition_ridge: float = 1e-3  # ridge on the regression (cond is standardized)
    transition_sd_floor: float = 1e-3  # smallest residual std (a dimension constant in the demos)
    rnd_steps: int = 0             # random network distillation predictor steps (0: no RND component)


# ---------------------------------------------------------------------------
# the network and its loss
# ---------------------------------------------------------------------------
class StateEnergyNet(nn.Module):
    """g(s, σ) = f(c_in·s, c_noise)/σ + |s|²/(2(σ²+1)), f an MLP with SiLU.

    ``forward(s, sigma)``: ``s [..., D]`` and ``sigma`` broadcastable against
    ``s[..., 0]``; returns g of that broadcast shape. The noise level enters f
    as a learned bias of the first layer from a Fourier embedding of
    c_noise = ¼ ln σ (the same as concatenating the embedding to the input).
    """

    def __init__(self, cond_dim: int, hidden: Sequence[int] = (256, 256), noise_freqs: int = 8) -> None:
        super().__init__()
        if not hidden:
            raise StateTermError("the state network needs at least one hidden layer")
        self.cond_dim = int(cond_dim)
        self.register_buffer("freqs", 2.0 ** torch.arange(noise_freqs, dtype=torch.float32))
        self.inp = nn.Linear(cond_dim, hidden[0])
        self.noise = nn.Linear(2 * noise_freqs, hidden[0], bias=False)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(hidden[:-1], hidden[1:]))
        self.out = nn.Linear(hidden[-1], 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, s: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        c_in = torch.rsqrt(sigma * sigma + 1.0)
        c_noise = 0.25 * torch.log(sigma)
        ang = c_noise.unsqueeze(-1) * self.freqs
        emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)
        # c_in (W s + b) + V emb(σ): the input layer on c_in·s, with a σ-dependent bias
        h = F.silu(c_in.unsqueeze(-1) * self.inp(s) + self.noise(emb))
        for lin in self.hidden:
            h = F.silu(lin(h))
        f = self.out(h).squeeze(-1)
        return f / sigma + 0.5 * (s * s).sum(-1) / (sigma * sigma + 1.0)


def dsm_loss(net: StateEnergyNet, s0: torch.Tensor, sigma: torch.Tensor,
             eps: torch.Tensor) -> torch.Tensor:
    """Per-sample ‖σ·∇ₛg(s0 + σε, σ) − ε‖² / D (score −∇g against −ε/σ, weighted σ²)."""
    x = (s0 + sigma[:, None] * eps).requires_grad_(True)
    g = net(x, sigma)
    (grad,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    return ((sigma[:, None] * grad - eps) ** 2).mean(-1)
