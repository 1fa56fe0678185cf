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
colour edges a pixel can differ by tens of levels. Where the demonstrations
kept the frames as the camera sent them (``obs/camera_jpeg``, which
``sim.record`` writes), they are decoded as the runtime decodes them
(``runtime_rgb``: chroma repeated, not interpolated) and the palette is built
from those; otherwise from the recorded pixels. Either way it grows by
``grow`` steps: a cell one step (along one channel) from a seen one counts as
seen. Measured on ButtonPress's top view through the runtime's decoder
(docs/camera-policy.md, "Unseen colours"), ungrown, two frames running of a
clean scene showed up to 5 unseen pixels; grown by one, at most 1, and the
object fault's 5 cm box still 8 or more.

The last ``held_out`` share of the demonstrations is kept out of the palette
and read through it: the most unseen pixels in one of their frames is the
palette's false-alarm level, written beside it.

A top view looks down on the arm, which hides what lies beside the hand. A
second fixed camera that the policy does not read, a *watch camera*, sees
past it: ``--watch`` builds the palette of demonstrations recorded from that
camera (the same episodes, ``sim.record --camera --camera-name NAME``) and
writes it as the manifest's ``watch_camera`` block, which the runtime reads
through ``camera_watch`` (docs/safety.md, "Watch camera").

    python -m energyflow.palette --bundle B --data DEMOS.hdf5 [--watch] [--levels 16] [--grow 1] [--held-out 0.1]
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np
from PIL import Image, JpegImagePlugin

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


#: camera.ycbcrToRGB's full-range YCbCr → RGB factors, 16.16 fixed point (camera/yuv.go)
_RV, _GU, _GV, _BU, _HALF = 91881, 22554, 46802, 116130, 1 << 15


def runtime_rgb(jpeg: bytes) -> np.ndarray:
    """A JPEG frame decoded as the runtime's camera loop decodes it (camera.ToRGB), uint8 [H, W, 3].

    Go's decoder repeats each chroma sample over the pixels it covers; libjpeg (Pillow)
    interpolates them. Luma comes from a full-size YCbCr decode (luma is never resampled),
    chroma at its stored resolution from a decode scaled by the subsampling (libjpeg then
    runs the chroma planes' inverse DCT unscaled), and the two are combined with the
    runtime's integer conversion: the result differs from the runtime's by the two
    inverse DCTs' rounding, a level or so on a few per cent of the values. Baseline 4:2:0
    and 4:4:4 frames (what MJPEG cameras and the simulator send); others are refused.
    """
    im = Image.open(io.BytesIO(jpeg))
    if im.format != "JPEG" or im.mode != "RGB":
        raise PaletteError(f"a {im.format} {im.mode} frame: want a colour JPEG")
    sampling = JpegImagePlugin.get_sampling(im)
    if sampling not in (0, 2):
        layout = {1: "4:2:2"}.get(sampling, "other than 4:4:4, 4:2:2 or 4:2:0 (sampling factors " +
                                  ", ".join(f"{h}x{v}" for _, h, v, _ in getattr(im, "layer", [])) + ")")
        raise PaletteError(f"JPEG chroma subsampling {layout}: decoded as the runtime does only for 4:2:0 and 4:4:4")
    w, h = im.size
    im.draft("YCbCr", (w, h))
    ycc = np.asarray(im, dtype=np.int64)
    if sampling == 2:
        # libjpeg scales by 1/2 when asked for at most half the size; the chroma planes,
        # ceil(w/2) x ceil(h/2), then decode unscaled
        half = Image.open(io.BytesIO(jpeg))
        half.draft("YCbCr", (max(1, w // 2), max(1, h // 2)))
        c = np.asarray(half, dtype=np.int64)
        want = ((h + 1) // 2, (w + 1) // 2)
        if c.shape[:2] != want:
            raise PaletteError(f"a {w}x{h} 4:2:0 frame: its chroma planes decoded at {c.shape[1]}x{c.shape[0]}, "
                               f"expected {want[1]}x{want[0]}")
        c = np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)[:h, :w]
        ycc = np.concatenate([ycc[..., :1], c[..., 1:]], axis=-1)
    yy = (ycc[..., 0] << 16) + _HALF
    u, v = ycc[..., 1] - 128, ycc[..., 2] - 128
    rgb = np.stack([(yy + _RV * v) >> 16, (yy - _GU * u - _GV * v) >> 16, (yy + _BU * u) >> 16], axis=-1)
    return np.clip(rgb, 0, 255).astype(np.uint8)


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
          held_out: float = 0.1, watch: bool = False) -> Dict[str, Any]:
    """Write the palette of ``data``'s frames, grown by ``grow`` steps, into ``bundle``'s image input; return the block.

    watch: ``data`` was recorded from a second camera, the bundle's watch camera: the palette
    goes into the manifest's ``watch_camera`` block with the camera's name and frame size.
    """
    import h5py  # heavy optional dependency (HDF5 C library): only when demonstrations are read

    if not 0 <= held_out < 1:
        raise PaletteError(f"held_out {held_out}: want a share in [0, 1)")
    if grow < 0:
        raise PaletteError(f"grow {grow}: want a number of steps >= 0")
    bundle = Path(bundle)
    man = read_manifest(bundle)
    own = _image_obs(man, bundle) if not watch else next((o for o in man["obs"] if o["kind"] == "image"), None)
    cam: Dict[str, Any] = own if not watch else {"name": "camera"}  # sim.record writes the frames as obs/camera
    spec = (cam.get("camera") or {}) if not watch else {}
    with h5py.File(data, "r") as f:
        if "data" not in f:
            raise PaletteError(f"{data}: no group 'data' (not a demonstrations file)")
        name = f["data"].attrs.get("camera_name")
        if watch:
            own_name = ((own or {}).get("camera") or {}).get("name")
            if name is None:
                raise PaletteError(f"{data}: names no camera (record it with sim.record --camera --camera-name NAME)")
            if name == own_name:
                raise PaletteError(f"{data}: recorded with {name!r}, the policy's own camera: a watch camera is another one")
        elif spec.get("name") and name is not None and name != spec["name"]:
            raise PaletteError(f"{data}: recorded with camera {name!r}, the bundle's is {spec['name']!r}")
        keys = sorted(f["data"].keys(), key=lambda k: int(k.rsplit("_", 1)[-1]))
        with_jpeg = sum(f"{cam['name']}_jpeg" in f["data"][k]["obs"] for k in keys)
        if 0 < with_jpeg < len(keys):
            raise PaletteError(f"{data}: {with_jpeg} of {len(keys)} demonstrations keep their JPEG frames "
                               f"(obs/{cam['name']}_jpeg): record them alike")
        decoded = "runtime" if with_jpeg else "recorder"
        if len(keys) < 2:
            raise PaletteError(f"{data}: {len(keys)} demonstrations, want at least 2")
        n_held = int(round(held_out * len(keys)))
        train, held = keys[:len(keys) - n_held], keys[len(keys) - n_held:]

        def frames(k: str) -> np.ndarray:
            obs = f["data"][k]["obs"]
            jpeg = f"{cam['name']}_jpeg"
            if jpeg in obs:  # as the camera sent them: decoded as the runtime does
                x = np.stack([runtime_rgb(b.tobytes()) for b in obs[jpeg][:]])
            elif cam["name"] not in obs:
                raise PaletteError(f"{data}: {k} has no obs/{cam['name']} (record with --camera)")
            else:
                x = obs[cam["name"]][:]
            want = (spec["height"], spec["width"]) if spec else x.shape[1:3]
            if x.ndim != 4 or x.shape[3] != 3 or tuple(x.shape[1:3]) != tuple(want):
                raise PaletteError(f"{data}: {k}'s frames are {x.shape[1:]}, the bundle's camera is "
                                   f"{want[1]}x{want[0]} RGB")
            return x

        if watch:  # the watch camera's frame size is its recording's (its first demonstration's)
            first = frames(keys[0])
            spec = {"name": str(name), "width": int(first.shape[2]), "height": int(first.shape[1])}
        seen, n = seen_cells((frames(k) for k in train), levels)
        seen = grow_cells(seen, levels, grow)
        worst, n_held_frames = 0, 0
        for k in held:
            u = unseen_pixels(frames(k), seen, levels)
            worst, n_held_frames = max(worst, int(u.max())), n_held_frames + len(u)
    block = {"levels": levels, "seen": encode(seen), "grow": grow, "frames": n, "decoded": decoded,
             "held_out": {"frames": n_held_frames, "max_unseen": worst}}
    if watch:
        man["watch_camera"] = {"camera": spec, "palette": block}
    else:
        cam["palette"] = block
    write_manifest(bundle, man)
    return block


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m energyflow.palette", description=__doc__.split("\n")[0])
    p.add_argument("--bundle", required=True, help="the camera bundle (its manifest is rewritten)")
    p.add_argument("--data", required=True, help="camera demonstrations (sim.record --camera, the bundle's camera; "
                                                 "with --watch, the watch camera's)")
    p.add_argument("--watch", action="store_true",
                   help="--data is a second camera's, the bundle's watch camera: write its palette as watch_camera")
    p.add_argument("--levels", type=int, default=16, help=f"steps per channel, one of {LEVELS} (16)")
    p.add_argument("--grow", type=int, default=1,
                   help="cells this many steps (along one channel) from a seen one count as seen: the runtime's "
                        "JPEG decoder is not the recorder's (1)")
    p.add_argument("--held-out", type=float, default=0.1,
                   help="share of the demonstrations (the last ones) kept out and read through the palette (0.1)")
    a = p.parse_args(argv)
    try:
        block = build(a.bundle, a.data, levels=a.levels, grow=a.grow, held_out=a.held_out, watch=a.watch)
    except (PaletteError, BundleError, OSError) as e:
        print(f"palette: {e}", file=sys.stderr)
        return 2
    seen = decode(block["seen"], block["levels"])
    print(json.dumps({"levels": block["levels"], "grow": block["grow"], "cells": int(seen.sum()), "of": block["levels"] ** 3,
                      "frames": block["frames"], "held_out": block["held_out"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
