"""Hyper-parameter containers with the paper's values as defaults, and the
noise schedules and manifest records every other module reads.

Every field can be set from a YAML/JSON config file or from CLI flags
(see :mod:`energyflow.cli`). Besides the configs this module holds what the
toolkit's lower and upper layers must agree on without importing each other:
the geometric schedule (:class:`Schedule`), the Diffusion Policy baseline's
DDPM schedule (:func:`ddpm_alphas_cumprod`, :func:`schedule_manifest`) and the
manifest's teacher record (:func:`teacher_record`). It imports no other
module of the toolkit.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import yaml


@dataclass
class Schedule:
    """Geometric variance-exploding noise schedule (paper Sec. 4)."""

    sigma_min: float = 0.01
    sigma_max: float = 10.0
    T: float = 1.0
    gamma: float = 1e-3

    def sigma(self, t: float) -> float:
        """sigma(t) = sigma_min^(1-t/T) * sigma_max^(t/T) (float64)."""
        return self.sigma_min ** (1.0 - t / self.T) * self.sigma_max ** (t / self.T)

    def dsig2dt(self, t: float) -> float:
        """d sigma(t)^2 / dt (float64)."""
        return 2.0 * self.sigma(t) ** 2 * math.log(self.sigma_max / self.sigma_min) / self.T

    def to_manifest(self) -> Dict[str, Any]:
        return {"kind": "geometric", "sigma_min": self.sigma_min, "sigma_max": self.sigma_max,
                "T": self.T, "gamma": self.gamma}


# ---------------------------------------------------------------------------
# the Diffusion Policy baseline's DDPM schedule (policy kind ``diffusion``):
# diffusers ``DDPMScheduler(num_train_timesteps=100, beta_schedule="squaredcos_cap_v2")``
# ---------------------------------------------------------------------------
NUM_TRAIN_TIMESTEPS = 100
BETA_SCHEDULE = "squaredcos_cap_v2"
PREDICTION_TYPE = "epsilon"


def betas_for_alpha_bar(num_timesteps: int, max_beta: float = 0.999) -> np.ndarray:
    """diffusers' ``betas_for_alpha_bar`` (cosine alpha_bar, "squaredcos_cap_v2"), float64.

    beta_i = min(1 - alpha_bar((i+1)/N) / alpha_bar(i/N), max_beta) with
    alpha_bar(t) = cos((t + 0.008) / 1.008 * pi / 2)^2.
    """

    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    return np.asarray([min(1.0 - alpha_bar((i + 1) / num_timesteps) / alpha_bar(i / num_timesteps), max_beta)
                       for i in range(num_timesteps)], np.float64)


def ddpm_alphas_cumprod(num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> np.ndarray:
    """alphas_cumprod[k] = prod_{i<=k} (1 - beta_i), float64 [N]."""
    return np.cumprod(1.0 - betas_for_alpha_bar(num_timesteps))


def schedule_manifest(clip_sample: float, num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Dict[str, Any]:
    """The manifest's ``schedule`` block of a diffusion bundle."""
    return {"kind": "ddpm", "num_train_timesteps": int(num_timesteps), "beta_schedule": BETA_SCHEDULE,
            "prediction_type": PREDICTION_TYPE, "clip_sample": float(clip_sample),
            "alphas_cumprod": [float(v) for v in ddpm_alphas_cumprod(num_timesteps)]}


def teacher_record(path: str, kappa: float, fraction: float) -> Dict[str, Any]:
    """The manifest's ``model.training.teacher`` entry of a policy distilled from a
    Diffusion Policy checkpoint (:mod:`energyflow.distill`)."""
    p = Path(path)
    return {"kind": "diffusion", "checkpoint": f"{p.parent.name}/{p.name}", "sigma_grid": "ddpm-100-snap",
            "scene_shift": {"kappa": kappa, "fraction": fraction if kappa > 0 else 0.0}}


#: policy kinds a bundle / checkpoint can hold (docs/bundle.md ``policy``)
POLICY_KINDS = ("energyflow", "diffusion")

#: EnergyFlow energy heads (``--energy-head``): ``pooled`` = the paper's
#: time-pooled, spectrally normalised MLP read-out (:class:`energyflow.model.EnergyUNet`);
#: ``denoiser`` = E = 1/2 |c_in a - F(c_in a; s, c_noise)/sigma|^2 over the
#: Diffusion Policy network F (:class:`energyflow.model.DenoiserEnergy`, training/README.md, "Energy heads and noise levels").
ENERGY_HEADS = ("pooled", "denoiser")
#: the head of a new model when nothing says otherwise (switching it is this one line):
#: the denoiser head, chosen by measurement (research/notes/evaluation-log.md, "The energy head")
DEFAULT_ENERGY_HEAD = "denoiser"
#: the head of a saved config (checkpoint, manifest) written before ``energy_head`` existed
LEGACY_ENERGY_HEAD = "pooled"

#: training noise-level laws (``--sigma-sampling``): ``uniform`` = t ~ U[0, T] on the
#: geometric schedule (Algorithm 1); ``lognormal`` = ln sigma ~ N(mean, std^2) clipped
#: to [sigma_min, sigma_max] and mapped back to t (EDM)
SIGMA_SAMPLINGS = ("uniform", "lognormal")
#: DSM loss weightings (``--loss-weighting``): ``sigma2`` = lambda(t) = sigma^2 (Algorithm 1);
#: ``edm`` = (sigma^2 + 1) sigma^2, EDM's lambda(sigma) on the denoiser error at sigma_data = 1
LOSS_WEIGHTINGS = ("sigma2", "edm")
#: ``--sigma-sampling``/``--loss-weighting`` left at ``auto`` take the measured recipe of
#: the head: the denoiser head was measured with EDM's law and weight, the pooled head
#: with Algorithm 1's (:meth:`TrainConfig.for_head`)
HEAD_NOISE_DEFAULTS = {"pooled": ("uniform", "sigma2"), "denoiser": ("lognormal", "edm")}


@dataclass
class ImageSpec:
    """One camera observation consumed through the vision encoder."""

    name: str = "camera"
    shape: Tuple[int, int, int] = (3, 96, 96)      # C,H,W after crop
    resize: Tuple[int, int] = (104, 104)           # H,W before the center crop
    features: int = 512                            # = 8 * width, derived
    width: int = 64                                # ResNet-18 channel base (--vision-width)
    mean: Tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: Tuple[float, float, float] = (0.229, 0.224, 0.225)

    def __post_init__(self) -> None:
        # features follow the encoder's width; 512 is also the default left in place
        if self.width < 1:
            raise ValueError(f"image {self.name!r}: vision width {self.width}, expected ≥ 1")
        if self.features not in (512, 8 * self.width):
            raise ValueError(f"image {self.name!r}: {self.features} features, but a ResNet-18 of width "
                             f"{self.width} gives {8 * self.width}")
        self.features = 8 * self.width


@dataclass
class ModelConfig:
    """Architecture of the policy network (paper appendix C).

    ``policy`` selects the kind: ``energyflow`` (EnergyUNet, DSM, Algorithm 2)
    or ``diffusion`` (the Diffusion Policy baseline: NoiseUNet on the same
    backbone, DDPM epsilon loss, DDIM sampler; see :mod:`energyflow.diffusion`).
    The energy-head fields (``head_dims``, ``spectral_norm``, ``energy_scale``,
    ``input_scale``, ``energy_prior``, ``time_scale``, ``schedule``) only apply
    to ``energyflow``.
    """

    action_dim: int = 4
    pred_horizon: int = 16
    obs_horizon: int = 2
    action_horizon: int = 8
    state_dim: int = 39                      # D_s (0 when no state obs)
    state_key: str = "state"
    images: List[ImageSpec] = field(default_factory=list)
    down_dims: Tuple[int, ...] = (64, 128, 256)
    kernel_size: int = 5
    n_groups: int = 8
    time_embed_dim: int = 128
    state_hidden: int = 128                  # state-encoder MLP width (2 layers)
    head_dims: Tuple[int, ...] = (256, 128)  # scalar head C -> 256 -> 128 -> 1
    activation: str = "mish"                 # mish | softplus | silu
    spectral_norm: bool = True
    energy_scale: str = "none"               # none | inv_sigma (E = f/sigma) | edm (E = f sqrt(sigma^2+1)/sigma)
    # none | c_in: the U-Net sees a_t / sqrt(sigma(t)^2 + 1) (EDM-style input
    # preconditioning; actions are standardized, so sigma_data = 1). Without
    # it, GroupNorm makes the network nearly scale-invariant to its input, and
    # at sigma ~ 10 the input-gradient (the score) vanishes: sampling from
    # sigma_max then never removes the initial noise. E stays a scalar
    # function of a_t, so the field stays conservative.
    input_scale: str = "none"
    # none | gaussian: E = f + |a_t|^2 / (2 (sigma(t)^2 + 1)), the exact energy
    # of unit-variance data at noise level sigma (EDM's skip connection in
    # energy form); f learns the residual. See EnergyUNet.prior_coef.
    energy_prior: str = "none"
    time_scale: float = 1000.0               # sinusoidal embedding of t * time_scale
    schedule: Schedule = field(default_factory=Schedule)
    policy: str = "energyflow"               # energyflow | diffusion
    # pooled (the paper's head; head_dims, spectral_norm, energy_scale,
    # input_scale and energy_prior apply to it) | denoiser (E = 1/2|u|^2 over
    # the DP network F, which has its own fixed c_in / c_noise preconditioning
    # and ignores those five fields); see ENERGY_HEADS
    energy_head: str = DEFAULT_ENERGY_HEAD
    # denoiser head: F's sinusoidal noise embedding sees c_noise * noise_embed_scale
    # (c_noise = ln(sigma)/4 spans 1.7 over the schedule: x100 spans ~170, about
    # DP's 100 integer steps; x1000 puts sine arguments past 1000, where float32
    # loses ~1e-4 rad and the export self-check fails at ~2e-5)
    noise_embed_scale: float = 100.0

    def __post_init__(self) -> None:
        if self.policy not in POLICY_KINDS:
            raise ValueError(f"unknown policy {self.policy!r}: want one of {', '.join(POLICY_KINDS)}")
        if self.energy_head not in ENERGY_HEADS:
            raise ValueError(f"unknown energy head {self.energy_head!r}: want one of {', '.join(ENERGY_HEADS)}")

    @property
    def step_width(self) -> int:
        """Width of one history step of ``cond``."""
        return self.state_dim + sum(im.features for im in self.images)

    @property
    def cond_dim(self) -> int:
        return self.obs_horizon * self.step_width

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "ModelConfig":
        d = dict(d)
        d["images"] = [ImageSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in im.items()})
                       for im in d.get("images", [])]
        if "schedule" in d and isinstance(d["schedule"], dict):
            d["schedule"] = Schedule(**d["schedule"])
        for k in ("down_dims", "head_dims"):
            if k in d:
                d[k] = tuple(d[k])
        known = {f.name for f in dataclasses.fields(ModelConfig)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return ModelConfig(**d)

    @staticmethod
    def from_saved(d: Dict[str, Any]) -> "ModelConfig":
        """A config written by an earlier run (checkpoint ``model_cfg``, manifest ``model``):
        like :meth:`from_dict`, but a missing ``energy_head`` means the head such
        configs always had (:data:`LEGACY_ENERGY_HEAD`), whatever today's default."""
        d = dict(d)
        d.setdefault("energy_head", LEGACY_ENERGY_HEAD)
        return ModelConfig.from_dict(d)


PAPER_SIZE = dict(down_dims=(64, 128, 256), pred_horizon=16, obs_horizon=2, action_dim=10)
TINY_SIZE = dict(down_dims=(8, 16, 32), kernel_size=5, n_groups=4, time_embed_dim=16,
                 state_hidden=32, head_dims=(32, 16))


@dataclass
class TrainConfig:
    """Optimisation settings (paper Table: AdamW 1e-4, wd 1e-6, batch 256, ...)."""

    lr: float = 1e-4
    weight_decay: float = 1e-6
    batch_size: int = 256
    warmup_steps: int = 500
    steps: int = 100_000
    grad_clip: float = 1.0
    ema_decay: float = 0.9999
    ema_power: float = 0.75
    val_fraction: float = 0.1
    val_every: int = 1000
    val_batches: int = 8
    ckpt_every: int = 5000
    log_every: int = 50
    seed: int = 0
    num_workers: int = 0
    threads: int = 2
    device: str = "auto"
    # EnergyFlow noise levels and loss weight (the diffusion baseline ignores them)
    sigma_sampling: str = "auto"             # uniform (t ~ U[0,T]) | lognormal (EDM) | auto (the head's); SIGMA_SAMPLINGS
    sigma_mean: float = -0.5                 # lognormal: mean of ln sigma (EDM's -1.2 at sigma_data 0.5)
    sigma_std: float = 1.2                   # lognormal: std of ln sigma
    loss_weighting: str = "auto"             # sigma2 (Algorithm 1) | edm: (sigma^2+1)|sigma(-dE/da) + eps|^2 | auto
    # distillation from a trained Diffusion Policy (energyflow.distill): its checkpoint,
    # or "" for plain denoising score matching
    teacher: str = ""
    teacher_shift: float = 0.0               # kappa: scene shifts c (s_i - s_j), c ~ U[0, kappa], labelled by the teacher
    teacher_shift_fraction: float = 0.5      # the fraction of each batch so shifted

    def __post_init__(self) -> None:
        if self.sigma_sampling not in SIGMA_SAMPLINGS + ("auto",):
            raise ValueError(f"unknown sigma sampling {self.sigma_sampling!r}: want one of {', '.join(SIGMA_SAMPLINGS)} or auto")
        if self.loss_weighting not in LOSS_WEIGHTINGS + ("auto",):
            raise ValueError(f"unknown loss weighting {self.loss_weighting!r}: want one of {', '.join(LOSS_WEIGHTINGS)} or auto")
        if not self.sigma_std > 0:
            raise ValueError(f"sigma_std must be > 0, got {self.sigma_std}")
        if not self.teacher_shift >= 0:
            raise ValueError(f"teacher_shift must be >= 0, got {self.teacher_shift}")
        if not 0 <= self.teacher_shift_fraction <= 1:
            raise ValueError(f"teacher_shift_fraction must be in [0, 1], got {self.teacher_shift_fraction}")

    def for_head(self, head: str) -> "TrainConfig":
        """A copy with ``auto`` noise sampling and loss weighting replaced by ``head``'s
        measured recipe (:data:`HEAD_NOISE_DEFAULTS`); explicit choices are kept."""
        if head not in HEAD_NOISE_DEFAULTS:
            raise ValueError(f"unknown energy head {head!r}: want one of {', '.join(ENERGY_HEADS)}")
        sampling, weighting = HEAD_NOISE_DEFAULTS[head]
        return dataclasses.replace(
            self,
            sigma_sampling=sampling if self.sigma_sampling == "auto" else self.sigma_sampling,
            loss_weighting=weighting if self.loss_weighting == "auto" else self.loss_weighting)

    def noise_record(self) -> Dict[str, Any]:
        """How the EnergyFlow loss drew noise levels and weighted them (manifest ``model.training``);
        call it on a config resolved with :meth:`for_head`."""
        if "auto" in (self.sigma_sampling, self.loss_weighting):
            raise ValueError("noise_record on an unresolved config: call for_head(energy_head) first")
        samp: Dict[str, Any] = {"kind": self.sigma_sampling}
        if self.sigma_sampling == "lognormal":
            samp.update(mean=self.sigma_mean, std=self.sigma_std, clip="schedule")
        rec: Dict[str, Any] = {"sigma_sampling": samp, "loss_weighting": self.loss_weighting}
        if self.teacher:
            rec["teacher"] = teacher_record(self.teacher, self.teacher_shift, self.teacher_shift_fraction)
        return rec


def load_config_file(path: str | Path) -> Dict[str, Any]:
    """Load a YAML or JSON config file into a dict with optional ``model``/``train`` sections."""
    text = Path(path).read_text()
    if str(path).endswith((".yaml", ".yml")):
        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: config must be a mapping")
    return data


def merge_train_config(base: TrainConfig, overrides: Optional[Dict[str, Any]]) -> TrainConfig:
    if not overrides:
        return base
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise ValueError(f"unknown train config keys: {sorted(unknown)}")
    return dataclasses.replace(base, **overrides)
