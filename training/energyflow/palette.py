"""Write the colours a camera bundle's demonstrations showed into its manifest: the unseen-colour stop.

A policy that acts from a fixed camera was shown a scene of few colours: the
table, the robot, the objects of its task. Something new in view (an object, a
hand, a tool left on the table) often brings a colour the scene never had.
This module cuts each channel into ``levels`` equal steps, marks the cells of
the ``levels``³ RGB cube that any pixel of the demonstration frames fell in,
and writes them as the image input's ``palette`` (docs/bundle.md). The runtime
counts a frame's pixels outside it (``camera.Palette``) and stops the arm when
two frames running have ``safety.watchdog.camera_unseen`` or more
(docs/safety.md).

The runtime decodes the camera's JPEG frames with Go's decoder, whose chroma
upsampling is not libjpeg's that decoded the recorded demonstrations: along
colour edges a pixel can differ by tens of levels. So the palette grows by
``grow`` steps: a cell one step (along one channel) from a seen one counts as
seen. Measured on ButtonPress's top view through the runtime's decoder
(docs/camera-policy.md, "Unseen colours"), ungrown, two frames running of a
clean scene showed up to 5 unseen pixels; grown by one, at most 1, and the
object fault's 5 cm box still 8 or more.

The last ``held_out`` share of the demonstrations is kept out of the palette
and read through it: the most unseen pixels in one of their frames is the
palette's false-alarm level, written beside it.

    python -m energyflow.palette --bundle B --data DEMOS.hdf5 [--levels 16] [--grow 1] [--held-out 0.1]
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np

from .bundle import BundleError, read_manifest, write_manifest

#: steps per channel the runtime accepts (camera.NewPalette)
LEVELS = (2, 4, 8, 16, 32, 64)


class PaletteError(ValueError):
    """The bundle or the demonstrations cannot give a palette."""


def cell_index(frames: np.ndarray, levels: int) -> np.ndarray:
    """The cell of every pixel of ``frames`` (uint8 [..., 3]): (r·L + g)·L + b on each channel's step."""
    if levels not in LEVELS:
        raise PaletteError(f"levels {levels}: want one of {LEVELS}")
    shift = 8 - int(np.log2(levels))
    q = (np.asarray(frames, dtype=np.uint8) >> shift).astype(np.int32)
    return (q[..., 0] * levels + q[..., 1]) * levels + q[..., 2]


def seen_cells(episodes: Iterable[np.ndarray], levels: int) -> tuple[np.ndarray, int]:
    """The cells (bool [levels³]) any pixel of the episodes' frames fell in, and the number of frames."""
    seen = np.zeros(levels ** 3, dtype=bool)
    n = 0
    for frames in episodes:
        seen[np.unique(cell_index(frames, levels))] = True
        n += len(frames)
    return seen, n


def grow_cells(seen: np.ndarray, levels: int, steps: int) -> np.ndarray:
    """``seen`` with every cell within ``steps`` steps of a seen one, along one channel, marked too."""
    s = seen.reshape(levels, levels, levels)
    for _ in range(steps):
        g = s.copy()
        for ax in range(3):
            lo = [slice(None)] * 3
            hi = [slice(None)] * 3
            lo[ax], hi[ax] = slice(0, -1), slice(1, None)
            g[tuple(lo)] |= s[tuple(hi)]
            g[tuple(hi)] |= s[tuple(lo)]
        s = g
    return s.reshape(-1)


def unseen_pixels(frames: np.ndarray, seen: np.ndarray, levels: int) -> np.ndarray:
    """Per frame of ``frames`` (uint8 [N, H, W, 3]): how many pixels fall outside ``seen``."""
    return (~seen[cell_index(frames, levels)]).reshape(len(frames), -1).sum(axis=1)


def encode(seen: np.ndarray) -> str:
    """The manifest's ``seen``: cell c at bit c%8 of byte c/8, standard base64 (camera.DecodePalette)."""
    return base64.b64encode(np.packbits(seen.astype(np.uint8), bitorder="little").tobytes()).decode("ascii")


def decode(s: str, levels: int) -> np.ndarray:
    """The cells ``encode`` wrote."""
    b = np.frombuffer(base64.b64decode(s), dtype=np.uint8)
    return np.unpackbits(b, bitorder="little").astype(bool)[: levels ** 3]


def _image_obs(man: Dict[str, Any], bundle: Path) -> Dict[str, Any]:
    images = [o for o in man["obs"] if o["kind"] == "image"]
    if len(images) != 1:
        raise PaletteError(f"{bundle}: expected a bundle with one image input, got {len(images)}")
    return images[0]


def build(bundle: str | Path, data: str | Path, levels: int = 16, grow: int = 1,
          held_out: float = 0.1) -> Dict[str, Any]:
    """Write the palette of ``data``'s frames, grown by ``grow`` steps, into ``bundle``'s image input; return the block."""
    import h5py  # heavy optional dependency (HDF5 C library): only when demonstrations are read

    if not 0 <= held_out < 1:
        raise PaletteError(f"held_out {held_out}: want a share in [0, 1)")
    if grow < 0:
        raise PaletteError(f"grow {grow}: want a number of steps >= 0")
    bundle = Path(bundle)
    man = read_manifest(bundle)
    cam = _image_obs(man, bundle)
    spec = cam.get("camera") or {}
    with h5py.File(data, "r") as f:
        if "data" not in f:
            raise PaletteError(f"{data}: no group 'data' (not a demonstrations file)")
        name = f["data"].attrs.get("camera_name")
        if spec.get("name") and name is not None and name != spec["name"]:
            raise PaletteError(f"{data}: recorded with camera {name!r}, the bundle's is {spec['name']!r}")
        keys = sorted(f["data"].keys(), key=lambda k: int(k.rsplit("_", 1)[-1]))
        if len(keys) < 2:
            raise PaletteError(f"{data}: {len(keys)} demonstrations, want at least 2")
        n_held = int(round(held_out * len(keys)))
        train, held = keys[:len(keys) - n_held], keys[len(keys) - n_held:]

        def frames(k: str) -> np.ndarray:
            obs = f["data"][k]["obs"]
            if cam["name"] not in obs:
                raise PaletteError(f"{data}: {k} has no obs/{cam['name']} (record with --camera)")
            x = obs[cam["name"]][:]
            want = (spec["height"], spec["width"]) if spec else x.shape[1:3]
            if x.ndim != 4 or x.shape[3] != 3 or tuple(x.shape[1:3]) != tuple(want):
                raise PaletteError(f"{data}: {k}'s frames are {x.shape[1:]}, the bundle's camera is "
                                   f"{want[1]}x{want[0]} RGB")
            return x

        seen, n = seen_cells((frames(k) for k in train), levels)
        seen = grow_cells(seen, levels, grow)
        worst, n_held_frames = 0, 0
        for k in held:
            u = unseen_pixels(frames(k), seen, levels)
            worst, n_held_frames = max(worst, int(u.max())), n_held_frames + len(u)
    block = {"levels": levels, "seen": encode(seen), "grow": grow, "frames": n,
             "held_out": {"frames": n_held_frames, "max_unseen": worst}}
    cam["palette"] = block
    write_manifest(bundle, man)
    return block


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m energyflow.palette", description=__doc__.split("\n")[0])
    p.add_argument("--bundle", required=True, help="the camera bundle (its manifest is rewritten)")
    p.add_argument("--data", required=True, help="camera demonstrations (sim.record --camera, the bundle's camera)")
    p.add_argument("--levels", type=int, default=16, help=f"steps per channel, one of {LEVELS} (16)")
    p.add_argument("--grow", type=int, default=1,
                   help="cells this many steps (along one channel) from a seen one count as seen: the runtime's "
                        "JPEG decoder is not the recorder's (1)")
    p.add_argument("--held-out", type=float, default=0.1,
                   help="share of the demonstrations (the last ones) kept out and read through the palette (0.1)")
    a = p.parse_args(argv)
    try:
        block = build(a.bundle, a.data, levels=a.levels, grow=a.grow, held_out=a.held_out)
    except (PaletteError, BundleError, OSError) as e:
        print(f"palette: {e}", file=sys.stderr)
        return 2
    seen = decode(block["seen"], block["levels"])
    print(json.dumps({"levels": block["levels"], "grow": block["grow"], "cells": int(seen.sum()), "of": block["levels"] ** 3,
                      "frames": block["frames"], "held_out": block["held_out"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
