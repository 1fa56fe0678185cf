"""Turn a policy trained on [arm state, camera estimate] into a camera bundle.

The two-stage camera policy (docs/camera-policy.md) is trained as a state
policy whose state is the arm controller's own reading (hand xyz, gripper)
followed by the localiser's estimate of the task's target (``energyflow.localiser``).
On the robot the estimate comes from the camera, so the bundle says so: its
``proprio`` input is the arm's reading, its image input runs ``vision.onnx``
(the localiser, followed by the standardisation the policy was trained with),
and ``cond`` is unchanged — the same floats in the same order — so the energy
graph, its calibration and the state term carry over as they are.

    python -m energyflow.camera_bundle --state-bundle B --localiser L.pt --camera topview --out DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

from . import localiser as loc_mod
from .bundle import read_manifest, write_manifest

#: the arm controller's reading at the front of the policy's state: hand xyz + gripper
PROPRIO_DIM = 4


class CameraBundleError(ValueError):
    """The state bundle does not have the [proprio, estimate] layout the conversion needs."""


def camera_bundle(state_bundle: str | Path, localiser: str | Path, out: str | Path, camera_name: str,
                  name: Optional[str] = None, obs_name: str = "camera",
                  proprio_dim: int = PROPRIO_DIM, report: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Write the camera bundle ``out`` from ``state_bundle`` and the localiser weights; returns its manifest."""
    src, out = Path(state_bundle), Path(out)
    man = read_manifest(src)
    loc = loc_mod.load(str(localiser))
    est_dim = loc.cfg.out_dim
    states = [o for o in man["obs"] if o["kind"] == "state"]
    if len(man["obs"]) != 1 or len(states) != 1:
        raise CameraBundleError(f"{src}: expected one state input [proprio, estimate], got "
                                f"{[o['name'] for o in man['obs']]}")
    st = states[0]
    width = int(np.prod(st["shape"]))
    if width != proprio_dim + est_dim:
        raise CameraBundleError(f"{src}: state width {width}, expected {proprio_dim} (arm) + {est_dim} (estimate)")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    mean = np.asarray(st["norm"]["mean"], np.float64)
    std = np.asarray(st["norm"]["std"], np.float64)
    check = loc_mod.export_vision(loc, mean[proprio_dim:], std[proprio_dim:], str(out / "vision.onnx"))
    h, w = loc.cfg.image_size
    man["name"] = name or f"{man['name']}"
    man["obs"] = [
        {"name": "proprio", "kind": "state", "shape": [proprio_dim],
         "norm": {"mean": mean[:proprio_dim].tolist(), "std": std[:proprio_dim].tolist()}},
        {"name": obs_name, "kind": "image", "shape": [3, h, w], "graph": "vision", "features": est_dim,
         "preprocess": loc_mod.native_spec((h, w)), "camera": {"name": camera_name, "width": w, "height": h}},
    ]
    man["conditioning"] = {"layout": "history_flat",
                           "items": [{"obs": "proprio", "width": proprio_dim}, {"obs": obs_name, "width": est_dim}]}
    man["graphs"]["vision"] = {"file": "vision.onnx", "inputs": [{"name": "image", "shape": [-1, 3, h, w]}],
                               "outputs": [{"name": "features", "shape": [-1, est_dim]}]}
    man["localiser"] = {"label": loc.cfg.label, "keypoints": loc.cfg.keypoints, "channels": list(loc.cfg.channels),
                        "steps": loc.cfg.steps, "shift_px": loc.cfg.shift, "export_check": check,
                        **({"held_out": report} if report else {})}
    return write_manifest(out, man)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m energyflow.camera_bundle", description=__doc__.splitlines()[0])
    p.add_argument("--state-bundle", required=True, help="bundle trained on the localiser's policy data")
    p.add_argument("--localiser", required=True, help="localiser.pt (python -m energyflow.localiser)")
    p.add_argument("--camera", required=True, help="the camera's name (the recording's camera_name)")
    p.add_argument("--out", required=True)
    p.add_argument("--name", help="bundle name (default: the state bundle's)")
    p.add_argument("--report", help="localiser.json: its held-out errors go into the manifest")
    a = p.parse_args(argv)
    rep = None
    if a.report:
        r = json.loads(Path(a.report).read_text())
        rep = r.get("held_out_vs_label")
    try:
        m = camera_bundle(a.state_bundle, a.localiser, a.out, a.camera, a.name, report=rep)
    except (CameraBundleError, OSError) as e:
        print(f"camera_bundle: {e}")
        return 2
    print(f"wrote {a.out}: {m['name']}, camera {a.camera}, cond {m['cond_dim']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
