"""Parity cases for real-time chunking (the Go ``engines.Guide``).

``python -m energyflow fixtures --guided-from ../engines/testdata/parity --out
../engines/testdata/parity-guided`` reads the committed EnergyFlow fixture
(its bundle and cases), and for each case and both modes samples with a guide
through ONNX Runtime: committed actions near the case's own plan, RTC's weights
for a few delays and overlaps, strength 1 or 0.5 (and 8 for "noisy"). It writes ``out/cases.json``;
the bundle stays where it is (``"bundle"``: the path relative to ``out``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from .bundle import read_manifest
from .config import Schedule
from .sampler import Guide, OrtEnergyGrad, chunk_weights, sample


def make_guided_fixtures(parity_dir: str | Path, out: str | Path, n_cases: int = 8, seed: int = 0) -> Dict[str, Any]:
    """Write ``out/cases.json`` from ``parity_dir``'s bundle and cases; return a summary."""
    parity_dir, out = Path(parity_dir), Path(out)
    bdir = parity_dir / "bundle"
    man = read_manifest(bdir)
    base = json.loads((parity_dir / "cases.json").read_text())
    steps = int(base["steps"])
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    fn = OrtEnergyGrad(bdir / man["graphs"]["energy_grad"]["file"])
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    tp, start = int(man["pred_horizon"]), int(man["obs_horizon"]) - 1
    rng = np.random.default_rng(seed)
    cases: List[Dict[str, Any]] = []
    for i, c in enumerate(base["cases"][:n_cases]):
        cond = np.asarray(c["cond"], np.float32)[None]
        z = np.asarray(c["noise"], np.float32)[None]
        plan = np.asarray(c["actions"], np.float32)
        for mode in ("noisy", "denoised"):
            committed = (plan + rng.normal(0, 0.5, plan.shape) * std).astype(np.float32)
            delay, overlap = 1 + i % 3, tp - start - (i % 4)
            w = chunk_weights(tp, start, delay, overlap)
            strength = 1.0 if i % 2 == 0 else 0.5
            if mode == "noisy" and i % 3 == 2:
                strength = 8.0
            g = Guide(mode=mode, strength=strength, actions=committed, weights=w)
            res = sample(fn, cond, z, sch, steps, mean, std, guide=g)
            cases.append({"seed": c["seed"], "cond": c["cond"], "noise": c["noise"], "mode": mode, "strength": strength,
                          "delay": delay, "overlap": overlap, "start": start,
                          "committed": committed.astype(np.float64).tolist(), "weights": w.astype(np.float64).tolist(),
                          "actions": res.actions[0].astype(np.float64).tolist()})
    out.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(bdir, out)
    with open(out / "cases.json", "w") as f:
        json.dump({"bundle": rel, "steps": steps, "cases": cases}, f, indent=1)
    return {"cases": len(cases), "bundle": rel, "steps": steps}
