"""A camera localiser: where the task's object is, read from one frame.

The first stage of the two-stage camera policy (docs/camera-policy.md): a
small convolutional net with spatial-softmax keypoints (as robomimic and
LeRobot's Diffusion Policy do) and GroupNorm reads one preprocessed camera
frame and regresses a target position in metres. Its labels come from the
demonstrations' own kinematics, which any real robot's demonstrations have:
the hand's position at the step the task succeeds (``success``) or at the
step the gripper first closes (``grasp``). The simulator's object positions
are only ever used to *measure* the error, never as an input.

Three uses:

* ``train_localiser`` fits it (random shifts of a few pixels at the native
  resolution, no upsampling);
* ``cross_fit`` predicts every demonstration frame with a model that did not
  see that frame's episode, so the policy trains on estimates as noisy as the
  ones it gets on the robot;
* ``VisionGraph`` wraps it for export as the bundle's vision graph, whose
  features are the estimate standardised with the policy's statistics.

The spatial softmax is written with MaxPool (over the whole map), Sub, Exp,
ReduceSum, Div and MatMul only, so the graph stays inside the operator set TensorRT 10 parses.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import export
from .preprocess import preprocess_batch

LABEL_KINDS = ("success", "grasp")


def native_spec(size: Tuple[int, int]) -> Dict[str, Any]:
    """The preprocess block of a localiser: no resize, no crop (native pixels), ImageNet mean/std."""
    h, w = size
    return {"resize": [h, w], "crop": [h, w], "channel_order": "RGB",
            "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}


class SpatialSoftmax(nn.Module):
    """Feature maps [B,C,H,W] -> expected keypoint coordinates [B,2C] in [-1, 1] (x then y per map).

    A learned temperature sharpens the softmax. Built from exportable ops only.
    """

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        self.height, self.width = int(height), int(width)
        ys, xs = torch.meshgrid(torch.linspace(-1.0, 1.0, height), torch.linspace(-1.0, 1.0, width), indexing="ij")
        self.register_buffer("grid", torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1))  # [HW, 2]
        self.log_temp = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        x = x * torch.exp(-self.log_temp)
        # the max over the map (for a stable exp) as a full-map MaxPool: an op TensorRT parses
        x = x - F.max_pool2d(x, kernel_size=(self.height, self.width))
        e = torch.exp(x.reshape(-1, c, self.height * self.width))
        p = e / e.sum(dim=-1, keepdim=True)
        return torch.matmul(p, self.grid).reshape(-1, 2 * c)


def _gn(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(max(1, c // 8), c)


@dataclass
class LocaliserConfig:
    """Architecture and training recipe; written next to the weights."""

    image_size: Tuple[int, int] = (96, 96)
    channels: Tuple[int, int, int] = (16, 32, 32)
    keypoints: int = 32
    out_dim: int = 3
    label: str = "success"
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    shift: int = 2
    seed: int = 0


class Localiser(nn.Module):
    """Preprocessed frame [B,3,H,W] -> target position [B,out_dim] in metres.

    conv k5 s2 -> conv k3 s2 -> conv k3 (GroupNorm, ReLU) -> 1x1 to keypoint
    maps -> spatial softmax -> linear. The label's mean and scale are buffers,
    so the output is in the label's units.
    """

    def __init__(self, cfg: LocaliserConfig) -> None:
        super().__init__()
        c1, c2, c3 = cfg.channels
        self.cfg = cfg
        self.trunk = nn.Sequential(
            nn.Conv2d(3, c1, 5, 2, 2), _gn(c1), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, 2, 1), _gn(c2), nn.ReLU(),
            nn.Conv2d(c2, c3, 3, 1, 1), _gn(c3), nn.ReLU(),
            nn.Conv2d(c3, cfg.keypoints, 1),
        )
        h, w = cfg.image_size
        self.softmax = SpatialSoftmax(math.ceil(h / 4), math.ceil(w / 4))
        self.head = nn.Sequential(nn.Linear(2 * cfg.keypoints, 128), nn.ReLU(), nn.Linear(128, cfg.out_dim))
        self.register_buffer("label_mean", torch.zeros(cfg.out_dim))
        self.register_buffer("label_std", torch.ones(cfg.out_dim))

    def keypoints(self, x: torch.Tensor) -> torch.Tensor:
        """[B,3,H,W] -> [B, 2·keypoints] coordinates in [-1, 1]."""
        return self.softmax(self.trunk(x))

    def forward_normalised(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.keypoints(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_normalised(x) * self.label_std + self.label_mean


class VisionGraph(nn.Module):
    """The bundle's vision graph: preprocessed frame -> the estimate standardised as the policy saw it."""

    def __init__(self, loc: Localiser, feat_mean: np.ndarray, feat_std: np.ndarray) -> None:
        super().__init__()
        self.loc = loc
        self.register_buffer("feat_mean", torch.as_tensor(np.asarray(feat_mean, np.float32)))
        self.register_buffer("feat_std", torch.as_tensor(np.asarray(feat_std, np.float32)))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return (self.loc(image) - self.feat_mean) / self.feat_std


# --- labels ------------------------------------------------------------------


def episode_label(proprio: np.ndarray, actions: np.ndarray, success_step: int, kind: str) -> np.ndarray:
    """One episode's label from its own kinematics: the hand's xyz at the success step
    (``success``) or at the first step the gripper command closes (``grasp``; the
    success step when it never closes). ``proprio`` is [L, >=3] with the hand xyz first."""
    if kind not in LABEL_KINDS:
        raise ValueError(f"label {kind!r}: expected one of {', '.join(LABEL_KINDS)}")
    step = int(success_step)
    if kind == "grasp":
        closed = np.nonzero(actions[:, 3] > 0.0)[0]
        if closed.size:
            step = int(closed[0])
    step = min(max(step, 0), len(proprio) - 1)
    return np.asarray(proprio[step, :3], np.float32)


@dataclass
class CameraDemos:
    """Every frame of a camera demonstration file, flattened, with per-frame episode ids."""

    frames: np.ndarray        # [N, H, W, 3] uint8
    episode: np.ndarray       # [N] int
    labels: np.ndarray        # [E, 3] per episode
    truth: Optional[np.ndarray]  # [N, 3] the simulator's object position (for measuring only)
    lengths: List[int] = field(default_factory=list)
    camera_name: str = ""


def load_camera_demos(path: str, label: str, camera_key: str = "camera",
                      truth_slice: Optional[Tuple[int, int]] = (4, 7)) -> CameraDemos:
    """Read frames, the episode of each and the per-episode labels from a recording."""
    import h5py  # optional dependency of the toolkit's data paths

    frames: List[np.ndarray] = []
    episode: List[np.ndarray] = []
    labels: List[np.ndarray] = []
    truth: List[np.ndarray] = []
    lengths: List[int] = []
    with h5py.File(path, "r") as f:
        data = f["data"]
        names = sorted(data.keys(), key=lambda n: int(n.split("_")[1]))
        cam_name = str(data.attrs.get("camera_name", ""))
        for i, n in enumerate(names):
            g = data[n]
            if camera_key not in g["obs"]:
                raise ValueError(f"{path}: {n} has no obs/{camera_key}: record with --camera")
            cam = g["obs"][camera_key][:]
            state = g["obs"]["state"][:] if "state" in g["obs"] else None
            proprio = g["obs"]["proprio"][:]
            actions = g["actions"][:]
            step = int(g.attrs.get("success_step", len(actions) - 1))
            frames.append(cam)
            episode.append(np.full(len(cam), i))
            labels.append(episode_label(proprio, actions, step, label))
            lengths.append(len(cam))
            if state is not None and truth_slice is not None:
                truth.append(state[:, truth_slice[0]:truth_slice[1]])
    return CameraDemos(np.concatenate(frames), np.concatenate(episode), np.stack(labels),
                       np.concatenate(truth) if truth else None, lengths, cam_name)


# --- training ----------------------------------------------------------------


def _shift(x: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    """Random translation by up to ``pad`` pixels, replicate padding (DrQ)."""
    if pad <= 0:
        return x
    b, _, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    ox = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    oy = torch.randint(0, 2 * pad + 1, (b,), generator=gen)
    return torch.stack([xp[i, :, int(oy[i]):int(oy[i]) + h, int(ox[i]):int(ox[i]) + w] for i in range(b)])


def train_localiser(frames: np.ndarray, targets: np.ndarray, cfg: LocaliserConfig,
                    log_every: int = 500, log=print) -> Localiser:
    """Fit a localiser on frames [N,H,W,3] uint8 with per-frame targets [N,out_dim]."""
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    cfg = LocaliserConfig(**{**asdict(cfg), "image_size": tuple(frames.shape[1:3]), "out_dim": targets.shape[1]})
    model = Localiser(cfg)
    mean = targets.mean(0)
    std = np.maximum(targets.std(0), 1e-3)
    model.label_mean.copy_(torch.as_tensor(mean))
    model.label_std.copy_(torch.as_tensor(std))
    y_all = torch.as_tensor((targets - mean) / std, dtype=torch.float32)
    spec = native_spec(cfg.image_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    rng = np.random.default_rng(cfg.seed)
    t0 = time.time()
    running = 0.0
    for step in range(1, cfg.steps + 1):
        idx = rng.integers(0, len(frames), cfg.batch_size)
        x = preprocess_batch(torch.from_numpy(frames[idx]), spec)
        x = _shift(x, cfg.shift, gen)
        loss = F.smooth_l1_loss(model.forward_normalised(x), y_all[idx], beta=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        running += float(loss.detach())
        if log_every and step % log_every == 0:
            log(f"localiser step {step}/{cfg.steps} loss {running / log_every:.4f} ({time.time() - t0:.0f} s)")
            running = 0.0
    model.eval()
    return model


@torch.no_grad()
def predict(model: Localiser, frames: np.ndarray, batch: int = 256) -> np.ndarray:
    """Estimates [N,out_dim] in metres for frames [N,H,W,3] uint8."""
    spec = native_spec(model.cfg.image_size)
    out = [model(preprocess_batch(torch.from_numpy(frames[i:i + batch]), spec)).numpy()
           for i in range(0, len(frames), batch)]
    return np.concatenate(out).astype(np.float32)


def cross_fit(demos: CameraDemos, cfg: LocaliserConfig, folds: int = 2, log=print) -> np.ndarray:
    """Every frame's estimate from a model trained on the other folds' episodes."""
    n_ep = int(demos.episode.max()) + 1
    fold_of = np.random.default_rng(cfg.seed).permutation(n_ep) % folds
    est = np.zeros((len(demos.frames), demos.labels.shape[1]), np.float32)
    for k in range(folds):
        train_mask = fold_of[demos.episode] != k
        log(f"cross-fit fold {k + 1}/{folds}: {int(train_mask.sum())} training frames")
        m = train_localiser(demos.frames[train_mask], demos.labels[demos.episode[train_mask]], cfg, log=log)
        est[~train_mask] = predict(m, demos.frames[~train_mask])
    return est


def errors_cm(est: np.ndarray, target: np.ndarray) -> Dict[str, float]:
    """Euclidean error statistics in centimetres."""
    e = 100.0 * np.linalg.norm(est - target, axis=1)
    return {"mean_cm": float(e.mean()), "p95_cm": float(np.percentile(e, 95)), "max_cm": float(e.max())}


def save(model: Localiser, path: str) -> None:
    torch.save({"config": asdict(model.cfg), "state_dict": model.state_dict()}, path)


def load(path: str) -> Localiser:
    ck = torch.load(path, map_location="cpu", weights_only=False)
    cfg = LocaliserConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in ck["config"].items()})
    m = Localiser(cfg)
    m.load_state_dict(ck["state_dict"])
    m.eval()
    return m


def export_vision(model: Localiser, feat_mean: Sequence[float], feat_std: Sequence[float], path: str) -> Dict[str, float]:
    """Write and check the bundle's vision graph: ``image [B,3,H,W]`` -> ``features [B,out_dim]``
    (the allowed operator set, and ONNX Runtime against torch)."""
    g = VisionGraph(model, np.asarray(feat_mean), np.asarray(feat_std)).eval()
    h, w = model.cfg.image_size
    return export.export_vision(g, (3, h, w), path)


# --- the two-stage data ------------------------------------------------------


def write_policy_data(src: str, out: str, est: np.ndarray, feature_key: str = "state") -> None:
    """Copy a camera recording without its frames, with ``obs/<feature_key>`` = [proprio, estimate]
    per step: what the camera policy conditions on. ``obs/proprio`` and the actions are kept;
    the simulator's state stays only as ``obs/sim_state`` for comparisons."""
    import h5py  # optional dependency of the toolkit's data paths

    with h5py.File(src, "r") as f, h5py.File(out, "w") as g:
        data = f["data"]
        gd = g.create_group("data")
        for k, v in data.attrs.items():
            gd.attrs[k] = v
        gd.attrs["obs_keys"] = '["' + feature_key + '", "proprio"]'
        names = sorted(data.keys(), key=lambda n: int(n.split("_")[1]))
        row = 0
        for n in names:
            s = data[n]
            dst = gd.create_group(n)
            for k, v in s.attrs.items():
                dst.attrs[k] = v
            dst.create_dataset("actions", data=s["actions"][:])
            if "dones" in s:
                dst.create_dataset("dones", data=s["dones"][:])
            proprio = s["obs"]["proprio"][:]
            L = len(proprio)
            og = dst.create_group("obs")
            og.create_dataset(feature_key, data=np.concatenate([proprio, est[row:row + L]], 1).astype(np.float32))
            og.create_dataset("proprio", data=proprio)
            if "state" in s["obs"]:
                og.create_dataset("sim_state", data=s["obs"]["state"][:])
            row += L
        if row != len(est):
            raise ValueError(f"{src}: {row} frames but {len(est)} estimates")


def _first_frames(d: CameraDemos) -> np.ndarray:
    starts = np.concatenate([[0], np.cumsum(d.lengths)[:-1]])
    return starts


def fit_main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m energyflow.localiser``: cross-fit, report, train on all, write the policy data."""
    p = argparse.ArgumentParser(prog="python -m energyflow.localiser",
                                description="train the camera localiser and write the camera policy's data")
    p.add_argument("--data", required=True, help="camera demonstrations (sim.record --camera)")
    p.add_argument("--out", required=True, help="folder: localiser.pt, policy-data.hdf5, localiser.json")
    p.add_argument("--label", default="success", choices=LABEL_KINDS,
                   help="hand position at the success step or at the first gripper close")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--folds", type=int, default=2, help="cross-fitting folds for the policy's estimates")
    p.add_argument("--shift", type=int, default=2, help="random shift in pixels (training)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    d = load_camera_demos(a.data, a.label)
    cfg = LocaliserConfig(label=a.label, steps=a.steps, shift=a.shift, seed=a.seed)
    per_frame = d.labels[d.episode]
    est = cross_fit(d, cfg, a.folds)
    first = _first_frames(d)
    report: Dict[str, Any] = {"data": a.data, "camera_name": d.camera_name, "frames": int(len(d.frames)),
                              "episodes": int(len(d.lengths)), "config": asdict(cfg),
                              "held_out_vs_label": {"first_frames": errors_cm(est[first], per_frame[first]),
                                                    "all_frames": errors_cm(est, per_frame)}}
    if d.truth is not None:
        # the simulator's object position, for measuring only: the label sits at a constant
        # offset from where the object starts (it moves once touched), so compare after
        # removing the mean offset at the first frames
        off = (per_frame[first] - d.truth[first]).mean(0)
        report["held_out_vs_sim_object"] = {"offset_cm": (100 * off).round(2).tolist(),
                                            "first_frames": errors_cm(est[first], d.truth[first] + off),
                                            "all_frames": errors_cm(est, d.truth + off)}
    print(json.dumps(report["held_out_vs_label"]), flush=True)
    model = train_localiser(d.frames, per_frame, cfg)
    save(model, str(out / "localiser.pt"))
    write_policy_data(a.data, str(out / "policy-data.hdf5"), est)
    report["seconds"] = round(time.time() - t0, 1)
    (out / "localiser.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(fit_main())
