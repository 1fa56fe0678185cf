"""Does a bundle's first action follow the object in the image? (issue 50, "proof that the image is used")

Hold the arm at its reset pose, move the task's object along x between
scenes, render the start frame from the bundle's camera (through a JPEG
round trip at the bridge's quality, as the runtime receives it), build
``cond`` exactly as the runtime does (state inputs standardised, image inputs
through the manifest's preprocessing and the bundle's vision graph), sample
the first plan with fixed noise, and regress the first executed action's x
on the object's x: the slope per metre. A bundle that ignores its image has
a slope near 0; one that reads the object has the state bundle's slope.

    python -m research.camera.probe --task button-press bundles/metaworld-button-press \\
        bundles/metaworld-button-press-image bundles/metaworld-button-press-camera
"""
from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import onnxruntime as ort
from PIL import Image

from energyflow.bundle import read_manifest
from energyflow.preprocess import preprocess_image
from energyflow.sampler import OrtEnergyGrad, Schedule, sample
from sim.world import World

#: the object's x offsets from the level-0 centre, metres
OFFSETS = np.linspace(-0.09, 0.09, 7)
#: rand_vec component that is the object's x, per task
OBJECT_X = {"button-press": 0, "drawer-open": 0}
JPEG_QUALITY = 90


def jpeg(img: np.ndarray) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=JPEG_QUALITY)
    return np.array(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


class BundleCond:
    """``cond`` for one observation repeated over the history (an episode's first tick)."""

    def __init__(self, bundle: str) -> None:
        self.dir = Path(bundle)
        self.man = read_manifest(bundle)
        self.vision = {o["name"]: ort.InferenceSession(str(self.dir / self.man["graphs"][o["graph"]]["file"]),
                                                       providers=["CPUExecutionProvider"])
                       for o in self.man["obs"] if o["kind"] == "image"}
        self.energy_grad = OrtEnergyGrad(self.dir / self.man["graphs"]["energy_grad"]["file"], threads=1)

    def __call__(self, state39: np.ndarray, frame: np.ndarray) -> np.ndarray:
        entries = {o["name"]: o for o in self.man["obs"]}
        step: List[np.ndarray] = []
        for it in self.man["conditioning"]["items"]:
            o = entries[it["obs"]]
            if o["kind"] == "state":
                raw = state39[: o["shape"][0]]
                step.append((raw - np.asarray(o["norm"]["mean"])) / np.asarray(o["norm"]["std"]))
            else:
                x = preprocess_image(frame, o["preprocess"])[None]
                (f,) = self.vision[o["name"]].run(None, {"image": x})
                step.append(f[0])
        one = np.concatenate(step).astype(np.float32)
        return np.tile(one, int(self.man["obs_horizon"]))[None]

    def first_action(self, cond: np.ndarray, draws: int = 8, seed: int = 0) -> np.ndarray:
        m = self.man
        sch = Schedule(**{k: m["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
        z = np.random.default_rng(seed).standard_normal((draws, m["pred_horizon"], m["action_dim"])).astype(np.float32)
        r = sample(self.energy_grad, np.repeat(cond, draws, 0), z, sch, m["sampler"]["steps"],
                   np.asarray(m["action_norm"]["mean"], np.float32), np.asarray(m["action_norm"]["std"], np.float32))
        return r.actions[:, int(m["obs_horizon"]) - 1].mean(0)


def scenes(task: str, cameras: Sequence[str], seeds: Sequence[int]):
    """(seed, object x, 39-wide state, {camera: frame}) for each seed and offset."""
    w = World(task, camera_size=(96, 96), camera_name=cameras[0])
    try:
        for seed in seeds:
            w.reset(seed=seed)
            base = np.array(w.env._last_rand_vec, copy=True)
            for dx in OFFSETS:
                v = base.copy()
                v[OBJECT_X[task]] = dx  # the level-0 range is centred on x = 0
                w.env._last_rand_vec = v
                obs, _ = w.env.reset()
                frames = {}
                for cam in cameras:
                    w.camera_name = cam
                    frames[cam] = jpeg(w.render())
                yield seed, float(dx), np.asarray(obs, np.float64), frames
    finally:
        w.close()


def bundle_camera(bc: "BundleCond", default: str) -> str:
    """The camera a bundle was trained on (its manifest names it), else ``default``."""
    for o in bc.man["obs"]:
        if o["kind"] == "image" and o.get("camera"):
            return str(o["camera"]["name"])
    return default


def probe(task: str, default_camera: str, bundles: Sequence[str], seeds: Sequence[int]) -> Dict[str, Any]:
    conds = [BundleCond(b) for b in bundles]
    cams = sorted({bundle_camera(bc, default_camera) for bc in conds})
    data = list(scenes(task, cams, seeds))
    out: Dict[str, Any] = {"task": task, "seeds": list(seeds), "offsets_m": OFFSETS.tolist(), "bundles": {}}
    xs = np.array([dx for _, dx, _, _ in data])
    for b, bc in zip(bundles, conds):
        cam = bundle_camera(bc, default_camera)
        ax = np.array([bc.first_action(bc(s, fr[cam]))[0] for _, _, s, fr in data])
        slope, icpt = np.polyfit(xs, ax, 1)
        images = any(o["kind"] == "image" for o in bc.man["obs"])
        out["bundles"][Path(b).name] = {"camera": cam if images else None, "slope_per_m": float(slope),
                                        "intercept": float(icpt), "actions_x": ax.round(4).tolist()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m research.camera.probe", description=__doc__.splitlines()[0])
    p.add_argument("bundles", nargs="+")
    p.add_argument("--task", default="button-press", choices=sorted(OBJECT_X))
    p.add_argument("--camera", default="corner2",
                   help="the camera of bundles whose manifest names none (the older image bundle: corner2)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1000, 1001, 1002, 1003])
    p.add_argument("--json", help="write the result here")
    a = p.parse_args(argv)
    r = probe(a.task, a.camera, a.bundles, a.seeds)
    for name, v in r["bundles"].items():
        print(f"{name}: first action x {v['slope_per_m']:+.2f} per metre of object x")
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
