"""Retrain a camera bundle's state term on camera demonstrations read through its own vision graph.

A camera bundle's state term (``energyflow state-term``, docs/safety.md) scores
``cond`` = [arm reading, the localiser's estimate] over the history. The one
``scripts/train-defaults.sh`` trains sees the policy's 200 demonstrations
(cross-fitted estimates), so scenes at the corners of the task's reset range,
few in 200, score as high as a scene just outside it. This module gives the
term more scenes: it reads camera demonstrations (``sim.record --camera``,
seeds the localiser never saw, so the estimates are as noisy as on the robot)
through the bundle's own ``vision.onnx`` with the runtime's preprocessing,
builds the ``[proprio, features]`` rows the runtime builds, trains the state
term on them and writes a copy of the bundle with the new term.

The closed-loop thresholds in the manifest were certified on the old term's
scale, so the copy drops them: the stop falls back to the new term's held-out
q99.9 until ``energyflow sim calibrate`` certifies a threshold again.

    python -m energyflow.camera_state_term --bundle B --data DEMOS.hdf5 --out DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np
import onnxruntime as ort
import torch

from .bundle import BundleError, read_manifest, write_manifest
from .compact import MIN_ELEMENTS, compact_bundle
from .preprocess import preprocess_image
from .state_term.manifest import state_term_bundle
from .state_term.network import StateTermConfig

#: the obs key of the arm reading in camera demonstrations (sim.record) and camera bundles
PROPRIO = "proprio"
#: the state view's single state input: [proprio, standardised features]
STATE = "state"


class CameraStateTermError(ValueError):
    """The bundle or the demonstrations are not what a camera state term is trained from."""


def _image_obs(man: Dict[str, Any], bundle: Path) -> Dict[str, Any]:
    images = [o for o in man["obs"] if o["kind"] == "image"]
    items = [it["obs"] for it in man["conditioning"]["items"]]
    if len(images) != 1 or items != [PROPRIO, images[0]["name"]]:
        raise CameraStateTermError(f"{bundle}: expected a camera bundle conditioned on [{PROPRIO}, one camera], "
                                   f"got items {items}")
    return images[0]


def features(bundle: str | Path, data: str | Path, out: str | Path) -> Dict[str, Any]:
    """Write ``out``: every demo of ``data`` with ``obs/state`` = [proprio, the vision graph's features].

    The frames (``obs/<camera>``, uint8 H×W×3, as recorded through the bridge's
    MJPEG stream) go through the manifest's preprocessing and ``vision.onnx``
    exactly as the runtime's vision stage does, so the features are the
    standardised estimates the runtime puts in ``cond``.
    """
    import h5py  # heavy optional dependency (HDF5 C library): only when demonstrations are read

    bundle = Path(bundle)
    man = read_manifest(bundle)
    cam = _image_obs(man, bundle)
    graph = man["graphs"][cam["graph"]]["file"]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(bundle / graph), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    n = steps = 0
    with h5py.File(data, "r") as src, h5py.File(out, "w") as dst:
        if "data" not in src:
            raise CameraStateTermError(f"{data}: no group 'data' (not a demonstrations file)")
        g = dst.create_group("data")
        for k in src["data"]:
            d = src["data"][k]
            for key in (PROPRIO, cam["name"]):
                if key not in d["obs"]:
                    raise CameraStateTermError(f"{data}: {k} has no obs/{key} (record with --camera)")
            frames = d["obs"][cam["name"]][:]
            want = (cam["camera"]["height"], cam["camera"]["width"]) if cam.get("camera") else frames.shape[1:3]
            if tuple(frames.shape[1:3]) != tuple(want):
                raise CameraStateTermError(f"{data}: {k}'s frames are {frames.shape[2]}x{frames.shape[1]}, "
                                           f"the bundle's camera is {want[1]}x{want[0]}")
            x = np.stack([preprocess_image(f, cam["preprocess"]) for f in frames])
            (feat,) = sess.run(None, {name: x})
            state = np.concatenate([d["obs"][PROPRIO][:].astype(np.float32), feat.astype(np.float32)], axis=1)
            o = g.create_group(k)
            o.create_dataset("actions", data=d["actions"][:])
            o.create_group("obs").create_dataset(STATE, data=state)
            n += 1
            steps += len(state)
    return {"demos": n, "steps": steps, "features": int(cam["features"])}


def state_view(bundle: str | Path, out: str | Path) -> Path:
    """A copy of the camera bundle whose one input is ``state`` = [proprio, features], identity-normed on the
    features (they arrive standardised): ``cond`` is the same floats, and ``energyflow state-term`` takes it."""
    bundle, out = Path(bundle), Path(out)
    man = read_manifest(bundle)
    cam = _image_obs(man, bundle)
    prop = next(o for o in man["obs"] if o["name"] == PROPRIO)
    f = int(cam["features"])
    shutil.copytree(bundle, out)
    (out / man["graphs"][cam["graph"]]["file"]).unlink()
    man["graphs"] = {k: v for k, v in man["graphs"].items() if k != cam["graph"]}
    man["obs"] = [{"name": STATE, "kind": "state", "shape": [int(prop["shape"][0]) + f],
                   "norm": {"mean": list(prop["norm"]["mean"]) + [0.0] * f,
                            "std": list(prop["norm"]["std"]) + [1.0] * f}}]
    man["conditioning"] = {**man["conditioning"], "items": [{"obs": STATE, "width": int(prop["shape"][0]) + f}]}
    write_manifest(out, man)
    return out


def retrain(bundle: str | Path, data: str | Path, out: str | Path, steps: int = 4000, seed: int = 0,
            threads: int = 1, quiet: bool = True) -> Dict[str, Any]:
    """Write ``out``: ``bundle`` with its state term retrained on ``data`` (camera demonstrations).

    Returns the new ``state_energy`` block. The closed-loop thresholds of the
    state score are dropped (they were certified on the old term's scale);
    ``out`` must not exist.
    """
    bundle, out = Path(bundle), Path(out)
    if out.exists():
        raise CameraStateTermError(f"{out} exists: give a new directory")
    torch.set_num_threads(max(1, threads))
    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "state.hdf5"
        counts = features(bundle, data, rows)
        view = state_view(bundle, Path(tmp) / "view")
        block = state_term_bundle(view, rows, StateTermConfig(steps=steps, seed=seed), log_every=0 if quiet else 1000)
        shutil.copytree(bundle, out)
        shutil.copyfile(view / "state_energy.onnx", out / "state_energy.onnx")
    block["train"]["camera_demos"] = {"file": Path(data).name, **counts}
    man = read_manifest(out, verify=False)
    man["state_energy"] = block
    cal = man.get("calibration") or {}
    dropped = []
    if (cal.get("closed_loop") or {}).get("score") == "state_energy":
        dropped.append(cal.pop("closed_loop"))
    if "closed_loop_others" in cal:
        others = cal.pop("closed_loop_others") or []
        dropped += [c for c in others if c.get("score") == "state_energy"]
        if any(c.get("score") != "state_energy" for c in others):
            cal["closed_loop_others"] = [c for c in others if c.get("score") != "state_energy"]
    block["train"]["dropped_closed_loop"] = [{k: c.get(k) for k in ("rate_hz", "steps_k", "q")} for c in dropped]
    weights = man.pop("weights", None)
    write_manifest(out, man)
    if weights:
        # the bundle stored float16 weights: so does its new term (the other graphs are converted already)
        diffs = compact_bundle(out, min_elements=int(weights.get("min_elements", MIN_ELEMENTS)))
        man = read_manifest(out)
        man["weights"]["max_rel_diff"] = {**weights.get("max_rel_diff", {}), **diffs}
        write_manifest(out, man)
    return block


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m energyflow.camera_state_term", description=__doc__.split("\n")[0])
    p.add_argument("--bundle", required=True, help="the camera bundle")
    p.add_argument("--data", required=True, help="camera demonstrations (sim.record --camera, the bundle's camera)")
    p.add_argument("--out", required=True, help="the new bundle's directory (must not exist)")
    p.add_argument("--steps", type=int, default=4000, help="state term training steps (4000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1)")
    a = p.parse_args(argv)
    try:
        block = retrain(a.bundle, a.data, a.out, steps=a.steps, seed=a.seed, threads=a.threads, quiet=False)
    except (CameraStateTermError, BundleError, OSError) as e:
        print(f"camera_state_term: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: block[k] for k in ("train", "calibration")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
