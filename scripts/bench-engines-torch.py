"""Times the Python reference sampler (training/energyflow/sampler.py) with a
torch EnergyUNet in eager mode, autograd for ∇E (what a Python deployment
does), batch 1: one ∇E call; whole samples of K steps + the final energy
(the definition of ``python -m energyflow bench``) for each K; and at the
largest K also with the M reference energies (centered reward).

The network is rebuilt from the bundle by energyflow.bench.torch_model_from_bundle
(spectral norm baked, weights copied from the ONNX initializers). Prints JSON.

Usage: PYTHONPATH=training .venv/bin/python scripts/bench-engines-torch.py \
           --bundle DIR [--threads 2] [--n 20] [--steps 10 20]
"""
import argparse
import json
import re
import statistics
import time

import numpy as np
import torch

from energyflow.bench import torch_model_from_bundle
from energyflow.config import Schedule
from energyflow.sampler import TorchEnergyGrad, sample


def blas():
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def timed(fn, n, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    c0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    cpu = (time.process_time() - c0) * 1e3 / n
    ts.sort()
    return {"p50_ms": statistics.median(ts), "min_ms": ts[0], "mean_ms": statistics.fmean(ts), "cpu_ms": cpu,
            "p90_ms": ts[min(len(ts) - 1, int(0.9 * len(ts)))], "n": n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--grad-n", type=int, default=50)
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 20])
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, man = torch_model_from_bundle(args.bundle)
    fn = TorchEnergyGrad(model)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    rng = np.random.default_rng(0)
    cond = rng.standard_normal((1, man["cond_dim"])).astype(np.float32)
    noise = rng.standard_normal((1, man["pred_horizon"], man["action_dim"])).astype(np.float32)
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    refs = np.asarray(man["reference_actions"], np.float32)

    out = {"torch": torch.__version__, "threads": args.threads, "blas": blas(),
           "grad_call": timed(lambda: fn(noise, cond, np.full((1,), 0.5, np.float32)), args.grad_n)}
    out["weights_loaded"] = list(getattr(model, "weights_loaded", ()))
    for k in args.steps:
        out[f"sample_k{k}"] = timed(lambda: sample(fn, cond, noise, sch, k, mean, std), args.n)
    k = max(args.steps)
    out[f"sample_k{k}_refs"] = timed(lambda: sample(fn, cond, noise, sch, k, mean, std, refs), args.n)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
