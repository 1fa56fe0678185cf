"""Diffusion Policy baseline (policy kind ``"diffusion"``, docs/bundle.md).

The paper compares EnergyFlow with Diffusion Policy (DP) "on the same 1D U-Net
backbone with the standard vector head (noise prediction, 100 training steps,
DDIM with 20 steps at inference)". This module holds everything specific to
that baseline; data, windows, normalisation, optimiser, EMA, checkpoints and
bundle plumbing are shared with EnergyFlow.

* :class:`NoiseUNet` - :class:`~energyflow.model.UNetBackbone` plus DP's vector
  head ``Conv1d(down_dims[0], D_a, 1)``: eps(a_k, cond, k) [B, T_p, D_a]. The
  timestep ``k`` (an integer 0..N-1, passed as float32 [B]) is embedded
  directly (time scale 1, ``cfg.time_scale`` is ignored).
* DDPM schedule as diffusers ``DDPMScheduler(num_train_timesteps=100,
  beta_schedule="squaredcos_cap_v2")``: :func:`betas_for_alpha_bar`,
  :func:`ddpm_alphas_cumprod` (float64).
* :func:`ddpm_loss` - MSE(eps_pred, eps), k ~ U{0..N-1},
  x_k = sqrt(ab_k) a0 + sqrt(1 - ab_k) eps.
* :func:`ddim_sample` - the reference DDIM sampler (numpy) the Go runtime is
  checked against: diffusers ``DDIMScheduler`` with eta=0,
  ``timestep_spacing="leading"``, ``set_alpha_to_one=True``, ``steps_offset=0``
  and the clipped x0 fed back into eps (diffusers' ``use_clipped_model_output``).

Arithmetic convention of the sampler (what the Go side reproduces): the
per-step scalars sqrt(ab_t), sqrt(1-ab_t), sqrt(ab_prev), sqrt(1-ab_prev) are
computed in float64 from the float64 ``alphas_cumprod`` and rounded to
float32; all tensor arithmetic is float32.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Protocol, Tuple

import numpy as np
import torch
import torch.nn as nn

from .config import ModelConfig
from .model import UNetBackbone

Tensor = torch.Tensor

NUM_TRAIN_TIMESTEPS = 100
BETA_SCHEDULE = "squaredcos_cap_v2"
PREDICTION_TYPE = "epsilon"
DDIM_STEPS = 20
#: clip_sample is the data range rounded up to a multiple of this
CLIP_QUANTUM = 0.5


# ---------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------
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


def clip_sample_range(actions_std: np.ndarray, quantum: float = CLIP_QUANTUM) -> float:
    """max |standardized action| rounded up to a multiple of ``quantum`` (the DDIM x0 clip)."""
    a = np.asarray(actions_std, np.float64)
    if a.size == 0:
        return 0.0
    m = float(np.max(np.abs(a)))
    return float(math.ceil(m / quantum - 1e-9) * quantum) if m > 0 else 0.0


def schedule_manifest(clip_sample: float, num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Dict[str, Any]:
    """The manifest's ``schedule`` block of a diffusion bundle."""
    return {"kind": "ddpm", "num_train_timesteps": int(num_timesteps), "beta_schedule": BETA_SCHEDULE,
            "prediction_type": PREDICTION_TYPE, "clip_sample": float(clip_sample),
            "alphas_cumprod": [float(v) for v in ddpm_alphas_cumprod(num_timesteps)]}


# ---------------------------------------------------------------------------
# network
# ---------------------------------------------------------------------------
class NoiseUNet(UNetBackbone):
    """Diffusion Policy's noise-prediction network on the shared U-Net backbone.

    Inputs: ``a`` [B, T_p, D_a] (noisy standardized actions), ``cond``
    [B, cond_dim], ``t`` [B] float32 holding the integer timestep k.
    Output: eps [B, T_p, D_a]. ``self.cfg`` always says ``policy="diffusion"``
    (the bundle writer picks the graph from it).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        if cfg.policy != "diffusion":
            cfg = dataclasses.replace(cfg, policy="diffusion")
        super().__init__(cfg)
        self.final_conv = nn.Conv1d(cfg.down_dims[0], cfg.action_dim, 1)

    def time_input(self, t: Tensor) -> Tensor:
        """DP embeds the integer timestep itself (time scale 1)."""
        return t

    def forward(self, a: Tensor, cond: Tensor, t: Tensor, plain: bool = False) -> Tensor:
        """eps [B, T_p, D_a]; ``plain=True`` uses only export-friendly operators (same values)."""
        g = self.global_cond(cond, t)
        x = self.features(a, g, plain=plain)
        return self.final_conv(x).transpose(1, 2)


def sample_timesteps(batch: int, generator: Optional[torch.Generator] = None, device: Any = None,
                     num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Tensor:
    """k ~ U{0..N-1} as float32 [B] (the network's ``t`` input)."""
    return torch.randint(0, num_timesteps, (batch,), generator=generator, device=device).to(torch.float32)


def ddpm_loss(model: nn.Module, a0: Tensor, cond: Tensor, k: Optional[Tensor] = None, eps: Optional[Tensor] = None,
              generator: Optional[torch.Generator] = None, num_timesteps: int = NUM_TRAIN_TIMESTEPS) -> Tensor:
    """MSE(eps_pred, eps) averaged over batch and elements (DP's epsilon objective).

    ``a0`` [B,T_p,D_a] standardized clean actions, ``cond`` [B,C], ``k`` [B]
    integer timesteps (any dtype; default U{0..N-1}), ``eps`` standard normal.
    x_k = sqrt(ab_k) a0 + sqrt(1 - ab_k) eps with the float64 schedule.
    """
    B = a0.shape[0]
    if k is None:
        k = sample_timesteps(B, generator, a0.device, num_timesteps)
    if eps is None:
        eps = torch.randn(a0.shape, device=a0.device, dtype=a0.dtype, generator=generator)
    ab = torch.as_tensor(ddpm_alphas_cumprod(num_timesteps), device=a0.device)[k.long()]
    sa = torch.sqrt(ab).to(a0.dtype).reshape(B, 1, 1)
    sb = torch.sqrt(1.0 - ab).to(a0.dtype).reshape(B, 1, 1)
    x = sa * a0 + sb * eps
    pred = model(x, cond, k.to(a0.dtype))
    return (pred - eps).pow(2).mean()


# ---------------------------------------------------------------------------
# reference DDIM sampler (numpy)
# ---------------------------------------------------------------------------
class EpsFn(Protocol):
    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        """eps [B,T_p,D_a] for float32 a [B,T_p,D_a], cond [B,C], t [B] (integer timesteps as float32)."""


class OrtEps:
    """A bundle's ``eps.onnx`` in ONNX Runtime (CPU)."""

    def __init__(self, path: str | Path, threads: int = 1) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        (eps,) = self.sess.run(["eps"], {"a_t": np.ascontiguousarray(a, np.float32),
                                         "cond": np.ascontiguousarray(cond, np.float32),
                                         "t": np.ascontiguousarray(t, np.float32)})
        return eps


class TorchEps:
    """A torch :class:`NoiseUNet` (no grad)."""

    def __init__(self, model: NoiseUNet) -> None:
        self.model = model.eval()
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype

    def __call__(self, a: np.ndarray, cond: np.ndarray, t: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            e = self.model(torch.as_tensor(a, dtype=self.dtype, device=self.device),
                           torch.as_tensor(cond, dtype=self.dtype, device=self.device),
                           torch.as_tensor(t, dtype=self.dtype, device=self.device))
        return e.cpu().numpy().astype(np.float32)


def ddim_timesteps(num_timesteps: int, steps: int) -> np.ndarray:
    """Leading spacing, steps_offset 0: (arange(S) * (N // S)) reversed, int64 [S]."""
    if not 1 <= steps <= num_timesteps:
        raise ValueError(f"DDIM steps must be in 1..{num_timesteps}, got {steps}")
    return (np.arange(steps, dtype=np.int64) * (num_timesteps // steps))[::-1].copy()


def ddim_coefficients(alphas_cumprod: np.ndarray, steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """Timesteps [S] and float32 per-step scalars [S, 4] (see :func:`ddim_sample`).

    Columns: sqrt(ab_t), sqrt(1-ab_t), sqrt(ab_prev), sqrt(1-ab_prev), each
    computed in float64 and rounded to float32; ab_prev = alphas_cumprod[t - N//S]
    or 1.0 when that index is negative (set_alpha_to_one).
    """
    ac = np.asarray(alphas_cumprod, np.float64)
    ts = ddim_timesteps(len(ac), steps)
    ratio = len(ac) // steps
    rows = []
    for t in ts:
        ab = float(ac[t])
        ab_prev = float(ac[t - ratio]) if t - ratio >= 0 else 1.0
        rows.append([math.sqrt(ab), math.sqrt(1.0 - ab), math.sqrt(ab_prev), math.sqrt(1.0 - ab_prev)])
    return ts, np.asarray(rows, np.float64).astype(np.float32)


@dataclass
class DDIMResult:
    actions: np.ndarray          # [B,T_p,D_a] un-standardized
    actions_std: np.ndarray      # [B,T_p,D_a] standardized (network space)


def ddim_sample(fn: EpsFn, cond: np.ndarray, noise: np.ndarray, alphas_cumprod: np.ndarray,
                steps: int = DDIM_STEPS, clip_sample: float = 0.0, action_mean: Optional[np.ndarray] = None,
                action_std: Optional[np.ndarray] = None) -> DDIMResult:
    """Deterministic DDIM (eta = 0) from x = z ~ N(0, I).

    ::

        for t in timesteps:                        # e.g. 95, 90, ..., 0 for N=100, S=20
            eps = eps_net(x, cond, t)
            x0  = (x - sqrt(1-ab_t) * eps) / sqrt(ab_t)
            if clip_sample > 0:
                x0  = clip(x0, -clip_sample, clip_sample)
                eps = (x - sqrt(ab_t) * x0) / sqrt(1-ab_t)     # skipped if sqrt(1-ab_t) == 0
            x = sqrt(ab_prev) * x0 + sqrt(1-ab_prev) * eps
        actions = x * std + mean

    The scalars come from :func:`ddim_coefficients` (float64, rounded to
    float32); ``x``, ``eps`` and ``x0`` are float32 and every operation is
    float32, in the order written (docs/bundle.md, "DDIM sampler").
    """
    cond = np.asarray(cond, np.float32)
    x = np.asarray(noise, np.float32).copy()
    B = x.shape[0]
    ts, co = ddim_coefficients(alphas_cumprod, steps)
    clip = np.float32(clip_sample)
    for t, (sa, sb, sp, sq) in zip(ts, co):
        eps = np.asarray(fn(x, cond, np.full((B,), np.float32(t), np.float32)), np.float32)
        x0 = ((x - sb * eps) / sa).astype(np.float32)
        if clip > 0:
            x0 = np.clip(x0, -clip, clip).astype(np.float32)
            if sb > 0:  # ab_t = 1 would give 0/0; eps is then multiplied by sqrt(1-ab_prev) = 0 anyway
                eps = ((x - sa * x0) / sb).astype(np.float32)
        x = (sp * x0 + sq * eps).astype(np.float32)
    if action_mean is not None and action_std is not None:
        actions = (x * np.asarray(action_std, np.float32) + np.asarray(action_mean, np.float32)).astype(np.float32)
    else:
        actions = x.copy()
    return DDIMResult(actions=actions, actions_std=x)


def sample_diffusion_bundle(bundle_dir: str | Path, cond: np.ndarray, noise: np.ndarray,
                            steps: Optional[int] = None, threads: int = 1) -> DDIMResult:
    """Run the reference DDIM sampler on a diffusion bundle with ONNX Runtime."""
    from .bundle import read_manifest

    man = read_manifest(bundle_dir)
    if man.get("policy") != "diffusion":
        raise ValueError(f"{bundle_dir}: policy {man.get('policy')!r} is not a diffusion bundle")
    sch = man["schedule"]
    fn = OrtEps(Path(bundle_dir) / man["graphs"]["eps"]["file"], threads=threads)
    return ddim_sample(fn, cond, noise, np.asarray(sch["alphas_cumprod"], np.float64),
                       steps or man["sampler"]["steps"], sch["clip_sample"],
                       np.asarray(man["action_norm"]["mean"], np.float32),
                       np.asarray(man["action_norm"]["std"], np.float32))
