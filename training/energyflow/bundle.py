"""Engine bundle manifests: build, write, read and verify (docs/bundle.md, format 1).

Torch-free: everything that reads a bundle (the reference samplers, rollouts,
calibration, the probe) imports this module. Writing a whole bundle, which
exports and checks its graphs, is :func:`energyflow.export.write_bundle`.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .config import ModelConfig, schedule_manifest

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
NUM_REFERENCE = 16


class BundleError(RuntimeError):
    """A bundle is malformed or its hashes do not match."""


def f32(x: Any) -> Any:
    """Round floats (nested lists / arrays) to float32 and return JSON-ready Python floats."""
    arr = np.asarray(x, dtype=np.float32)
    if arr.ndim == 0:
        return float(arr)
    return [f32(v) for v in arr]


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_hashes(bundle_dir: str | Path) -> Dict[str, str]:
    """sha256 of every file in the bundle except manifest.json (relative '/' paths, sorted)."""
    root = Path(bundle_dir)
    out: Dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel = p.relative_to(root).as_posix()
            if rel != MANIFEST:
                out[rel] = sha256_file(p)
    return out


def source_commit() -> str:
    """Current git commit of the repository holding this file, or "unknown"."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            return out.stdout.strip()
    except Exception:
        pass
    return "unknown"


def reference_actions(cfg: ModelConfig, seed: int = 0, m: int = NUM_REFERENCE) -> np.ndarray:
    """M fixed standard-normal samples [M,T_p,D_a] (standardized action space), float32."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, cfg.pred_horizon, cfg.action_dim)).astype(np.float32)


#: model-config keys that only describe the EnergyFlow energy head / schedule
#: (left out of a diffusion manifest's ``model`` block)
ENERGY_ONLY_KEYS = ("head_dims", "spectral_norm", "energy_scale", "input_scale", "energy_prior", "time_scale",
                    "energy_head", "noise_embed_scale")
#: model-config keys of one energy head only (left out of the other head's manifest)
POOLED_ONLY_KEYS = ("head_dims", "spectral_norm", "energy_scale", "input_scale", "energy_prior", "time_scale")
DENOISER_ONLY_KEYS = ("noise_embed_scale",)
#: entries of a manifest's ``model`` block that are records, not ModelConfig fields
MODEL_RECORD_KEYS = ("export_check", "training")


def graph_specs(cfg: ModelConfig) -> Dict[str, Any]:
    """``graphs`` block: ``energy_grad`` (energyflow) or ``eps`` (diffusion), plus ``vision``."""
    inputs = [{"name": "a_t", "shape": [-1, cfg.pred_horizon, cfg.action_dim]},
              {"name": "cond", "shape": [-1, cfg.cond_dim]},
              {"name": "t", "shape": [-1]}]
    g: Dict[str, Any]
    if cfg.policy == "diffusion":
        g = {"eps": {"file": "eps.onnx", "inputs": inputs,
                     "outputs": [{"name": "eps", "shape": [-1, cfg.pred_horizon, cfg.action_dim]}]}}
    else:
        g = {"energy_grad": {
            "file": "energy_grad.onnx",
            "inputs": inputs,
            "outputs": [{"name": "grad_a", "shape": [-1, cfg.pred_horizon, cfg.action_dim]},
                        {"name": "energy", "shape": [-1]}]}}
    if cfg.images:
        im = cfg.images[0]
        g["vision"] = {"file": "vision.onnx",
                       "inputs": [{"name": "image", "shape": [-1, *im.shape]}],
                       "outputs": [{"name": "features", "shape": [-1, im.features]}]}
    return g


def obs_entries(cfg: ModelConfig, state_mean: Optional[Sequence[float]], state_std: Optional[Sequence[float]]
                ) -> List[Dict[str, Any]]:
    entries: List[Dict[str, Any]] = []
    if cfg.state_dim > 0:
        mean = np.zeros(cfg.state_dim) if state_mean is None else np.asarray(state_mean, np.float64)
        std = np.ones(cfg.state_dim) if state_std is None else np.asarray(state_std, np.float64)
        if mean.shape != (cfg.state_dim,) or std.shape != (cfg.state_dim,):
            raise ValueError(f"state norm must have shape ({cfg.state_dim},)")
        entries.append({"name": cfg.state_key, "kind": "state", "shape": [cfg.state_dim],
                        "norm": {"mean": f32(mean), "std": f32(np.maximum(std, 1e-6))}})
    for im in cfg.images:
        entries.append({"name": im.name, "kind": "image", "shape": list(im.shape), "graph": "vision",
                        "features": im.features,
                        "preprocess": {"resize": list(im.resize), "crop": [im.shape[1], im.shape[2]],
                                       "channel_order": "RGB", "mean": list(im.mean), "std": list(im.std)}})
    return entries


def conditioning(cfg: ModelConfig) -> Dict[str, Any]:
    items = []
    if cfg.state_dim > 0:
        items.append({"obs": cfg.state_key, "width": cfg.state_dim})
    for im in cfg.images:
        items.append({"obs": im.name, "width": im.features})
    return {"layout": "history_flat", "items": items}


def build_manifest(cfg: ModelConfig, name: str, action_mean: Sequence[float], action_std: Sequence[float],
                   state_mean: Optional[Sequence[float]] = None, state_std: Optional[Sequence[float]] = None,
                   ref_actions: Optional[np.ndarray] = None, steps: int = 20,
                   calibration: Optional[Dict[str, Any]] = None, extra_model: Optional[Dict[str, Any]] = None,
                   clip_sample: float = 0.0) -> Dict[str, Any]:
    """Manifest dict (without ``files``) for a model config and its normalizers.

    The kind comes from ``cfg.policy``. ``energyflow``: geometric schedule,
    ``sampler: {steps}``. ``diffusion``: DDPM schedule (with ``clip_sample``,
    the DDIM x0 clip in standardized units, 0 = off), ``sampler: {kind: ddim,
    steps}``, ``calibration`` always null.
    """
    if ref_actions is None:
        ref_actions = reference_actions(cfg)
    ref_actions = np.asarray(ref_actions, np.float32)
    if ref_actions.shape != (NUM_REFERENCE, cfg.pred_horizon, cfg.action_dim):
        raise ValueError(f"reference_actions must be [{NUM_REFERENCE},{cfg.pred_horizon},{cfg.action_dim}]")
    a_std = np.maximum(np.asarray(action_std, np.float64), 1e-6)
    diffusion = cfg.policy == "diffusion"
    skip = ("schedule", "policy") + (ENERGY_ONLY_KEYS if diffusion else ())
    if not diffusion:
        skip += POOLED_ONLY_KEYS if cfg.energy_head == "denoiser" else DENOISER_ONLY_KEYS
    model_info = {k: v for k, v in cfg.to_dict().items() if k not in skip}
    model_info.update(extra_model or {})
    if diffusion:
        schedule, sampler = schedule_manifest(clip_sample), {"kind": "ddim", "steps": int(steps)}
        calibration = None
    else:
        schedule, sampler = cfg.schedule.to_manifest(), {"steps": int(steps)}
    return {
        "format_version": FORMAT_VERSION,
        "policy": cfg.policy,
        "name": name,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "source_commit": source_commit(),
        "action_dim": cfg.action_dim,
        "pred_horizon": cfg.pred_horizon,
        "obs_horizon": cfg.obs_horizon,
        "action_horizon": cfg.action_horizon,
        "action_norm": {"mean": f32(action_mean), "std": f32(a_std)},
        "obs": obs_entries(cfg, state_mean, state_std),
        "conditioning": conditioning(cfg),
        "cond_dim": cfg.cond_dim,
        "schedule": schedule,
        "sampler": sampler,
        "reference_actions": f32(ref_actions),
        "graphs": graph_specs(cfg),
        "calibration": calibration,
        "files": {},
        "model": model_info,
    }


def write_manifest(bundle_dir: str | Path, manifest: Dict[str, Any]) -> Dict[str, Any]:
    """Recompute ``files`` hashes and write manifest.json."""
    manifest = dict(manifest)
    manifest["files"] = file_hashes(bundle_dir)
    with open(Path(bundle_dir) / MANIFEST, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def read_manifest(bundle_dir: str | Path, verify: bool = True) -> Dict[str, Any]:
    """Load manifest.json, check the format version and (optionally) every file hash."""
    p = Path(bundle_dir) / MANIFEST
    if not p.exists():
        raise BundleError(f"{bundle_dir}: no {MANIFEST}")
    man = json.loads(p.read_text())
    if man.get("format_version") != FORMAT_VERSION:
        raise BundleError(f"{bundle_dir}: unsupported format_version {man.get('format_version')}")
    if verify:
        for rel, digest in man.get("files", {}).items():
            fp = Path(bundle_dir) / rel
            if not fp.exists():
                raise BundleError(f"{bundle_dir}: file {rel} listed in manifest is missing")
            if sha256_file(fp) != digest:
                raise BundleError(f"{bundle_dir}: sha256 mismatch for {rel}")
    return man


def model_config_from_manifest(man: Dict[str, Any]) -> ModelConfig:
    """Rebuild the ModelConfig recorded in a manifest's ``model`` block (kind from ``policy``;
    a manifest without ``model.energy_head`` was written before the option: pooled head)."""
    d = {k: v for k, v in man["model"].items() if k not in MODEL_RECORD_KEYS}
    d["policy"] = man.get("policy", "energyflow")
    if d["policy"] == "energyflow":
        d["schedule"] = {k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")}
    return ModelConfig.from_saved(d)


def __getattr__(name: str) -> Any:
    """``energyflow.bundle.write_bundle``: the old home of :func:`energyflow.export.write_bundle`,
    kept for callers outside the toolkit (deprecated; nothing in the toolkit uses it)."""
    if name == "write_bundle":
        warnings.warn("energyflow.bundle.write_bundle moved to energyflow.export.write_bundle",
                      DeprecationWarning, stacklevel=2)
        # export needs torch (heavy): imported only when the old name is asked for, so reading a bundle stays torch-free
        from .export import write_bundle
        return write_bundle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
