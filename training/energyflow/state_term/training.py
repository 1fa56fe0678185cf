"""Training the state term: g by denoising score matching, the RND predictor,
and the whole fit on demonstrations (:mod:`energyflow.state_term`)."""
from __future__ import annotations

import math
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from ..calibrate import score_stats
from ..data import split_demos
from .data import step_conds
from .network import StateEnergyNet, StateTermConfig, StateTermError, dsm_loss, sigma_grid
from .reading import RNDScore, StateEnergyReading, TransitionScore, fit_reading, fit_transition, read

# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------
def train_state_term(train_cond: np.ndarray, cfg: StateTermConfig, val_cond: Optional[np.ndarray] = None,
                     log_every: int = 0) -> Tuple[StateEnergyNet, Dict[str, Any]]:
    """DSM on every row of ``train_cond`` (AdamW, cosine decay after a linear warm-up).

    Returns the network (eval mode) and a record: final training loss (mean
    of the last 100 steps), validation loss per σ on ``val_cond`` with fixed
    noise, seconds.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    x = torch.from_numpy(np.asarray(train_cond, np.float32))
    n, d = x.shape
    if n == 0:
        raise StateTermError("no training steps")
    net = StateEnergyNet(d, cfg.hidden, cfg.noise_freqs)
    sig = torch.from_numpy(sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    warm = max(1, min(cfg.warmup_steps, cfg.steps // 10))

    def lr_at(k: int) -> float:
        if k < warm:
            return cfg.lr * (k + 1) / warm
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * (k - warm) / max(1, cfg.steps - warm)))

    t0 = time.time()
    recent: List[float] = []
    net.train()
    for k in range(cfg.steps):
        idx = torch.randint(0, n, (cfg.batch_size,), generator=gen)
        s = sig[torch.randint(0, len(sig), (cfg.batch_size,), generator=gen)]
        eps = torch.randn(cfg.batch_size, d, generator=gen)
        loss = dsm_loss(net, x[idx], s, eps).mean()
        for g in opt.param_groups:
            g["lr"] = lr_at(k)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent = (recent + [loss.item()])[-100:]
        if log_every and (k + 1) % log_every == 0:
            print(f"state-term: step {k + 1}/{cfg.steps} loss {np.mean(recent):.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    net.eval()
    rec: Dict[str, Any] = {"loss": float(np.mean(recent)), "seconds": round(time.time() - t0, 1)}
    if val_cond is not None and len(val_cond):
        rec["val_loss_per_sigma"] = val_loss_per_sigma(net, val_cond, sig.numpy(), seed=cfg.seed)
    return net, rec


def val_loss_per_sigma(net: StateEnergyNet, cond: np.ndarray, sigmas: Sequence[float], seed: int = 0,
                       n: int = 2048) -> List[float]:
    """The DSM loss per σ on up to ``n`` rows of ``cond`` with fixed noise (1 = no better than ∇g = 0)."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.from_numpy(np.asarray(cond, np.float32))
    if len(x) > n:
        x = x[torch.randperm(len(x), generator=gen)[:n]]
    eps = torch.randn(x.shape, generator=gen)
    out = []
    for s in sigmas:
        out.append(float(dsm_loss(net, x, torch.full((len(x),), float(s)), eps).mean().detach()))
    return out


def train_rnd(cond: np.ndarray, steps: int = 3000, seed: int = 0, batch_size: int = 256,
              lr: float = 1e-3) -> Tuple[RNDScore, Dict[str, Any]]:
    """Fit the RND predictor on every row of ``cond`` (AdamW, cosine decay)."""
    torch.manual_seed(seed)
    x = torch.from_numpy(np.asarray(cond, np.float32))
    if len(x) == 0:
        raise StateTermError("no training steps for RND")
    m = RNDScore(x.shape[1])
    opt = torch.optim.AdamW(m.predictor.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps))
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    recent: List[float] = []
    for _ in range(steps):
        loss = m(x[torch.randint(0, len(x), (batch_size,), generator=gen)]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        recent = (recent + [loss.item()])[-100:]
    m.eval()
    return m, {"steps": steps, "seed": seed, "batch_size": batch_size, "lr": lr,
               "loss": float(np.mean(recent)) if recent else None, "seconds": round(time.time() - t0, 1)}


def score_calibration(scores: Sequence[float]) -> Dict[str, Any]:
    """Held-out statistics of state_energy: mean, std, quantiles 50/90/99/99.9 (as ``calibrate``), max, n."""
    a = np.asarray(scores, np.float64)
    return {**score_stats(a), "max": float(a.max()), "n": int(a.size)}


def fit_state_term(man: Dict[str, Any], demos: Sequence, cfg: StateTermConfig, val_fraction: float = 0.1,
                   split_seed: int = 0, log_every: int = 0,
                   rollouts: Sequence = ()) -> Tuple[StateEnergyReading, Dict[str, Any], Dict[str, Any], np.ndarray]:
    """Train g on every step of the training demos, fit the reading on every
    step of the held-out ones (split by demo as the toolkit's ``split_demos``).
    ``rollouts`` (the policy's own successful episodes, :func:`energyflow.data.load_rollouts`)
    are split the same way on their own, so the held-out steps the reading
    and the calibration are fitted on hold fresh rollouts in the same
    proportion as the training steps. Returns the reading, the ``train``
    record, the held-out ``calibration`` and the held-out state energies."""
    train_demos, held = split_demos(demos, val_fraction, split_seed)
    if not held:
        raise StateTermError(f"no held-out demos with --val-fraction {val_fraction} of {len(demos)} demos: "
                             "the reading's mean/std need held-out steps")
    n_demos = (len(train_demos), len(held))
    if rollouts:
        r_train, r_held = split_demos(rollouts, val_fraction, split_seed)
        train_demos, held = train_demos + r_train, held + r_held
    n_rollouts = (len(train_demos) - n_demos[0], len(held) - n_demos[1])
    tr, _ = step_conds(train_demos, man)
    va, _ = step_conds(held, man)
    net, rec = train_state_term(tr, cfg, va, log_every=log_every)
    frames = int(man["obs_horizon"])
    extras: Dict[str, nn.Module] = {}
    if cfg.transition and frames >= 2:
        extras["transition"] = TransitionScore(*fit_transition(tr, frames, cfg.transition_ridge,
                                                               cfg.transition_sd_floor))
        rec["transition"] = {"frames": frames, "fit_samples": int(len(tr))}
    if cfg.rnd_steps > 0:
        extras["rnd"], rec["rnd"] = train_rnd(tr, cfg.rnd_steps, cfg.seed)
    reading = fit_reading(net, sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max), va, extras)
    scores = read(reading, va)
    train_rec = {"steps": cfg.steps, "seed": cfg.seed, "batch_size": cfg.batch_size, "lr": cfg.lr,
                 "weight_decay": cfg.weight_decay, "val_fraction": val_fraction, "split_seed": split_seed,
                 "demos": n_demos[0], "samples": int(len(tr)), "held_out_demos": n_demos[1],
                 "held_out_samples": int(len(va)), **rec}
    if rollouts:
        train_rec["rollouts"] = n_rollouts[0]
        train_rec["held_out_rollouts"] = n_rollouts[1]
    return reading, train_rec, score_calibration(scores), scores
