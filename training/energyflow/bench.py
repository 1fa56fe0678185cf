"""Timing of the reference sampler (K Euler steps + final energy), median ms as JSON.

``python -m energyflow bench --bundle DIR [--backend torch|ort] [--steps 20] [--batch 1] [--threads 2]``
or ``python -m energyflow.bench --bundle DIR`` or, from Python::

    from energyflow.bench import bench_bundle
    bench_bundle("path/to/bundle", steps=20, batch=1, threads=2)  # -> {"median_ms": ..., ...}

The torch backend rebuilds the architecture from the manifest's ``model``
block, copies whatever weights it finds by name in the ONNX initializers
(timing does not depend on them; ``weights_loaded`` in the result says how
many were found), and runs the autograd sampler (what a Python deployment
would do). The ort backend runs ``energy_grad.onnx``.

Diffusion bundles (``policy: diffusion``) time the DDIM reference sampler
instead (``--steps`` = DDIM steps S; NoiseUNet in torch, or ``eps.onnx``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from .bundle import model_config_from_manifest, read_manifest
from .compact import FP16_SUFFIX
from .config import Schedule
from .ddim import OrtEps, ddim_sample
from .diffusion import NoiseUNet, TorchEps
from .model import bake_spectral_norm, energy_model
from .sampler import OrtEnergyGrad, TorchEnergyGrad, sample


def torch_model_from_bundle(bundle: str | Path):
    """Rebuild the network from the manifest and copy the weights out of its graph.

    The energy network (either head) from ``energy_grad.onnx``, or NoiseUNet from ``eps.onnx`` for a
    diffusion bundle.
    """
    man = read_manifest(bundle)
    cfg = model_config_from_manifest(man)
    if cfg.policy == "diffusion":
        m, graph = NoiseUNet(cfg), "eps"
    else:
        m, graph = bake_spectral_norm(energy_model(cfg)), "energy_grad"
    g = onnx.load(str(Path(bundle) / man["graphs"][graph]["file"]))
    inits = {i.name: numpy_helper.to_array(i) for i in g.graph.initializer}
    sd = m.state_dict()
    missing = []
    new = {}
    for k, v in sd.items():
        name = "model." + k
        if name not in inits:  # a compacted bundle stores its large weights in half precision
            name += FP16_SUFFIX
        if name in inits and inits[name].shape == tuple(v.shape):
            new[k] = torch.from_numpy(inits[name].astype(np.float32))
        else:
            missing.append(k)
    m.load_state_dict(new, strict=False)
    for p in m.parameters():  # inference only: no weight-gradient bookkeeping
        p.requires_grad_(False)
    m.weights_loaded = (len(new), len(sd))  # type: ignore[attr-defined]
    return m.eval(), man


def bench_bundle(bundle: str | Path, steps: int = 20, batch: int = 1, threads: int = 2, repeats: int = 20,
                 backend: str = "torch", warmup: int = 3) -> Dict[str, Any]:
    torch.set_num_threads(threads)
    man = read_manifest(bundle)
    if man["policy"] == "diffusion":
        return _bench_diffusion(bundle, man, steps, batch, threads, repeats, backend, warmup)
    if backend == "torch":
        model, man = torch_model_from_bundle(bundle)
        fn = TorchEnergyGrad(model)
    else:
        fn = OrtEnergyGrad(Path(bundle) / man["graphs"]["energy_grad"]["file"], threads=threads)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    rng = np.random.default_rng(0)
    cond = rng.standard_normal((batch, man["cond_dim"])).astype(np.float32)
    loaded = getattr(fn, "model", None)
    loaded = list(getattr(loaded, "weights_loaded", ())) or None
    times = []
    for i in range(warmup + repeats):
        z = rng.standard_normal((batch, man["pred_horizon"], man["action_dim"])).astype(np.float32)
        t0 = time.perf_counter()
        sample(fn, cond, z, sch, steps)
        dt = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(dt)
    return {"backend": backend, "torch": torch.__version__, "steps": steps, "batch": batch, "threads": threads,
            "repeats": repeats, "median_ms": statistics.median(times), "min_ms": min(times),
            "max_ms": max(times), "weights_loaded": loaded}


def _bench_diffusion(bundle: str | Path, man: Dict[str, Any], steps: int, batch: int, threads: int, repeats: int,
                     backend: str, warmup: int) -> Dict[str, Any]:
    """Median ms of the DDIM reference sampler (S = ``steps`` eps evaluations)."""
    if backend == "torch":
        model, man = torch_model_from_bundle(bundle)
        fn = TorchEps(model)
        loaded = list(model.weights_loaded)
    else:
        fn = OrtEps(Path(bundle) / man["graphs"]["eps"]["file"], threads=threads)
        loaded = None
    ac = np.asarray(man["schedule"]["alphas_cumprod"], np.float64)
    rng = np.random.default_rng(0)
    cond = rng.standard_normal((batch, man["cond_dim"])).astype(np.float32)
    times = []
    for i in range(warmup + repeats):
        z = rng.standard_normal((batch, man["pred_horizon"], man["action_dim"])).astype(np.float32)
        t0 = time.perf_counter()
        ddim_sample(fn, cond, z, ac, steps, man["schedule"]["clip_sample"])
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return {"backend": backend, "policy": "diffusion", "torch": torch.__version__, "steps": steps, "batch": batch,
            "threads": threads, "repeats": repeats, "median_ms": statistics.median(times), "min_ms": min(times),
            "max_ms": max(times), "weights_loaded": loaded}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--backend", default="torch", choices=["torch", "ort"])
    a = p.parse_args()
    print(json.dumps(bench_bundle(a.bundle, a.steps, a.batch, a.threads, a.repeats, a.backend)))


if __name__ == "__main__":
    main()
