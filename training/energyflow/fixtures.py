"""Parity fixtures for the Go runtime (docs/bundle.md, "Parity fixtures").

``python -m energyflow fixtures --out engines/testdata/parity`` writes a tiny
bundle to ``<out>/bundle/`` and the reference sampler's outputs for
``--cases`` seeds to ``<out>/cases.json``. The tiny model gets a few hundred
DSM training steps on a synthetic state-dependent dataset so that energies and
gradients are not degenerate. Everything is deterministic for a given
``--seed`` (except the manifest's ``created``/``source_commit``).

``--policy diffusion`` (``--out engines/testdata/parity-diffusion``) does the
same for the Diffusion Policy baseline: a tiny NoiseUNet trained with the DDPM
loss on the same toy data, and DDIM reference cases (no energies).

``--energy-head denoiser`` (``--out engines/testdata/parity-denoiser``): the
same EnergyFlow cases with the denoiser energy head (E = 1/2 |u|^2 over the DP
network F); the Go sampler runs it unchanged.

``--state-term`` (``--out engines/testdata/parity-state``): the bundle also
carries a tiny state term (:mod:`energyflow.state_term`, a 32-32 MLP over 4
noise levels, a few hundred DSM steps on the synthetic cond, the reading's
mean/std on held-out synthetic cond): ``state_energy.onnx``, the manifest's
``state_energy`` block, and each case's ``state_energy`` of its cond (ONNX
Runtime, cross-checked against torch in float64). The point is parity, not
a useful detector.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from .bundle import read_manifest, write_manifest
from .config import TINY_SIZE, ModelConfig, Schedule
from .ddim import OrtEps, ddim_coefficients, ddim_sample
from .diffusion import NoiseUNet, TorchEps, clip_sample_range, ddpm_loss
from .export import write_bundle
from .graphs import ort_session
from .losses import dsm_loss
from .model import energy_model
from .sampler import OrtEnergyGrad, TorchEnergyGrad, sample
from .state_term import (GRAPH_FILE, StateEnergyReading, StateTermConfig, export_state_energy, fit_reading,
                         manifest_block, read, score_calibration, sigma_grid, train_state_term)

FIXTURE_STEPS = 10
#: defaults per policy kind: (sampler steps in the cases, training steps).
#: The tiny NoiseUNet needs ~1000 steps before its DDIM samples stop
#: saturating at clip_sample (after 300, ~40% of the final actions sit on the
#: clip bound, where they are insensitive to eps and so to parity errors).
FIXTURE_DEFAULTS = {"energyflow": (FIXTURE_STEPS, 120), "diffusion": (20, 1000)}


def tiny_config(action_dim: int = 3, state_dim: int = 5, policy: str = "energyflow",
                energy_head: str = "pooled") -> ModelConfig:
    return ModelConfig(action_dim=action_dim, state_dim=state_dim, pred_horizon=16, obs_horizon=2,
                       action_horizon=8, policy=policy, energy_head=energy_head, **TINY_SIZE)


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


def train_tiny(cfg: ModelConfig, steps: int = 120, seed: int = 0, batch: int = 32) -> torch.nn.Module:
    """A few training steps (Adam 3e-3) so the tiny model has non-trivial weights.

    The energy network of ``cfg.energy_head`` with the DSM loss, or NoiseUNet
    with the DDPM loss when ``cfg.policy == "diffusion"``.
    """
    torch.manual_seed(seed)
    diffusion = cfg.policy == "diffusion"
    model = NoiseUNet(cfg) if diffusion else energy_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        cond, a = _toy_batch(cfg, batch, gen)
        if diffusion:
            loss = ddpm_loss(model, a, cond, generator=gen)
        else:
            loss = dsm_loss(model, a, cond, cfg.schedule, generator=gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


def _fixture_norms(seed: int, action_dim: int, state_dim: int) -> Tuple[np.ndarray, ...]:
    """Arbitrary but fixed action/state normalizers (a_mean, a_std, s_mean, s_std)."""
    rng = np.random.default_rng(seed + 1234)
    a_mean = rng.uniform(-0.5, 0.5, action_dim).astype(np.float32)
    a_std = rng.uniform(0.3, 2.0, action_dim).astype(np.float32)
    s_mean = rng.uniform(-1, 1, state_dim).astype(np.float32)
    s_std = rng.uniform(0.2, 3.0, state_dim).astype(np.float32)
    return a_mean, a_std, s_mean, s_std


def _manifest_norms(man: Dict[str, Any]) -> Tuple[np.ndarray, ...]:
    """(a_mean, a_std, s_mean, s_std) as written (float32-rounded) in a manifest."""
    return (np.asarray(man["action_norm"]["mean"], np.float32), np.asarray(man["action_norm"]["std"], np.float32),
            np.asarray(man["obs"][0]["norm"]["mean"], np.float32), np.asarray(man["obs"][0]["norm"]["std"], np.float32))


def _case_inputs(cfg: ModelConfig, seed: int, i: int, s_mean: np.ndarray, s_std: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw obs history [T_o,D_s], its cond [1,C] and the noise z [1,T_p,D_a] of case ``i``."""
    r = np.random.default_rng(seed * 1000 + i)
    obs = (s_mean + s_std * r.standard_normal((cfg.obs_horizon, cfg.state_dim))).astype(np.float32)
    cond = ((obs - s_mean) / s_std).astype(np.float32).reshape(1, -1)
    z = r.standard_normal((1, cfg.pred_horizon, cfg.action_dim)).astype(np.float32)
    return obs, cond, z


#: the fixture's state term: small, so the committed graph stays small
FIXTURE_STATE_TERM = dict(hidden=(32, 32), sigmas=4, steps=300, batch_size=64, warmup_steps=20)


def add_state_term(bdir: Path, man: Dict[str, Any], seed: int = 0,
                   steps: Optional[int] = None) -> StateEnergyReading:
    """Train a tiny state term on synthetic standard-normal cond, export it into
    ``bdir`` with its manifest block and return the reading."""
    kw = dict(FIXTURE_STATE_TERM)
    if steps is not None:
        kw["steps"] = steps
    cfg = StateTermConfig(seed=seed, **kw)
    gen = torch.Generator().manual_seed(seed + 7)
    c = int(man["cond_dim"])
    train = torch.randn(2048, c, generator=gen).numpy()
    held = torch.randn(512, c, generator=gen).numpy()
    net, rec = train_state_term(train, cfg)
    reading = fit_reading(net, sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max), held)
    check = export_state_energy(reading, bdir / GRAPH_FILE)
    train_rec = {"steps": cfg.steps, "seed": cfg.seed, "batch_size": cfg.batch_size, "data": "synthetic N(0, I) cond",
                 "samples": len(train), "held_out_samples": len(held), **rec}
    man["state_energy"] = manifest_block(reading, cfg, train_rec, score_calibration(read(reading, held)), check)
    write_manifest(bdir, man)
    return reading


class _StateEnergyRef:
    """state_energy of cond rows on ONNX Runtime (the reference) and torch float64 (the cross-check)."""

    def __init__(self, bdir: Path, man: Dict[str, Any], reading: StateEnergyReading) -> None:
        self.sess = ort_session(bdir / man["state_energy"]["graph"], threads=1)
        self.ref = copy.deepcopy(reading).to("cpu", torch.float64).eval()

    def __call__(self, cond: np.ndarray) -> Tuple[float, float]:
        (y,) = self.sess.run(["state_energy"], {"cond": np.asarray(cond, np.float32)})
        with torch.no_grad():
            y64 = self.ref(torch.from_numpy(np.asarray(cond, np.float32)).double()).numpy()
        return float(y[0]), float(y64[0])


def _write_cases(out: Path, steps: int, cases: List[Dict[str, Any]]) -> None:
    with open(out / "cases.json", "w") as f:
        json.dump({"steps": steps, "cases": cases}, f, indent=1)
        f.write("\n")


def make_fixtures(out: str | Path, n_cases: int = 24, seed: int = 0, action_dim: int = 3, state_dim: int = 5,
                  train_steps: Optional[int] = None, steps: Optional[int] = None,
                  policy: str = "energyflow", energy_head: str = "pooled", state_term: bool = False,
                  state_term_steps: Optional[int] = None) -> Dict[str, Any]:
    """Write ``out/bundle`` and ``out/cases.json``; return a summary with torch-vs-ORT differences.

    ``steps``/``train_steps`` default per policy kind (:data:`FIXTURE_DEFAULTS`);
    ``energy_head`` picks the EnergyFlow head (the committed ``parity`` fixtures
    use ``pooled``, ``parity-denoiser`` uses ``denoiser``). ``state_term``
    adds a tiny state term to an energyflow bundle and ``state_energy`` to
    every case (``parity-state``; ``state_term_steps`` overrides its
    training steps).
    """
    torch.set_num_threads(1)
    if policy not in FIXTURE_DEFAULTS:
        raise ValueError(f"unknown policy {policy!r}")
    d_steps, d_train = FIXTURE_DEFAULTS[policy]
    steps = d_steps if steps is None else steps
    train_steps = d_train if train_steps is None else train_steps
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config(action_dim, state_dim, policy, energy_head)
    model = train_tiny(cfg, train_steps, seed)
    bdir = out / "bundle"
    if bdir.exists():
        shutil.rmtree(bdir)
    if policy == "diffusion":
        if state_term:
            raise ValueError("--state-term: the fixture adds the state term to an energyflow bundle only")
        return _diffusion_cases(out, bdir, cfg, model, n_cases, seed, steps)
    a_mean, a_std, s_mean, s_std = _fixture_norms(seed, action_dim, state_dim)
    name = "parity-tiny" if energy_head == "pooled" else f"parity-{energy_head}-tiny"
    if state_term:
        name = name.replace("-tiny", "-state-tiny")
    man = write_bundle(bdir, model, name, a_mean, a_std, s_mean, s_std, steps=20)
    man = read_manifest(bdir)
    state_ref = None
    if state_term:
        state_ref = _StateEnergyRef(bdir, man, add_state_term(bdir, man, seed, state_term_steps))
        man = read_manifest(bdir)
    max_se_rel = 0.0
    a_mean, a_std, s_mean, s_std = _manifest_norms(man)
    refs = np.asarray(man["reference_actions"], np.float32)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    ort_fn = OrtEnergyGrad(bdir / "energy_grad.onnx", threads=1)
    torch_fn = TorchEnergyGrad(model)
    cases = []
    max_act_diff = 0.0
    max_e_rel = 0.0
    for i in range(n_cases):
        obs, cond, z = _case_inputs(cfg, seed, i, s_mean, s_std)
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
        if state_ref is not None:
            se, se64 = state_ref(cond)
            max_se_rel = max(max_se_rel, abs(se - se64) / max(abs(se64), 1e-6))
            cases[-1]["state_energy"] = se
    _write_cases(out, steps, cases)
    energies = [c["energy"] for c in cases]
    summary = {"bundle": str(bdir), "energy_head": energy_head, "cases": len(cases), "steps": steps,
               "energy_range": [min(energies), max(energies)],
               "torch_vs_ort_max_abs_action_diff": max_act_diff,
               "torch_vs_ort_max_rel_energy_diff": max_e_rel,
               "export_check": man["model"].get("export_check")}
    if state_ref is not None:
        se = [c["state_energy"] for c in cases]
        summary.update({"state_energy_range": [min(se), max(se)], "torch_vs_ort_max_rel_state_energy_diff": max_se_rel,
                        "state_energy_export_check": man["state_energy"]["export_check"]})
    return summary


def _diffusion_cases(out: Path, bdir: Path, cfg: ModelConfig, model: torch.nn.Module, n_cases: int, seed: int,
                     steps: int) -> Dict[str, Any]:
    """Diffusion bundle + DDIM cases (ONNX Runtime, cross-checked against torch)."""
    # clip to the toy data's range, as training does with its windows
    _, toy = _toy_batch(cfg, 4096, torch.Generator().manual_seed(seed + 99))
    clip = clip_sample_range(toy.numpy())
    a_mean, a_std, s_mean, s_std = _fixture_norms(seed, cfg.action_dim, cfg.state_dim)
    write_bundle(bdir, model, "parity-diffusion-tiny", a_mean, a_std, s_mean, s_std, steps=20, clip_sample=clip)
    man = read_manifest(bdir)
    a_mean, a_std, s_mean, s_std = _manifest_norms(man)
    ac = np.asarray(man["schedule"]["alphas_cumprod"], np.float64)
    ort_fn, torch_fn = OrtEps(bdir / man["graphs"]["eps"]["file"], threads=1), TorchEps(model)
    cases = []
    max_act_diff, clipped = 0.0, 0
    for i in range(n_cases):
        obs, cond, z = _case_inputs(cfg, seed, i, s_mean, s_std)
        res = ddim_sample(ort_fn, cond, z, ac, steps, clip, a_mean, a_std)
        chk = ddim_sample(torch_fn, cond, z, ac, steps, clip, a_mean, a_std)
        max_act_diff = max(max_act_diff, float(np.max(np.abs(res.actions - chk.actions))))
        clipped += int(_first_step_clipped(ort_fn, cond, z, ac, steps, clip))
        cases.append({
            "seed": i,
            "obs": {cfg.state_key: obs.astype(np.float64).tolist()},
            "cond": cond[0].astype(np.float64).tolist(),
            "noise": z[0].astype(np.float64).tolist(),
            "actions": res.actions[0].astype(np.float64).tolist(),
            "actions_std": res.actions_std[0].astype(np.float64).tolist(),
        })
    _write_cases(out, steps, cases)
    return {"bundle": str(bdir), "policy": "diffusion", "cases": len(cases), "steps": steps, "clip_sample": clip,
            "cases_clipped_at_first_step": clipped,
            "torch_vs_ort_max_abs_action_diff": max_act_diff,
            "export_check": man["model"].get("export_check")}


def _first_step_clipped(fn, cond: np.ndarray, z: np.ndarray, alphas_cumprod: np.ndarray, steps: int,
                        clip: float) -> bool:
    """Whether the first DDIM step's x0 prediction leaves [-clip, clip] (the fixture exercises clipping)."""
    if clip <= 0:
        return False
    ts, co = ddim_coefficients(alphas_cumprod, steps)
    eps = fn(z, cond, np.full((z.shape[0],), np.float32(ts[0]), np.float32))
    x0 = (z - co[0, 1] * eps) / co[0, 0]
    return bool(np.any(np.abs(x0) > clip))
