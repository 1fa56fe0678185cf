"""The policy as trained and checkpointed: the action network plus the optional
camera encoder, and the ``cond`` vector built from a batch (docs/bundle.md).

:class:`Policy` holds ``energy`` (EnergyUNet or DenoiserEnergy, by
``cfg.energy_head``) for ``policy: energyflow`` or ``noise`` (NoiseUNet) for
``policy: diffusion``; checkpoints store its ``state_dict``
(:mod:`energyflow.checkpoint` loads them, :mod:`energyflow.train` writes them).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn

from .config import ImageSpec, ModelConfig, TrainConfig
from .diffusion import NoiseUNet, ddpm_loss, sample_timesteps
from .losses import dsm_loss, sample_t_lognormal, sample_t_uniform
from .model import energy_model
from .preprocess import preprocess_batch
from .vision import ResNet18GN, load_vision_weights


# ---------------------------------------------------------------------------
# policy = energy network + optional vision encoder; builds cond from a batch
# ---------------------------------------------------------------------------
class Policy(nn.Module):
    """Policy network plus (optional) image encoder; ``cond`` layout per docs/bundle.md.

    The network is ``self.energy`` (EnergyUNet or DenoiserEnergy, by
    ``cfg.energy_head``) for ``policy: energyflow`` or
    ``self.noise`` (NoiseUNet) for ``policy: diffusion``; :attr:`net` is
    whichever is present (checkpoint keys stay ``energy.*`` for EnergyFlow).
    """

    def __init__(self, cfg: ModelConfig, vision_weights: Optional[str] = None) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.policy == "diffusion":
            self.noise = NoiseUNet(cfg)
        else:
            self.energy = energy_model(cfg)
        self.vision = None
        if cfg.images:
            if len(cfg.images) > 1:
                raise NotImplementedError("one camera per policy is supported")
            self.vision = ResNet18GN(cfg.images[0].width)
            if vision_weights:
                load_vision_weights(self.vision, vision_weights)

    @property
    def net(self) -> nn.Module:
        """The action network: EnergyUNet / DenoiserEnergy (energyflow) or NoiseUNet (diffusion)."""
        return self.noise if self.cfg.policy == "diffusion" else self.energy

    def sample_t(self, batch: int, gen: torch.Generator, device: torch.device,
                 tcfg: Optional[TrainConfig] = None) -> torch.Tensor:
        """Training times: integer k ~ U{0..N-1} as float32 (diffusion); for energyflow
        t ~ U[0, T] or, with ``tcfg.sigma_sampling == "lognormal"``, t of a log-normal sigma."""
        if self.cfg.policy == "diffusion":
            return sample_timesteps(batch, gen, device)
        if tcfg is not None and tcfg.sigma_sampling == "lognormal":
            return sample_t_lognormal(batch, self.cfg.schedule, tcfg.sigma_mean, tcfg.sigma_std, gen, device)
        return sample_t_uniform(batch, self.cfg.schedule, gen, device)

    def loss(self, a0: torch.Tensor, cond: torch.Tensor, t: torch.Tensor, eps: torch.Tensor,
             weighting: str = "sigma2", target: Optional[torch.Tensor] = None) -> torch.Tensor:
        """DSM loss (energyflow, Algorithm 1; ``weighting`` sigma2 | edm; ``target`` a teacher's
        noise estimate in place of eps) or DDPM epsilon MSE (diffusion) for fixed t/eps."""
        if self.cfg.policy == "diffusion":
            return ddpm_loss(self.noise, a0, cond, k=t, eps=eps)
        return dsm_loss(self.energy, a0, cond, self.cfg.schedule, t=t, eps=eps, weighting=weighting,
                        target=target)

    def image_spec(self, im: ImageSpec) -> Dict[str, Any]:
        return {"resize": list(im.resize), "crop": [im.shape[1], im.shape[2]], "channel_order": "RGB",
                "mean": list(im.mean), "std": list(im.std)}

    def build_cond(self, batch: Dict[str, torch.Tensor], train: bool = False) -> torch.Tensor:
        """cond [B, T_o * step_width]: per history step (oldest first) state then image features."""
        cfg = self.cfg
        parts: List[torch.Tensor] = []
        B = batch["actions"].shape[0]
        if cfg.state_dim > 0:
            parts.append(batch["state"].reshape(B, cfg.obs_horizon, cfg.state_dim))
        for im in cfg.images:
            imgs = batch[im.name]  # [B,T_o,H,W,3] uint8
            flat = imgs.reshape(B * cfg.obs_horizon, *imgs.shape[2:])
            x = preprocess_batch(flat, self.image_spec(im))
            if train:
                x = _random_shift(x, pad=4)
            f = self.vision(x).reshape(B, cfg.obs_horizon, -1)
            parts.append(f)
        return torch.cat(parts, dim=-1).reshape(B, -1)


def _random_shift(x: torch.Tensor, pad: int) -> torch.Tensor:
    """Random-shift augmentation (replicate pad + random crop back to size)."""
    B, C, H, W = x.shape
    xp = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode="replicate")
    ox = torch.randint(0, 2 * pad + 1, (B,), device=x.device)
    oy = torch.randint(0, 2 * pad + 1, (B,), device=x.device)
    rows = (oy[:, None] + torch.arange(H, device=x.device)[None]).reshape(B, 1, H, 1).expand(B, C, H, W + 2 * pad)
    xp = torch.gather(xp, 2, rows)
    cols = (ox[:, None] + torch.arange(W, device=x.device)[None]).reshape(B, 1, 1, W).expand(B, C, H, W)
    return torch.gather(xp, 3, cols)
