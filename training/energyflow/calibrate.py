"""Calibration of the safety monitor's energy scores on held-out demonstration windows.

For each held-out window the reference sampler (ONNX Runtime on the bundle's
``energy_grad.onnx``, exactly what the runtime runs) draws an action chunk and
reports:

* ``energy``          = E(a_K, cond, gamma) of the sampled action;
* ``centered_energy`` = E(a_K, cond, gamma) - mean_m E(ref_m, cond, gamma)
  (= minus the centered reward).

Their mean/std and quantiles 50/90/99/99.9 go into the manifest's
``calibration`` block together with a recommended stop threshold (default:
quantile 99.9 of ``energy``); a histogram is saved as ``calibration.png``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

from .bundle import read_manifest, write_manifest
from .config import Schedule
from .data import Normalizer, WindowDataset, load_hdf5, split_demos
from .graphs import ort_session
from .sampler import OrtEnergyGrad, sample

QUANTILES = ("50", "90", "99", "99.9")


class CalibrationError(ValueError):
    """The bundle cannot be calibrated (e.g. a diffusion bundle has no energy)."""


def score_stats(x: Sequence[float]) -> Dict[str, Any]:
    """mean, std (population) and quantiles 50/90/99/99.9 (numpy 'linear' interpolation)."""
    a = np.asarray(x, np.float64)
    if a.size == 0:
        raise ValueError("no scores to calibrate on")
    qs = {q: float(np.quantile(a, float(q) / 100.0)) for q in QUANTILES}
    return {"mean": float(a.mean()), "std": float(a.std()), "quantiles": qs}


def calibration_block(scores: Dict[str, Sequence[float]], n_windows: int, seed: int, steps: int,
                      score: str = "energy", quantile: str = "99.9") -> Dict[str, Any]:
    stats = {k: score_stats(v) for k, v in scores.items()}
    return {"n_windows": int(n_windows), "seed": int(seed), "steps": int(steps), "scores": stats,
            "recommended": {"score": score, "threshold": stats[score]["quantiles"][quantile],
                            "rule": f"quantile {quantile} of held-out windows"}}


def save_histogram(scores: Dict[str, Sequence[float]], block: Dict[str, Any], path: str | Path) -> None:
    import matplotlib  # heavy (~0.5 s) and only for the optional PNG; the Agg backend is chosen before pyplot loads

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use (see above)

    fig, axes = plt.subplots(1, len(scores), figsize=(5 * len(scores), 3.5))
    axes = np.atleast_1d(axes)
    for ax, (k, v) in zip(axes, scores.items()):
        ax.hist(np.asarray(v), bins=50, color="#4477aa")
        for q, c in (("99", "#ee7733"), ("99.9", "#cc3311")):
            x = block["scores"][k]["quantiles"][q]
            ax.axvline(x, color=c, ls="--", label=f"q{q} = {x:.3g}")
        ax.set_title(k)
        ax.set_xlabel("score (higher = less like the demonstrations)")
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


def calibrate_bundle(bundle: str | Path, data: str | Path, n_windows: int = 512, seed: int = 0,
                     steps: Optional[int] = None, val_fraction: float = 0.1, split_seed: int = 0,
                     all_demos: bool = False, quantile: str = "99.9", score: str = "energy", png: bool = True,
                     batch: int = 64) -> Dict[str, Any]:
    """Run the calibration and rewrite the bundle's manifest (hashes included).

    Raises :class:`CalibrationError` (and changes nothing) for a diffusion bundle.
    """
    bundle = Path(bundle)
    man = read_manifest(bundle)
    if man.get("policy", "energyflow") != "energyflow":
        raise CalibrationError(f"{bundle}: {man.get('policy')} bundles have no energy to calibrate")
    state_entries = [o for o in man["obs"] if o["kind"] == "state"]
    image_entries = [o for o in man["obs"] if o["kind"] == "image"]
    demos, _ = load_hdf5(data, [o["name"] for o in state_entries], [o["name"] for o in image_entries])
    held = demos if all_demos else split_demos(demos, val_fraction, split_seed)[1]
    if not held:
        raise ValueError("no held-out demos (use --all-demos with a separate held-out file)")
    T_o, T_p = man["obs_horizon"], man["pred_horizon"]
    a_norm = Normalizer(np.asarray(man["action_norm"]["mean"], np.float32), np.asarray(man["action_norm"]["std"], np.float32))
    s_norm = None
    skey = None
    if state_entries:
        skey = state_entries[0]["name"]
        s_norm = Normalizer(np.asarray(state_entries[0]["norm"]["mean"], np.float32),
                            np.asarray(state_entries[0]["norm"]["std"], np.float32))
    ds = WindowDataset(held, skey, [o["name"] for o in image_entries], T_o, T_p, man["action_horizon"], a_norm, s_norm)
    rng = np.random.default_rng(seed)
    n = min(n_windows, len(ds))
    idx = rng.choice(len(ds), size=n, replace=False)
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    K = steps or man["sampler"]["steps"]
    fn = OrtEnergyGrad(bundle / man["graphs"]["energy_grad"]["file"], threads=2)
    vis = None
    if image_entries:
        vis = ort_session(bundle / man["graphs"]["vision"]["file"])
        # torch (~2 s, ~1 GB) only for camera bundles: a state bundle calibrates on ONNX Runtime alone
        import torch
        from .preprocess import preprocess_batch
    refs = np.asarray(man["reference_actions"], np.float32)
    energies, centered = [], []
    for s in range(0, n, batch):
        b = ds.batch(idx[s:s + batch])
        B = b["actions"].shape[0]
        steps_parts = []
        for item in man["conditioning"]["items"]:
            if item["obs"] == skey:
                steps_parts.append(b["state"].reshape(B, T_o, -1))
            else:
                spec = next(o for o in image_entries if o["name"] == item["obs"])["preprocess"]
                imgs = torch.from_numpy(b[item["obs"]].reshape(B * T_o, *b[item["obs"]].shape[2:]))
                x = preprocess_batch(imgs, spec).numpy()
                (f,) = vis.run(["features"], {"image": x})
                steps_parts.append(f.reshape(B, T_o, -1))
        cond = np.concatenate(steps_parts, axis=-1).reshape(B, -1).astype(np.float32)
        z = rng.standard_normal((B, T_p, man["action_dim"])).astype(np.float32)
        res = sample(fn, cond, z, sch, K, ref_actions=refs)
        energies.extend(res.energy.astype(np.float64).tolist())
        centered.extend((-res.centered_reward).tolist())
    scores = {"energy": energies, "centered_energy": centered}
    block = calibration_block(scores, n, seed, K, score, quantile)
    if png:
        save_histogram(scores, block, bundle / "calibration.png")
    # the closed-loop thresholds (energyflow sim calibrate, docs/safety.md), at one
    # control rate and K or several, were fitted on episodes, not on these windows: keep them
    old = man.get("calibration") or {}
    for key in ("closed_loop", "closed_loop_others"):
        if old.get(key) is not None:
            block[key] = old[key]
    man["calibration"] = block
    write_manifest(bundle, man)
    return block


def set_threshold(bundle: str | Path, score: str, value: float, rule: str) -> Dict[str, Any]:
    """Replace the calibration's recommended score and threshold (the evaluation's
    choice, docs/evaluation.md) and rewrite the manifest with its hashes. The
    held-out statistics stay as ``calibrate`` measured them."""
    bundle = Path(bundle)
    man = read_manifest(bundle)
    cal = man.get("calibration")
    if not cal:
        raise CalibrationError(f"{bundle}: no calibration yet; run calibrate first")
    if score not in cal["scores"]:
        raise CalibrationError(f"{bundle}: score {score!r}: want one of {sorted(cal['scores'])}")
    if not np.isfinite(value):
        raise CalibrationError(f"threshold {value}: must be finite")
    cal["recommended"] = {"score": score, "threshold": float(value), "rule": rule}
    write_manifest(bundle, man)
    return cal["recommended"]
