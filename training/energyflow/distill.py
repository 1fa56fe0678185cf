"""Distilling the energy from a trained Diffusion Policy (training/README.md, "Distilling the energy from a Diffusion Policy").

With ``--teacher CKPT`` the EnergyFlow loss keeps its form,
w(sigma) |sigma (-dE/da) + target|^2, but ``target`` is the teacher's noise
estimate eps_hat(a_t, s, k) instead of the noise that was drawn: the energy's
score is regressed onto the Diffusion Policy's score (Thornton et al. 2025),
a lower-variance target with the same minimiser where the teacher is right.

Two things make the teacher usable from the energy's continuous noise levels:

* **noise levels on the teacher's grid.** DP was trained on 100 integer steps
  k of a DDPM schedule, x_k = sqrt(ab_k) a0 + sqrt(1 - ab_k) eps. That is the
  variance-exploding a0 + sigma_k eps scaled by sqrt(ab_k), with
  sigma_k = sqrt((1 - ab_k)/ab_k). Each drawn sigma is snapped to the nearest
  sigma_k in ln sigma (:meth:`Teacher.snap`), so the teacher is only asked
  about noise levels it was trained on.
* **scene shifts the teacher labels** (``--teacher-shift KAPPA``). Only the
  teacher can say what the policy should do in a scene no demonstration
  shows. A fraction of each batch has its conditioning state moved by
  c (s_i - s_j), the difference of two demonstrations' first states scaled by
  c ~ U[0, KAPPA], the same on every history frame: a move along the
  directions in which the scenes vary (object and goal positions), up to
  KAPPA times their spread, and the teacher's eps_hat there is the target.
  Diffusion Policy itself never sees these states; the student learns how
  the teacher extrapolates.

The teacher must be a ``policy: diffusion`` checkpoint trained on the same
data (the same normalisers and observation layout); anything else is
refused with one line naming what differs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from .checkpoint import load_checkpoint_policy
from .config import ModelConfig, Schedule, ddpm_alphas_cumprod
from .data import same_values
from .config import teacher_record as record  # the manifest record's old name here
from .losses import sigma_t, t_of_sigma


class TeacherError(ValueError):
    """A teacher checkpoint that cannot label this run's batches."""


@dataclass
class Teacher:
    """A trained Diffusion Policy used as the energy's regression target."""

    policy: torch.nn.Module          # energyflow.policy.Policy holding a NoiseUNet, eval mode
    sqrt_ab: torch.Tensor            # [N] sqrt(alphas_cumprod), float32
    ln_sigma: torch.Tensor           # [N] ln sigma_k, float64

    @staticmethod
    def load(path: str | Path, mcfg: ModelConfig, meta: Dict[str, Any],
             device: Optional[torch.device] = None) -> "Teacher":
        """The checkpoint at ``path``, checked against the student's config and normalisers."""
        p = Path(path)
        if not p.is_file():
            raise TeacherError(f"--teacher {path}: no such checkpoint file")
        pol, tmeta = load_checkpoint_policy(p)
        tc = pol.cfg
        if tc.policy != "diffusion":
            raise TeacherError(f"--teacher {path}: holds a {tc.policy!r} policy; the teacher must be a diffusion one")
        if mcfg.images or tc.images:
            raise TeacherError(f"--teacher {path}: distillation supports state-only policies (no camera)")
        for name in ("state_dim", "action_dim", "obs_horizon", "pred_horizon"):
            if getattr(tc, name) != getattr(mcfg, name):
                raise TeacherError(f"--teacher {path}: {name} is {getattr(tc, name)}, this run's is {getattr(mcfg, name)}")
        for name in ("action_norm", "state_norm"):
            mine, theirs = meta.get(name) or {}, tmeta.get(name) or {}
            if not (same_values(mine.get("mean"), theirs.get("mean")) and same_values(mine.get("std"), theirs.get("std"))):
                raise TeacherError(f"--teacher {path}: its {name} differs from this run's "
                                   "(train it on the same data with the same --seed and --val-fraction)")
        for q in pol.parameters():
            q.requires_grad_(False)
        ab = ddpm_alphas_cumprod()
        dev = device or torch.device("cpu")
        return Teacher(policy=pol.to(dev).eval(),
                       sqrt_ab=torch.as_tensor(np.sqrt(ab), dtype=torch.float32, device=dev),
                       ln_sigma=torch.as_tensor(0.5 * np.log((1.0 - ab) / ab), dtype=torch.float64, device=dev))

    def snap(self, t: torch.Tensor, schedule: Schedule) -> Tuple[torch.Tensor, torch.Tensor]:
        """(t', k): each t's sigma moved to the nearest teacher level sigma_k (in ln sigma),
        t' = the student's time of sigma_k (it may pass T slightly at the top level)."""
        ln_sig = torch.log(sigma_t(t.double(), schedule))
        k = torch.argmin((ln_sig[:, None] - self.ln_sigma[None, :]).abs(), dim=1)
        sig_k = torch.exp(self.ln_sigma[k])
        return t_of_sigma(sig_k, schedule).to(t.dtype), k

    @torch.no_grad()
    def eps(self, a_t: torch.Tensor, cond: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The teacher's eps_hat at the variance-exploding a_t = a0 + sigma_k eps (scaled to DP's x_k)."""
        x = self.sqrt_ab[k].reshape(-1, 1, 1) * a_t
        return self.policy.noise(x, cond, k.to(torch.float32))


def start_states(state: np.ndarray, lengths: list[int]) -> np.ndarray:
    """[n_demos, D_s] the first (standardized) state of each demonstration."""
    starts = np.cumsum([0] + list(lengths[:-1]))
    return np.asarray(state[starts], np.float32)


def scene_shift(starts: np.ndarray, batch: int, obs_horizon: int, kappa: float, fraction: float,
                rng: np.random.Generator) -> np.ndarray:
    """[batch, obs_horizon * D_s] cond offsets: c (s_i - s_j), c ~ U[0, kappa], on a
    ``fraction`` of the rows (the rest zero), repeated on every history frame."""
    n, d = starts.shape
    out = np.zeros((batch, obs_horizon, d), np.float32)
    if kappa <= 0 or fraction <= 0 or n < 2:
        return out.reshape(batch, -1)
    rows = np.flatnonzero(rng.random(batch) < fraction)
    i = rng.integers(0, n, size=rows.size)
    j = rng.integers(0, n, size=rows.size)
    c = rng.uniform(0.0, kappa, size=(rows.size, 1)).astype(np.float32)
    out[rows] = (c * (starts[i] - starts[j]))[:, None, :]
    return out.reshape(batch, -1)


__all__ = ["Teacher", "TeacherError", "record", "scene_shift", "start_states"]
