"""Writes the preprocessing golden fixtures (run once by hand, outputs committed).

Runs the training toolkit's own ``preprocess_image`` (training/energyflow/
preprocess.py: torch bilinear resize, align_corners=False, no antialias, on
float32 0..255 -> center crop with floor offsets -> /255 -> (x-mean)/std) on
testsrc2_320x240_yuyv_ref.png and stores each result as raw little-endian
float32 CHW plus preprocess_golden.json describing the cases.

    PYTHONPATH=training .venv/bin/python camera/testdata/gen_preprocess_golden.py

(``make camera-fixtures``; the toolkit is also importable without PYTHONPATH
once ``make deps`` has installed it into .venv.)
"""
import json
import os

import numpy as np
from PIL import Image

from energyflow.preprocess import preprocess_image

here = os.path.dirname(os.path.abspath(__file__))

IMAGENET = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
CASES = [
    # The manifest's default block (docs/bundle.md): 104x104 -> crop 96x96.
    {"name": "default_96", "spec": {"resize": [104, 104], "crop": [96, 96], "channel_order": "RGB", **IMAGENET}},
    # Non-square, odd crop margins (floor offsets), BGR, other statistics.
    {"name": "odd_bgr", "spec": {"resize": [60, 90], "crop": [51, 77], "channel_order": "BGR",
                                 "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.3, 0.25]}},
    # Upscaling, crop away from the borders.
    {"name": "upscale_crop", "spec": {"resize": [250, 330], "crop": [40, 50], "channel_order": "RGB", **IMAGENET}},
    # Resize to the input size: interpolate is skipped; crop only.
    {"name": "crop_only", "spec": {"resize": [240, 320], "crop": [32, 48], "channel_order": "RGB", **IMAGENET}},
]

src = "testsrc2_320x240_yuyv_ref.png"
rgb = np.array(Image.open(os.path.join(here, src)).convert("RGB"), dtype=np.uint8)
out = []
for case in CASES:
    t = preprocess_image(rgb, case["spec"])
    fn = "preprocess_%s.f32" % case["name"]
    t.astype("<f4").tofile(os.path.join(here, fn))
    out.append({"name": case["name"], "input": src, "spec": case["spec"], "shape": list(t.shape), "file": fn})
    print(case["name"], t.shape, float(t.min()), float(t.max()))
with open(os.path.join(here, "preprocess_golden.json"), "w") as f:
    json.dump({"generator": "camera/testdata/gen_preprocess_golden.py (training/energyflow/preprocess.py)",
               "cases": out}, f, indent=1)
