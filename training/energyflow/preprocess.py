"""Camera image preprocessing exactly as the manifest's ``preprocess`` block says.

RGB bytes [H,W,3] uint8 -> float32 0..255 -> bilinear resize to ``resize`` [h,w]
(``torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
antialias=False)``) -> center crop to ``crop`` [ch,cw] -> x/255 ->
per-channel (x - mean)/std -> CHW float32.

Center crop offsets: ``top = (h - ch) // 2``, ``left = (w - cw) // 2``.
``channel_order`` "RGB" means the input array is RGB; "BGR" input is reversed
to RGB first.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import torch
import torch.nn.functional as F


def default_spec(size: int = 96, pad: int = 8) -> Dict[str, Any]:
    """The manifest's default preprocess block (resize size+pad, center crop size)."""
    return {"resize": [size + pad, size + pad], "crop": [size, size], "channel_order": "RGB",
            "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}


def preprocess_batch(rgb: torch.Tensor, spec: Dict[str, Any]) -> torch.Tensor:
    """Torch version for training: ``rgb`` uint8 or float [B,H,W,3] (0..255) -> [B,3,ch,cw] float32."""
    x = rgb.to(torch.float32).permute(0, 3, 1, 2)
    if spec.get("channel_order", "RGB").upper() == "BGR":
        x = x.flip(1)
    rh, rw = (int(v) for v in spec["resize"])
    if (x.shape[2], x.shape[3]) != (rh, rw):
        x = F.interpolate(x, size=(rh, rw), mode="bilinear", align_corners=False, antialias=False)
    ch, cw = (int(v) for v in spec["crop"])
    if ch > rh or cw > rw:
        raise ValueError(f"crop {ch}x{cw} larger than resize {rh}x{rw}")
    top, left = (rh - ch) // 2, (rw - cw) // 2
    x = x[:, :, top:top + ch, left:left + cw] / 255.0
    mean = torch.tensor(spec["mean"], dtype=torch.float32, device=x.device).reshape(1, 3, 1, 1)
    std = torch.tensor(spec["std"], dtype=torch.float32, device=x.device).reshape(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()


def preprocess_image(rgb: np.ndarray, spec: Dict[str, Any]) -> np.ndarray:
    """One frame: ``rgb`` (H,W,3) uint8 -> (3,h,w) float32 per the manifest ``preprocess`` block."""
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an (H,W,3) image, got shape {rgb.shape}")
    if rgb.dtype != np.uint8:
        raise ValueError(f"expected uint8 pixels, got {rgb.dtype}")
    out = preprocess_batch(torch.from_numpy(np.ascontiguousarray(rgb))[None], spec)[0]
    return out.numpy().astype(np.float32)
