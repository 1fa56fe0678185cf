"""Parity fixtures for the Go runtime (docs/bundle.md, "Parity fixtures").

``python -m energyflow fixtures --out engines/testdata/parity`` writes a tiny
bundle to ``<out>/bundle/`` and the reference sampler's outputs for
``--cases`` seeds to ``<out>/cases.json``. The tiny model gets a few hundred
DSM training steps on a synthetic state-dependent dataset so that energies and
gradients are not degenerate. Everything is deterministic for a given
``--seed`` (except the manifest's ``created``/``source_commit``).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict

import numpy as np
import torch

from .bundle import read_manifest, write_bundle
from .config import ModelConfig, Schedule, TINY_SIZE
from .losses import dsm_loss
from .model import EnergyUNet
from .sampler import OrtEnergyGrad, TorchEnergyGrad, sample

FIXTURE_STEPS = 10


def tiny_config(action_dim: int = 3, state_dim: int = 5) -> ModelConfig:
    return ModelConfig(action_dim=action_dim, state_dim=state_dim, pred_horizon=16, obs_horizon=2,
                       action_horizon=8, **TINY_SIZE)


def _toy_batch(cfg: ModelConfig, n: int, gen: torch.Generator):
    """Standardized (cond, actions) with a smooth, state-dependent, bimodal action law."""
    cond = torch.randn(n, cfg.cond_dim, generator=gen)
    tt = torch.linspace(0, 1, cfg.pred_horizon).reshape(1, -1, 1)
    d = torch.arange(cfg.action_dim, dtype=torch.float32).reshape(1, 1, -1)
    phase = cond[:, :1].reshape(-1, 1, 1)
    mode = (torch.rand(n, 1, 1, generator=gen) < 0.5).float() * 2 - 1
    a = torch.sin(3.0 * tt + phase + d) * 0.8 + 0.6 * mode
    a = a + 0.05 * torch.randn(a.shape, generator=gen)
    return cond, a


def train_tiny(cfg: ModelConfig, steps: int = 120, seed: int = 0, batch: int = 32) -> EnergyUNet:
    """A few DSM steps (Adam 3e-3) so the tiny model has non-trivial weights."""
    torch.manual_seed(seed)
    model = EnergyUNet(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        cond, a = _toy_batch(cfg, batch, gen)
        loss = dsm_loss(model, a, cond, cfg.schedule, generator=gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


def make_fixtures(out: str | Path, n_cases: int = 24, seed: int = 0, action_dim: int = 3, state_dim: int = 5,
                  train_steps: int = 120, steps: int = FIXTURE_STEPS) -> Dict[str, Any]:
    """Write ``out/bundle`` and ``out/cases.json``; return a summary with torch-vs-ORT differences."""
    torch.set_num_threads(1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config(action_dim, state_dim)
    model = train_tiny(cfg, train_steps, seed)
    rng = np.random.default_rng(seed + 1234)
    a_mean = rng.uniform(-0.5, 0.5, action_dim).astype(np.float32)
    a_std = rng.uniform(0.3, 2.0, action_dim).astype(np.float32)
    s_mean = rng.uniform(-1, 1, state_dim).astype(np.float32)
    s_std = rng.uniform(0.2, 3.0, state_dim).astype(np.float32)
    bdir = out / "bundle"
    if bdir.exists():
        shutil.rmtree(bdir)
    man = write_bundle(bdir, model, "parity-tiny", a_mean, a_std, s_mean, s_std, steps=20)
    man = read_manifest(bdir)
    s_mean = np.asarray(man["obs"][0]["norm"]["mean"], np.float32)
    s_std = np.asarray(man["obs"][0]["norm"]["std"], np.float32)
    a_mean = np.asarray(man["action_norm"]["mean"], np.float32)
    a_std = np.asarray(man["action_norm"]["std"], np.float32)
    refs = np.asarray(man["reference_actions"], np.float32)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    ort_fn = OrtEnergyGrad(bdir / "energy_grad.onnx", threads=1)
    torch_fn = TorchEnergyGrad(model)
    cases = []
    max_act_diff = 0.0
    max_e_rel = 0.0
    for i in range(n_cases):
        r = np.random.default_rng(seed * 1000 + i)
        obs = (s_mean + s_std * r.standard_normal((cfg.obs_horizon, state_dim))).astype(np.float32)
        cond = ((obs - s_mean) / s_std).astype(np.float32).reshape(1, -1)
        z = r.standard_normal((1, cfg.pred_horizon, action_dim)).astype(np.float32)
        res = sample(ort_fn, cond, z, sch, steps, a_mean, a_std, refs)
        chk = sample(torch_fn, cond, z, sch, steps, a_mean, a_std, refs)
        max_act_diff = max(max_act_diff, float(np.max(np.abs(res.actions - chk.actions))))
        max_e_rel = max(max_e_rel, float(abs(res.energy[0] - chk.energy[0]) / max(abs(chk.energy[0]), 1e-6)))
        cases.append({
            "seed": i,
            "obs": {cfg.state_key: obs.astype(np.float64).tolist()},
            "cond": cond[0].astype(np.float64).tolist(),
            "noise": z[0].astype(np.float64).tolist(),
            "actions": res.actions[0].astype(np.float64).tolist(),
            "actions_std": res.actions_std[0].astype(np.float64).tolist(),
            "energy": float(res.energy[0]),
            "ref_energy_mean": float(res.ref_energy_mean[0]),
            "centered_reward": float(res.centered_reward[0]),
        })
    doc = {"steps": steps, "cases": cases}
    with open(out / "cases.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    energies = [c["energy"] for c in cases]
    return {"bundle": str(bdir), "cases": len(cases), "steps": steps,
            "energy_range": [min(energies), max(energies)],
            "torch_vs_ort_max_abs_action_diff": max_act_diff,
            "torch_vs_ort_max_rel_energy_diff": max_e_rel,
            "export_check": man["model"].get("export_check")}
