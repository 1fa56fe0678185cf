"""What the monitored energy of a bundle is made of, on held-out demonstration windows.

    .venv/bin/python -m research.ood.energy_anatomy BUNDLE DEMOS.hdf5 [--windows 256] [--steps 20]

Samples an action chunk (Algorithm 2, K steps, the reference sampler on the
exported graph) for each of ``--windows`` held-out observation windows (the
training split's validation demos, split seed 0) and splits the final energy
E(a, s, γ) into the analytic Gaussian prior |a|²/(2(σ(γ)²+1)) of the
``--energy-prior gaussian`` parameterization and the rest (the network's
residual, scaled by √(σ²+1)/σ under ``--energy-scale edm``). Prints one JSON
line: mean and standard deviation of each part and the correlation of E with
the squared action norm. research/notes/evaluation-history.md ("What the energy
measures here") quotes it for the shipped state bundles.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from energyflow.bundle import read_manifest
from energyflow.config import Schedule
from energyflow.data import Normalizer, WindowDataset, load_hdf5, split_demos
from energyflow.sampler import OrtEnergyGrad, sample


def anatomy(bundle: Path, demos_file: str, windows: int = 256, steps: int = 20, seed: int = 0) -> dict:
    man = read_manifest(bundle)
    if man.get("policy", "energyflow") != "energyflow" or any(o["kind"] == "image" for o in man["obs"]):
        raise SystemExit(f"{bundle}: energy_anatomy takes an EnergyFlow bundle with state inputs only")
    st = next(o for o in man["obs"] if o["kind"] == "state")
    demos, _ = load_hdf5(demos_file, [st["name"]], [])
    held = split_demos(demos, 0.1, 0)[1]
    norm = lambda d: Normalizer(np.asarray(d["mean"], np.float32), np.asarray(d["std"], np.float32))  # noqa: E731
    ds = WindowDataset(held, st["name"], [], man["obs_horizon"], man["pred_horizon"], man["action_horizon"],
                       norm(man["action_norm"]), norm(st["norm"]))
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(ds), size=min(windows, len(ds)), replace=False)
    b = ds.batch(idx)
    B = len(idx)
    cond = b["state"].reshape(B, -1).astype(np.float32)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    fn = OrtEnergyGrad(bundle / man["graphs"]["energy_grad"]["file"], threads=1)
    z = rng.standard_normal((B, man["pred_horizon"], man["action_dim"])).astype(np.float32)
    res = sample(fn, cond, z, sch, steps)
    a = res.actions_std.reshape(B, -1).astype(np.float64)
    sig = sch.sigma_min ** (1 - sch.gamma / sch.T) * sch.sigma_max ** (sch.gamma / sch.T)
    prior = (a ** 2).sum(1) / (2 * (sig ** 2 + 1))
    energy = res.energy.astype(np.float64)
    rest = energy - prior
    return {"bundle": str(bundle), "windows": B, "steps": steps, "sigma_gamma": sig,
            "energy_mean": energy.mean(), "energy_std": energy.std(),
            "prior_mean": prior.mean(), "prior_std": prior.std(),
            "residual_mean": rest.mean(), "residual_std": rest.std(),
            "corr_energy_sq_norm": float(np.corrcoef(energy, prior)[0, 1])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("demos")
    p.add_argument("--windows", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    print(json.dumps(anatomy(Path(a.bundle), a.demos, a.windows, a.steps, a.seed)))


if __name__ == "__main__":
    main()
