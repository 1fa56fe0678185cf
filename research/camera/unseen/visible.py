"""How many pixels of the camera's frames the object fault's box changes: what any image check could see of it.

    .venv/bin/python -m research.camera.unseen.frames --task hammer --out build/unseen/hammer-object --seed 50000 --episodes 10 --fault object
    .venv/bin/python -m research.camera.unseen.frames --task hammer --out build/unseen/hammer-objectfree --seed 50000 --episodes 10
    .venv/bin/python -m research.camera.unseen.visible build/unseen/hammer-object build/unseen/hammer-objectfree

The box is drawn, not simulated, and on hammer it leaves the state alone, so
the scripted expert drives the same seeds the same way with and without it:
the frames differ only where the box shows. A pixel counts as changed when a
channel differs by more than 40 levels (the JPEG noise of one scene rendered
twice is 0: the frames before the onset are identical). Per episode: the
changed pixels of two frames running (the smaller, as the unseen-colour
stop counts) at their largest over the fault's first second (steps 30–39),
and the most in any frame of the episode.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PIL import Image

STEPS = 70  # frames.STEPS
ONSET = 30  # frames' fault step
CHANGED = 40


def frames(d: Path) -> np.ndarray:
    """`frames`' JPEGs of folder d, decoded, as int [episodes, STEPS, H, W, 3]."""
    a = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in sorted(d.glob("*.jpg"))]).astype(np.int16)
    return a.reshape(-1, STEPS, *a.shape[1:])


def changed(with_box: np.ndarray, without: np.ndarray) -> np.ndarray:
    """Changed pixels per frame, int [episodes, STEPS]; refuses scenes that differ before the onset."""
    if with_box.shape != without.shape:
        raise SystemExit(f"visible: {with_box.shape} frames against {without.shape}: the same seeds and episodes, please")
    diff = np.abs(with_box - without).max(axis=-1) > CHANGED
    n = diff.reshape(*diff.shape[:2], -1).sum(axis=-1)
    if n[:, :ONSET].any():
        raise SystemExit("visible: the frames differ before the onset: not the same scenes")
    return n


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("with_box", type=Path, help="frames of the object episodes")
    p.add_argument("without", type=Path, help="frames of the same seeds without the fault")
    a = p.parse_args(argv)
    n = changed(frames(a.with_box), frames(a.without))
    two = np.minimum(n[:, 1:], n[:, :-1])
    first = two[:, ONSET:ONSET + 9].max(axis=1)  # pairs ending at steps 31-39
    print(f"{a.with_box}: {len(n)} episodes")
    print("| episode | changed pixels, two frames running, first second | most in one frame, whole episode |")
    print("|---|---|---|")
    for e in range(len(n)):
        print(f"| {e} | {first[e]} | {n[e].max()} |")
    print(f"first second: median {np.median(first):g}, {int((first >= 6).sum())} of {len(n)} at 6 or more")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
