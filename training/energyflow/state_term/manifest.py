"""The manifest's ``state_energy`` block and the ``state-term`` command that
trains g for a bundle and writes graph and block into it (:mod:`energyflow.state_term`)."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Sequence

import torch

from ..bundle import BundleError, f32, read_manifest, write_manifest
from ..data import DataError, load_hdf5, load_rollouts
from .data import check_data
from .export import GRAPH_FILE, INPUT, OUTPUT, export_state_energy
from .network import StateTermConfig, StateTermError
from .reading import READING, READING_MAX_Z, RNDScore, StateEnergyReading
from .training import fit_state_term


def manifest_block(reading: StateEnergyReading, cfg: StateTermConfig, train_rec: Dict[str, Any],
                   calibration: Dict[str, Any], export_check: Dict[str, float]) -> Dict[str, Any]:
    block = {
        "graph": GRAPH_FILE, "input": INPUT, "output": OUTPUT,
        "reading": READING_MAX_Z if len(reading.extras) else READING,
        "sigmas": f32(reading.sigmas.numpy()), "mean": f32(reading.mean.numpy()), "std": f32(reading.std.numpy()),
        "model": {"kind": "mlp", "hidden": list(cfg.hidden), "activation": "silu", "noise_freqs": cfg.noise_freqs,
                  "form": "f(c_in s, 1/4 ln sigma)/sigma + |s|^2/(2(sigma^2+1))"},
        "train": train_rec,
        "calibration": calibration,
        "export_check": export_check,
    }
    if len(reading.extras):
        block["components"] = reading.components
    stats = {k: reading.extra_stats[i].tolist() for i, k in enumerate(reading.extras)}
    if "transition" in stats:
        block["transition"] = {
            "form": "max_k |x_t,k - (W x_<t + b)_k| / sd_k, x_t the newest frame of cond",
            "frames": train_rec["transition"]["frames"], "ridge": cfg.transition_ridge,
            "sd_floor": cfg.transition_sd_floor, "mean": stats["transition"][0], "std": stats["transition"][1]}
    if "rnd" in stats:
        block["rnd"] = {"form": "|predictor(cond) - target(cond)|^2 / K, target a fixed random MLP",
                        "target": list(RNDScore.TARGET), "predictor": list(RNDScore.PREDICTOR),
                        "activation": "silu", **train_rec["rnd"],
                        "mean": stats["rnd"][0], "std": stats["rnd"][1]}
    return block


def state_term_bundle(bundle: str | Path, data: str | Path, cfg: StateTermConfig, val_fraction: float = 0.1,
                      split_seed: int = 0, log_every: int = 0,
                      rollouts: Sequence[str | Path] = (), rollout_max_factor: float = 2.0) -> Dict[str, Any]:
    """Train g for an existing bundle (energyflow or diffusion), write
    ``state_energy.onnx`` into it and the ``state_energy`` block into its
    manifest (other content kept, ``files`` hashes rewritten). ``rollouts``
    are ``scripts/rollouts.sh`` directories whose successful episodes join
    the demonstrations, those that succeeded within ``rollout_max_factor``
    times the longest demonstration's length. Nothing is changed when any
    step fails."""
    bundle, data = Path(bundle), Path(data)
    try:
        man = read_manifest(bundle)
    except BundleError as e:
        raise StateTermError(str(e)) from e
    images = [o["name"] for o in man["obs"] if o["kind"] != "state"]
    if images:
        raise StateTermError(f"{bundle}: takes camera images ({', '.join(images)}): the state term supports "
                             "state bundles only")
    try:
        demos, _ = load_hdf5(data, [o["name"] for o in man["obs"]])
    except DataError as e:
        raise StateTermError(str(e)) from e
    check_data(man, demos, bundle, data)
    own: List = []
    if rollouts:
        try:
            longest = max(d.length for d in demos)
            max_step = int(rollout_max_factor * longest)
            own, counts = load_rollouts(rollouts, [o["name"] for o in man["obs"]], max_step)
        except DataError as e:
            raise StateTermError(str(e)) from e
        if not own:
            raise StateTermError(f"no successful rollouts in {', '.join(map(str, rollouts))} "
                                 f"({counts['episodes']} episodes): nothing of the policy's own to learn")
        check_data(man, own, bundle, Path(rollouts[0]))
    reading, train_rec, cal, _ = fit_state_term(man, demos, cfg, val_fraction, split_seed, log_every, own)
    if rollouts:
        train_rec["rollout_sources"] = [str(Path(r)) for r in rollouts]
        train_rec["rollout_episodes"] = counts["episodes"]
        train_rec["rollout_successes"] = counts["successes"]
        train_rec["rollout_late_successes"] = {"left_out": counts["late_successes"], "after_step": max_step}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_graph = Path(tmp) / GRAPH_FILE
        check = export_state_energy(reading, tmp_graph)
        shutil.copyfile(tmp_graph, bundle / GRAPH_FILE)
    man["state_energy"] = manifest_block(reading, cfg, train_rec, cal, check)
    write_manifest(bundle, man)
    return man["state_energy"]


def state_term_main(args) -> int:
    """``python -m energyflow state-term`` (arguments from :mod:`energyflow.cli`)."""
    torch.set_num_threads(max(1, args.threads))
    cfg = StateTermConfig(steps=args.steps, sigmas=args.sigmas, sigma_min=args.sigma_min,
                          sigma_max=args.sigma_max, seed=args.seed, hidden=tuple(args.hidden),
                          batch_size=args.batch_size, lr=args.lr, transition=not args.no_transition,
                          rnd_steps=args.rnd_steps)
    try:
        block = state_term_bundle(args.bundle, args.data, cfg, args.val_fraction, args.split_seed,
                                  log_every=0 if args.quiet else 1000, rollouts=args.rollouts or (),
                                  rollout_max_factor=args.rollout_max_factor)
    except StateTermError as e:
        print(f"state-term: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: block[k] for k in ("graph", "reading", "sigmas", "train", "calibration", "export_check")},
                     indent=1))
    return 0
