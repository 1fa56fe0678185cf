"""Per-noise-level check of a bundle's learned score on demonstration windows.

    .venv/bin/python -m research.ood.score_check BUNDLE DEMOS.hdf5 [--windows 64]

For noise levels t in [0, T] it noises held-out demonstration action windows,
a_t = a0 + sigma(t) eps, and reports how well sigma * dE/da (from the exported
energy_grad.onnx) recovers eps: the norm ratio |sigma*grad|/|eps|, the cosine
and the DSM loss. Then it samples action chunks with Algorithm 2 (K steps,
``--steps``) for the same observations and reports the open-loop RMSE of the
executed part (the first ``action_horizon`` actions) against the
demonstration, beside the RMSE of always answering the mean action. A policy samples well only if the score is learned at every
level, including sigma ~ sigma_max where sampling starts. This is how a
vanishing high-noise score was found (docs/evaluation.md).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import h5py
import numpy as np
import onnxruntime as ort


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("demos")
    p.add_argument("--windows", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=10, help="Euler steps K for the open-loop check")
    a = p.parse_args()
    man = json.loads((Path(a.bundle) / "manifest.json").read_text())
    sess = ort.InferenceSession(str(Path(a.bundle) / man["graphs"]["energy_grad"]["file"]),
                                providers=["CPUExecutionProvider"])
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    state = next(o for o in man["obs"] if o["kind"] == "state")
    smean = np.asarray(state["norm"]["mean"], np.float32)
    sstd = np.asarray(state["norm"]["std"], np.float32)
    sch = man["schedule"]
    smin, smax, T = sch["sigma_min"], sch["sigma_max"], sch["T"]
    To, Tp = man["obs_horizon"], man["pred_horizon"]
    rng = np.random.default_rng(a.seed)
    conds, acts = [], []
    with h5py.File(a.demos, "r") as f:
        names = sorted(f["data"].keys())
        for _ in range(a.windows):
            d = f["data"][names[rng.integers(len(names))]]
            o, ac = d[f"obs/{state['name']}"][:], d["actions"][:]
            i = int(rng.integers(To - 1, len(ac) - Tp))
            conds.append(np.concatenate([(o[i - k] - smean) / sstd for k in range(To - 1, -1, -1)]))
            acts.append((ac[i - To + 1:i - To + 1 + Tp] - mean) / std)
    cond = np.asarray(conds, np.float32)
    a0 = np.asarray(acts, np.float32)
    print("| t | sigma | |sigma*grad|/|eps| | cosine | DSM loss |")
    print("|---|---|---|---|---|")
    for t in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0):
        sig = smin ** (1 - t / T) * smax ** (t / T)
        eps = rng.standard_normal(a0.shape).astype(np.float32)
        g, _ = sess.run(None, {"a_t": a0 + sig * eps, "cond": cond, "t": np.full(len(a0), t, np.float32)})
        pe = sig * g
        ratio = np.linalg.norm(pe) / np.linalg.norm(eps)
        cos = float((pe * eps).sum() / (np.linalg.norm(pe) * np.linalg.norm(eps) + 1e-12))
        print(f"| {t:.1f} | {sig:.3f} | {ratio:.3f} | {cos:.3f} | {np.mean((pe - eps) ** 2):.3f} |")

    # open loop: Algorithm 2 from N(0, sigma_max^2) against the demonstrated chunk
    K = a.steps
    dt = (T - sch["gamma"]) / K
    x = (smax * rng.standard_normal(a0.shape)).astype(np.float32)
    for k in range(K):
        t = T - k * dt
        sig = smin ** (1 - t / T) * smax ** (t / T)
        c = np.float32(dt * sig * sig * np.log(smax / smin) / T)
        g, _ = sess.run(None, {"a_t": x, "cond": cond, "t": np.full(len(x), t, np.float32)})
        x = (x - c * g).astype(np.float32)
    # the executed actions start at the current step: index obs_horizon-1
    lo, hi = To - 1, To - 1 + man["action_horizon"]
    rmse = float(np.sqrt(np.mean((x[:, lo:hi] - a0[:, lo:hi]) ** 2)))
    base = float(np.sqrt(np.mean(a0[:, lo:hi] ** 2)))
    print(f"\nopen loop K={K}: RMSE {rmse:.3f} (standardized units) vs {base:.3f} for the mean action; "
          f"max |a| {float(np.abs(x).max()):.2f}")


if __name__ == "__main__":
    main()
