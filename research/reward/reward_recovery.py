#!/usr/bin/env python3
"""Does EnergyFlow recover the reward? (issue #2, item 9; paper Thm 3.2, Prop 3.5)

A synthetic maximum-entropy expert pi(a|s) ∝ exp(Q(s,a)/alpha) with a known,
state-dependent, multimodal Q:

    Q(s,a)/alpha = log sum_k w_k(s) N(a; mu_k(s), sd_k^2 I)

(three modes whose centres rotate/shift with the state and whose weights
depend on the state), so the expert can be sampled exactly. An EnergyFlow
energy network (the toolkit's EnergyUNet with T_p=1, D_a=D -- one level, kernel
1 since the temporal axis has length 1, GroupNorm, FiLM, Mish, spectrally
normalised scalar head -- and the DSM loss of Algorithm 1) is trained on expert samples, for action dims D=2 and D=8. Then,
at >=10 held-out states:

* within-state Spearman correlation between -E(a,s,gamma) and Q(s,a) over 256
  test actions drawn from a widened version of the expert (so low- and
  high-Q actions are both present);
* mode coverage: 512 actions sampled with Algorithm 2 (K=20) are assigned to
  the nearest mode (Mahalanobis, within 3 sd); every mode with weight >= 0.1
  must receive at least a quarter of its expert share.

``--read-sigmas 0.01,0.1,0.3`` also reads -E at those noise levels (and ``--read-sums``
E summed over levels) of the same trained model; the default reading at gamma is unchanged.

Usage (CPU, minutes):  nice -n 10 .venv/bin/python -m research.reward.reward_recovery --steps 5000
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from energyflow.config import ModelConfig
from energyflow.config import ENERGY_HEADS
from energyflow.losses import dsm_loss, sample_t_lognormal
from energyflow.model import energy_model
from energyflow.sampler import TorchEnergyGrad, sample
from energyflow.train import EMA, lr_lambda

K_MODES = 3


class Expert:
    """Gaussian-mixture max-ent expert with state-dependent centres and weights (alpha = 1)."""

    def __init__(self, dim: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.dim = dim
        if dim == 2:
            ang = 2 * np.pi * np.arange(K_MODES) / K_MODES
            self.centres = 1.6 * np.stack([np.cos(ang), np.sin(ang)], 1)
        else:
            q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
            self.centres = 1.6 * q[:K_MODES]
        self.shift = 0.4 * rng.standard_normal((dim, 2))
        self.wproj = 1.5 * rng.standard_normal((K_MODES, 2))
        self.sd = np.array([0.25, 0.35, 0.3])

    def params(self, s: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """mu [B,K,D], w [B,K] for states s [B,2]."""
        th = 0.6 * np.pi * s[:, 0]
        c, si = np.cos(th), np.sin(th)
        cen = np.broadcast_to(self.centres, (s.shape[0],) + self.centres.shape).copy()
        # rotate the first two coordinates by a state-dependent angle, then shift
        x0, x1 = cen[..., 0].copy(), cen[..., 1].copy()
        cen[..., 0] = c[:, None] * x0 - si[:, None] * x1
        cen[..., 1] = si[:, None] * x0 + c[:, None] * x1
        mu = cen + (s @ self.shift.T)[:, None, :]
        logits = s @ self.wproj.T
        w = np.exp(logits - logits.max(1, keepdims=True))
        return mu, w / w.sum(1, keepdims=True)

    def sample(self, s: np.ndarray, rng: np.random.Generator, widen: float = 1.0) -> np.ndarray:
        mu, w = self.params(s)
        B = s.shape[0]
        k = (rng.random((B, 1)) > np.cumsum(w, 1)).sum(1).clip(0, K_MODES - 1)
        return mu[np.arange(B), k] + widen * self.sd[k][:, None] * rng.standard_normal((B, self.dim))

    def Q(self, s: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Q(s,a)/alpha = log pi(a|s) (exact), s [B,2], a [B,D]."""
        mu, w = self.params(s)
        d2 = ((a[:, None, :] - mu) ** 2).sum(-1) / self.sd[None] ** 2
        logn = -0.5 * d2 - self.dim * np.log(self.sd[None]) - 0.5 * self.dim * np.log(2 * np.pi)
        m = (np.log(w) + logn)
        mx = m.max(1, keepdims=True)
        return (mx + np.log(np.exp(m - mx).sum(1, keepdims=True)))[:, 0]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx = np.argsort(np.argsort(x)).astype(np.float64)
    ry = np.argsort(np.argsort(y)).astype(np.float64)
    rx -= rx.mean()
    ry -= ry.mean()
    return float((rx * ry).sum() / math.sqrt((rx ** 2).sum() * (ry ** 2).sum()))


def train(dim: int, steps: int, batch: int, lr: float, seed: int, energy_scale: str, width: int = 128,
          log_every: int = 500, head: str = "pooled", sigma_mean: float = -0.5, sigma_std: float = 1.2
          ) -> Tuple[torch.nn.Module, Expert, np.ndarray, np.ndarray, List[float], float]:
    """Train on expert samples. ``head`` pooled: the paper's recipe (t ~ U[0,T], w = 1);
    denoiser: the quadratic denoiser energy with the toolkit's defaults for it
    (ln sigma ~ N(sigma_mean, sigma_std^2), by default N(-0.5, 1.2^2), EDM
    weighting), as ``--energy-head denoiser`` trains it."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ex = Expert(dim, seed)
    s_big = rng.uniform(-1, 1, (20000, 2))
    a_big = ex.sample(s_big, rng)
    mean, std = a_big.mean(0), a_big.std(0)
    cfg = ModelConfig(action_dim=dim, state_dim=2, obs_horizon=1, pred_horizon=1, action_horizon=1,
                      down_dims=(width,), kernel_size=1, n_groups=8, time_embed_dim=64, state_hidden=128,
                      head_dims=(256, 128),
                      energy_scale=energy_scale, energy_head=head)
    model = energy_model(cfg)
    gen = torch.Generator().manual_seed(seed)
    ema = EMA(model, 0.999, 0.75)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(min(500, steps // 10), steps))
    losses = []
    t0 = time.time()
    for it in range(steps):
        s = rng.uniform(-1, 1, (batch, 2))
        a = (ex.sample(s, rng) - mean) / std
        at = torch.as_tensor(a, dtype=torch.float32).reshape(batch, 1, dim)
        st = torch.as_tensor(s, dtype=torch.float32)
        if head == "denoiser":
            t = sample_t_lognormal(batch, cfg.schedule, sigma_mean, sigma_std, gen)
            loss = dsm_loss(model, at, st, cfg.schedule, t=t, generator=gen, weighting="edm")
        else:
            loss = dsm_loss(model, at, st, cfg.schedule)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema.update(model)
        losses.append(float(loss.detach()))
        if log_every and (it + 1) % log_every == 0:
            print(f"  D={dim} step {it + 1}/{steps} loss {np.mean(losses[-log_every:]):.4f} "
                  f"({(it + 1) / (time.time() - t0):.1f} it/s)", flush=True)
    return ema.model.eval(), ex, mean, std, losses, time.time() - t0


def sigma_to_t(schedule, sigma: float) -> float:
    """t of the geometric schedule at noise level ``sigma`` (inverse of ``Schedule.sigma``),
    clipped to [0, T]; both heads take t and map it to sigma(t) this way."""
    lo, hi = math.log(schedule.sigma_min), math.log(schedule.sigma_max)
    return float(min(max(schedule.T * (math.log(sigma) - lo) / (hi - lo), 0.0), schedule.T))


def read_energies(model: torch.nn.Module, an: np.ndarray, S: np.ndarray, sigmas: List[float]) -> Dict[float, np.ndarray]:
    """E(a, s, sigma) (float64) for each reading sigma; forward only, no randomness consumed."""
    sched = model.cfg.schedule
    at = torch.as_tensor(an)
    st = torch.as_tensor(S.astype(np.float32))
    out = {}
    with torch.no_grad():
        for sig in sigmas:
            t = torch.full((an.shape[0],), sigma_to_t(sched, sig), dtype=torch.float32)
            out[sig] = model(at, st, t).double().numpy()
    return out


def evaluate(model: torch.nn.Module, ex: Expert, mean: np.ndarray, std: np.ndarray, n_states: int, seed: int,
             read_sigmas: Optional[List[float]] = None, read_sums: Optional[List[List[float]]] = None
             ) -> List[Dict]:
    """Per-state rows. With ``read_sigmas`` / ``read_sums`` each row also holds
    ``spearman_at`` {sigma: rho} and ``spearman_sum`` {"s1+s2": rho} (E summed over those
    levels); the default reading at gamma and the sampled coverage are unchanged."""
    rng = np.random.default_rng(seed + 999)
    dim = ex.dim
    fn = TorchEnergyGrad(model)
    gamma = model.cfg.schedule.gamma
    read_sigmas = list(read_sigmas or [])
    read_sums = list(read_sums or [])
    all_sigmas = sorted(set(read_sigmas) | {x for grp in read_sums for x in grp})
    rows = []
    states = rng.uniform(-0.9, 0.9, (n_states, 2))
    for s in states:
        S = np.repeat(s[None], 256, 0)
        a = ex.sample(S, rng, widen=1.6)
        q = ex.Q(S, a)
        an = ((a - mean) / std).astype(np.float32).reshape(256, 1, dim)
        _, e = fn(an, S.astype(np.float32), np.full(256, gamma, np.float32))
        rho = spearman(-e.astype(np.float64), q)
        es = read_energies(model, an, S, all_sigmas) if all_sigmas else {}
        rho_at = {str(sig): spearman(-es[sig], q) for sig in read_sigmas}
        rho_sum = {"+".join(f"{x:g}" for x in grp): spearman(-sum(es[x] for x in grp), q) for grp in read_sums}
        # mode coverage with Algorithm 2
        N = 512
        z = rng.standard_normal((N, 1, dim)).astype(np.float32)
        res = sample(fn, np.repeat(s[None], N, 0).astype(np.float32), z, model.cfg.schedule, 20)
        acts = res.actions_std.reshape(N, dim) * std + mean
        mu, w = ex.params(s[None])
        d = np.sqrt(((acts[:, None, :] - mu[0][None]) ** 2).sum(-1)) / ex.sd[None] / math.sqrt(dim)
        nearest = d.argmin(1)
        ok = d[np.arange(N), nearest] < 3.0
        frac = np.array([(ok & (nearest == k)).mean() for k in range(K_MODES)])
        covered = all(frac[k] >= 0.25 * w[0, k] for k in range(K_MODES) if w[0, k] >= 0.1)
        rows.append({"state": s.round(3).tolist(), "spearman": rho, "weights": w[0].round(3).tolist(),
                     "sample_frac": frac.round(3).tolist(), "on_mode": float(ok.mean()), "covers_all": bool(covered)})
        if all_sigmas:
            rows[-1]["spearman_at"] = rho_at
            rows[-1]["spearman_sum"] = rho_sum
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[2, 8])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--states", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--energy-scale", default="none", choices=["none", "inv_sigma"])
    p.add_argument("--width", type=int, default=128, help="U-Net channel width")
    p.add_argument("--energy-head", default="pooled", choices=list(ENERGY_HEADS),
                   help="pooled: the paper's head and recipe; denoiser: the quadratic denoiser energy "
                        "(log-normal sigma, EDM weighting)")
    p.add_argument("--sigma-mean", type=float, default=-0.5,
                   help="denoiser head: mean of ln sigma in training (the toolkit's default -0.5)")
    p.add_argument("--sigma-std", type=float, default=1.2,
                   help="denoiser head: std of ln sigma in training (the toolkit's default 1.2)")
    p.add_argument("--read-sigmas", default="",
                   help="also read E at these noise levels (comma-separated sigmas, mapped to the schedule's t) "
                        "and print Spearman(-E, Q) mean/min per level, e.g. 0.01,0.05,0.1,0.2,0.5,1,2; "
                        "the model is trained once and read at every level")
    p.add_argument("--read-sums", default="",
                   help="also read the sum of E over groups of levels: groups separated by commas, levels "
                        "in a group by '+', e.g. 0.05+0.1+0.2,0.1+0.2+0.5")
    p.add_argument("--json", help="write the rows to this file")
    a = p.parse_args()
    read_sigmas = [float(x) for x in a.read_sigmas.split(",") if x.strip()]
    read_sums = [[float(x) for x in g.split("+")] for g in a.read_sums.split(",") if g.strip()]
    torch.set_num_threads(a.threads)
    out = {}
    for dim in a.dims:
        model, ex, mean, std, losses, secs = train(dim, a.steps, a.batch, a.lr, a.seed, a.energy_scale, a.width,
                                                     head=a.energy_head, sigma_mean=a.sigma_mean,
                                                     sigma_std=a.sigma_std)
        rows = evaluate(model, ex, mean, std, a.states, a.seed, read_sigmas, read_sums)
        out[dim] = {"rows": rows, "train_seconds": secs, "final_loss": float(np.mean(losses[-200:]))}
    print()
    law = f" ln sigma ~ N({a.sigma_mean:g}, {a.sigma_std:g}^2)" if a.energy_head == "denoiser" else ""
    print(f"head={a.energy_head}{law} steps={a.steps} batch={a.batch} lr={a.lr} width={a.width} energy_scale={a.energy_scale} "
          f"(gamma=1e-3, K=20)")
    print("| D | state | weights w_k(s) | Spearman(-E, Q) | sample share per mode | on-mode | all modes |")
    print("|---|---|---|---|---|---|---|")
    for dim, r in out.items():
        for row in r["rows"]:
            print(f"| {dim} | {row['state']} | {row['weights']} | {row['spearman']:.3f} | {row['sample_frac']} "
                  f"| {row['on_mode']:.2f} | {'yes' if row['covers_all'] else 'NO'} |")
    print()
    for dim, r in out.items():
        rho = [row["spearman"] for row in r["rows"]]
        cov = [row["covers_all"] for row in r["rows"]]
        print(f"D={dim}: Spearman mean {np.mean(rho):.3f} min {np.min(rho):.3f} median {np.median(rho):.3f}; "
              f"states with every mode covered {sum(cov)}/{len(cov)}; final DSM loss {r['final_loss']:.4f}; "
              f"train {r['train_seconds']:.0f}s")
    if read_sigmas or read_sums:
        print()
        print(f"Spearman(-E, Q) per reading (head={a.energy_head}, steps={a.steps}; the default reading is at gamma)")
        print("| D | reading | Spearman mean | min | median |")
        print("|---|---|---|---|---|")
        for dim, r in out.items():
            keys = [("spearman_at", str(sig), f"sigma={sig:g}") for sig in read_sigmas]
            keys += [("spearman_sum", "+".join(f"{x:g}" for x in g), "sum E at sigma=" + "+".join(f"{x:g}" for x in g))
                     for g in read_sums]
            for field, key, label in keys:
                rho = [row[field][key] for row in r["rows"]]
                print(f"| {dim} | {label} | {np.mean(rho):.3f} | {np.min(rho):.3f} | {np.median(rho):.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({str(k): v for k, v in out.items()}, indent=1))


if __name__ == "__main__":
    main()
