"""The reading: g at every noise level as z-scores on held-out steps, the
transition and RND components, and their max (:mod:`energyflow.state_term`)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .network import StateEnergyNet, StateTermError

#: the manifest block's ``reading`` of g alone (the max over the σ levels' z)
READING = "max_sigma_z"
#: the reading with extra components (the max of the σ levels' z and theirs; block "components")
READING_MAX_Z = "max_z"


# ---------------------------------------------------------------------------
# the reading: max over sigma of per-sigma z-scores
# ---------------------------------------------------------------------------
class TransitionScore(nn.Module):
    """cond [B, T_o·F] -> t(s) [B] = max_k |(cond @ M − b)_k| / sd_k.

    ``M`` [T_o·F, F] is (−W over the earlier frames; I over the newest), so
    ``cond @ M − b`` is the newest frame minus its linear prediction. M and b
    are stored divided by sd; the max of |r| is √ of a MaxPool over r².
    """

    def __init__(self, m: np.ndarray, b: np.ndarray, sd: np.ndarray) -> None:
        super().__init__()
        sd = np.asarray(sd, np.float64)
        self.register_buffer("m", torch.as_tensor((np.asarray(m, np.float64) / sd).astype(np.float32)))
        self.register_buffer("c", torch.as_tensor((np.asarray(b, np.float64) / sd).astype(np.float32)))

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        r = cond @ self.m - self.c
        k = int(self.m.shape[1])
        return torch.sqrt(F.max_pool2d((r * r).reshape(-1, 1, 1, k), kernel_size=(1, k)).reshape(-1))


def fit_transition(cond: np.ndarray, frames: int, ridge: float = 1e-3,
                   sd_floor: float = 1e-3) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The newest of ``frames`` time-major frames of ``cond`` regressed on the
    earlier ones (ridge, bias): returns M [D, F], b [F] and the residual std
    sd [F] (floored at ``sd_floor``) on these rows."""
    cond = np.asarray(cond, np.float64)
    n, d = cond.shape
    if frames < 2 or d % frames:
        raise StateTermError(f"the transition term needs cond of T_o >= 2 equal frames, got width {d} "
                             f"and T_o = {frames}")
    f = d // frames
    x = np.concatenate([cond[:, :d - f], np.ones((n, 1))], axis=1)
    y = cond[:, d - f:]
    reg = ridge * np.eye(x.shape[1])
    reg[-1, -1] = 0.0  # the bias is not shrunk
    w = np.linalg.solve(x.T @ x + reg, x.T @ y)  # [d-f+1, f]
    m = np.concatenate([-w[:-1], np.eye(f)], axis=0)
    b = w[-1]
    sd = np.maximum((cond @ m - b).std(0), sd_floor)
    return m, b, sd


def _mlp(d_in: int, widths: Sequence[int]) -> nn.Sequential:
    layers: List[nn.Module] = []
    d = d_in
    for w in widths[:-1]:
        layers += [nn.Linear(d, w), nn.SiLU()]
        d = w
    layers.append(nn.Linear(d, widths[-1]))
    return nn.Sequential(*layers)


class RNDScore(nn.Module):
    """Random network distillation on cond (the observation score of FIPER,
    Römer et al. 2025): a fixed random MLP ``target`` and a ``predictor``
    trained to match it on the demonstrations; cond [B, D] -> ‖predictor −
    target‖² / K [B], small where the predictor has seen data."""

    TARGET, PREDICTOR = (256, 256, 128), (256, 256, 256, 128)

    def __init__(self, cond_dim: int) -> None:
        super().__init__()
        self.target = _mlp(cond_dim, self.TARGET)
        self.predictor = _mlp(cond_dim, self.PREDICTOR)
        for q in self.target.parameters():
            q.requires_grad_(False)

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        d = self.predictor(cond) - self.target(cond)
        return (d * d).mean(-1)


#: components of the reading besides g, in the order the graph concatenates them
EXTRA_COMPONENTS = ("transition", "rnd")


class StateEnergyReading(nn.Module):
    """cond [B, D] -> state_energy [B]: the max of the z-scores
    (g(cond, σ_j) − μ_j)/sd_j over the noise levels and, for each extra
    component c (``transition``, ``rnd``), (c(cond) − μ_c)/sd_c."""

    def __init__(self, net: StateEnergyNet, sigmas: Sequence[float], mean: Sequence[float],
                 std: Sequence[float], extras: Optional[Dict[str, nn.Module]] = None,
                 extra_stats: Optional[Dict[str, Tuple[float, float]]] = None) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("sigmas", torch.as_tensor(np.asarray(sigmas, np.float32)))
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean, np.float32)))
        self.register_buffer("std", torch.as_tensor(np.asarray(std, np.float32)))
        extras = extras or {}
        unknown = sorted(set(extras) - set(EXTRA_COMPONENTS))
        if unknown:
            raise StateTermError(f"unknown components {unknown}: want some of {', '.join(EXTRA_COMPONENTS)}")
        self.extras = nn.ModuleDict({k: extras[k] for k in EXTRA_COMPONENTS if k in extras})
        stats = [(extra_stats or {}).get(k, (0.0, 1.0)) for k in self.extras]
        self.register_buffer("extra_stats", torch.tensor(stats, dtype=torch.float32).reshape(-1, 2))

    @property
    def components(self) -> List[str]:
        return ["g", *self.extras.keys()]

    def per_sigma(self, cond: torch.Tensor) -> torch.Tensor:
        """g(cond, σ_j) for every level: [B, J]."""
        return self.net(cond.unsqueeze(1), self.sigmas)

    def z(self, cond: torch.Tensor) -> torch.Tensor:
        return (self.per_sigma(cond) - self.mean) / self.std

    def extra_z(self, cond: torch.Tensor) -> torch.Tensor:
        """The extra components' z-scores, [B, len(extras)]."""
        zs = [(m(cond) - self.extra_stats[i, 0]) / self.extra_stats[i, 1] for i, m in enumerate(self.extras.values())]
        return torch.stack(zs, dim=-1) if zs else cond.new_zeros((cond.shape[0], 0))

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        z = self.z(cond)
        if len(self.extras):
            z = torch.cat([z, self.extra_z(cond)], dim=-1)
        J = int(z.shape[-1])
        # the max as a MaxPool over the J levels (ReduceMax is not in the allowed operator set)
        return F.max_pool2d(z.reshape(-1, 1, 1, J), kernel_size=(1, J)).reshape(-1)


@torch.no_grad()
def per_sigma_values(net: StateEnergyNet, cond: np.ndarray, sigmas: Sequence[float],
                     batch: int = 4096) -> np.ndarray:
    """g(cond, σ_j) in float64 numpy, [N, J]."""
    r = StateEnergyReading(net, sigmas, np.zeros(len(sigmas)), np.ones(len(sigmas))).eval()
    out = [r.per_sigma(torch.from_numpy(np.asarray(cond[i:i + batch], np.float32))).double().numpy()
           for i in range(0, len(cond), batch)]
    return np.concatenate(out) if out else np.zeros((0, len(sigmas)))


def fit_reading(net: StateEnergyNet, sigmas: Sequence[float], held_cond: np.ndarray,
                extras: Optional[Dict[str, nn.Module]] = None) -> StateEnergyReading:
    """The max-z reading with μ_j, sd_j measured on ``held_cond`` (held-out
    demonstration steps), and each extra component's μ_c, sd_c measured there too."""
    if len(held_cond) < 2:
        raise StateTermError(f"{len(held_cond)} held-out steps: need at least 2 to measure the per-sigma mean and std")
    g = per_sigma_values(net, held_cond, sigmas)
    stats: Dict[str, Tuple[float, float]] = {}
    x = torch.from_numpy(np.asarray(held_cond, np.float32))
    for k, m in (extras or {}).items():
        with torch.no_grad():
            v = m(x).double().numpy()
        stats[k] = (float(v.mean()), float(max(v.std(), 1e-12)))
    return StateEnergyReading(net, sigmas, g.mean(0), np.maximum(g.std(0), 1e-6), extras, stats).eval()


@torch.no_grad()
def read(reading: StateEnergyReading, cond: np.ndarray, batch: int = 4096) -> np.ndarray:
    """state_energy of each row of ``cond`` (torch, float64 result)."""
    out = [reading(torch.from_numpy(np.asarray(cond[i:i + batch], np.float32))).double().numpy()
           for i in range(0, len(cond), batch)]
    return np.concatenate(out) if out else np.zeros(0)
