"""How many pixels fall outside a camera bundle's palette, decoded by libjpeg (as recorded) and by the runtime (Go).

    .venv/bin/python -m research.camera.unseen.table --clean build/unseen/button-press-clean \
        --object build/unseen/button-press-object --data build/cover/button-press-topview-800.hdf5 \
        [--json research/camera/unseen/button-press.json]
    .venv/bin/python -m research.camera.unseen.table --clean build/unseen/hammer-clean \
        --object build/unseen/hammer-object --runtime-frames build/unseen/hammer-palette
    .venv/bin/python -m research.camera.unseen.table --clean build/unseen/views/hammer-corner-clean \
        --object build/unseen/views/hammer-corner-object --bundle-watch bundles/metaworld-hammer-camera

The folders are `frames`' JPEGs with `decode`'s OUT.rgb beside them
(DIR.rgb). The bundle's palette is rebuilt from its demonstrations at each
grow (`energyflow.palette`'s split: the first 90 % of the demonstrations --data
holds) and read on: the clean frames (the count the stop compares,
the smaller of two frames running, and its largest), and the object
fault's first second (steps 30–39: its two-frame count at its largest, per
episode). docs/camera-policy.md, "Unseen colours", quotes it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from PIL import Image

from energyflow import palette as P

STEPS = 70  # frames.STEPS


def jpegs(d: Path) -> np.ndarray:
    return np.stack([np.asarray(Image.open(f).convert("RGB")) for f in sorted(d.glob("*.jpg"))])


def go(d: Path) -> np.ndarray:
    return np.fromfile(d.with_suffix(".rgb"), np.uint8).reshape(-1, 96, 96, 3)


def two(u: np.ndarray) -> np.ndarray:
    """The stop's count: the smaller of each frame's and the one before it, within an episode."""
    u = u.reshape(-1, STEPS)
    return np.minimum(u[:, 1:], u[:, :-1])


def shipped_watch(bundle: Path, clean: np.ndarray, obj: np.ndarray) -> int:
    """The shipped watch palette's reading of clean frames and of the box's first second."""
    w = json.loads((bundle / "manifest.json").read_text()).get("watch_camera")
    if w is None:
        raise SystemExit(f"table: {bundle} has no watch_camera")
    pl = w["palette"]
    seen = P.decode(pl["seen"], pl["levels"])
    uc = two(P.unseen_pixels(clean, seen, pl["levels"]))
    uo = two(P.unseen_pixels(obj, seen, pl["levels"]))[:, 30:39].max(axis=1)
    print(f"{bundle}: watch camera {w['camera']['name']}, palette of {pl['frames']} frames "
          f"(decoded: {pl.get('decoded', 'recorder')}), grow {pl['grow']}, {int(seen.sum())} cells")
    print("| clean, runtime: largest two-frame count | object's first second, runtime: two-frame count per episode |")
    print("|---|---|")
    print(f"| {int(uc.max())} | {', '.join(map(str, uo))} (least {min(uo)}) |")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clean", required=True, type=Path)
    p.add_argument("--object", required=True, type=Path)
    p.add_argument("--data", type=Path, help="the camera demonstrations the palette is built from")
    p.add_argument("--runtime-frames", type=Path,
                   help="build the palette from these frames as the runtime decodes them (a `frames` folder with "
                        "`decode`'s DIR.rgb beside it) instead of from --data's libjpeg-decoded demonstrations")
    p.add_argument("--bundle-watch", type=Path,
                   help="read the frames through this bundle's watch-camera palette as shipped (no grow rows)")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    if a.bundle_watch is not None:
        return shipped_watch(a.bundle_watch, go(a.clean), go(a.object))
    if (a.data is None) == (a.runtime_frames is None):
        p.error("give the palette's frames: --data (demonstrations) or --runtime-frames, one of them")
    if a.runtime_frames is not None:
        seen0, n = P.seen_cells([go(a.runtime_frames)], 16)
        source = f"{a.runtime_frames}.rgb (the runtime's decoder)"
        print(f"{source}: {n} frames")
    else:
        import h5py  # deferred: the demonstrations' HDF5 reader, only for --data

        with h5py.File(a.data) as f:
            keys = sorted(f["data"].keys(), key=lambda k: int(k.rsplit("_", 1)[-1]))
            train = keys[: len(keys) - int(round(0.1 * len(keys)))]
            seen0, n = P.seen_cells((f["data"][k]["obs/camera"][:] for k in train), 16)
        source = f"{a.data} (libjpeg, as recorded)"
        print(f"{a.data}: {len(train)} of {len(keys)} demonstrations")
    clean = {"libjpeg": jpegs(a.clean), "runtime": go(a.clean)}
    obj = go(a.object)
    d = np.abs(clean["runtime"].astype(int) - clean["libjpeg"].astype(int))
    decoders = {"share_differing": float((d != 0).mean()), "mean_abs": float(d.mean()), "max_abs": int(d.max())}
    print(f"the runtime's decoder against libjpeg on the clean frames: {100 * decoders['share_differing']:.0f} % of "
          f"channel values differ, mean |difference| {decoders['mean_abs']:.2f}, largest {decoders['max_abs']}")
    rows: List[Dict[str, Any]] = []
    print(f"palette: 16 levels, {n} demonstration frames; clean frames {len(clean['runtime'])}, object episodes {len(obj) // STEPS}")
    print("| grow | cells | clean, libjpeg: largest frame | clean, runtime: largest frame | clean, runtime: largest two-frame count | object's first second, runtime: two-frame count per episode |")
    print("|---|---|---|---|---|---|")
    for grow in (0, 1, 2):
        seen = P.grow_cells(seen0, 16, grow)
        ul, ur = (P.unseen_pixels(clean[k], seen, 16) for k in ("libjpeg", "runtime"))
        uo = two(P.unseen_pixels(obj, seen, 16))[:, 30:39].max(axis=1)  # pairs ending at steps 31-39
        r = {"grow": grow, "cells": int(seen.sum()), "clean_libjpeg_max": int(ul.max()), "clean_runtime_max": int(ur.max()),
             "clean_runtime_two_max": int(two(ur).max()), "object_two_first_second": [int(x) for x in uo]}
        rows.append(r)
        r["clean_runtime_two_hist"] = {int(k): int(v) for k, v in zip(*np.unique(two(ur), return_counts=True))}
        print(f"| {grow} | {r['cells']} | {r['clean_libjpeg_max']} | {r['clean_runtime_max']} | {r['clean_runtime_two_max']} | "
              f"{', '.join(map(str, r['object_two_first_second']))} (least {min(uo)}) |")
    if a.json:
        a.json.write_text(json.dumps({"data": str(a.data), "palette_from": source, "decoders": decoders, "demonstration_frames": n, "clean_frames": len(clean["runtime"]),
                                      "object_episodes": len(obj) // STEPS, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
