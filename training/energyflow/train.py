"""Training (paper Algorithm 1) and export entry points.

* denoising score matching with lambda(t) = sigma(t)^2, geometric VE schedule,
  t ~ U[0, T], score = -dE/da through autograd (create_graph=True); options:
  EDM's log-normal noise levels (``sigma_sampling: lognormal``) and loss
  weight (``loss_weighting: edm``), :mod:`energyflow.losses`;
* energy head ``pooled`` (the paper's) or ``denoiser`` (``ModelConfig.energy_head``,
  :func:`energyflow.model.energy_model`);
* AdamW (lr 1e-4, wd 1e-6), batch 256, cosine decay with 500 warm-up steps,
  gradient-norm clip 1.0, EMA weights (Diffusion Policy's power schedule)
  used for export, with their spectral-norm vectors recomputed on the averaged
  weights (:func:`energyflow.model.recompute_spectral_norm`);
* progress bar (loss, gradient norm before clipping, it/s, ETA), periodic validation loss, checkpoints that
  resume exactly (model, EMA, optimiser, scheduler, every RNG), seeds;
* multi-GPU through ``torchrun`` (DistributedDataParallel) when WORLD_SIZE > 1.

The Diffusion Policy baseline (``ModelConfig.policy == "diffusion"``) runs
through the same trainer: :class:`Policy` holds a NoiseUNet instead of the
EnergyUNet and its :meth:`Policy.loss` is the DDPM epsilon MSE with integer
timesteps k ~ U{0..99} (:mod:`energyflow.diffusion`); everything else (data,
optimiser, EMA, schedule, checkpoints, resume, export) is shared.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from .checkpoint import load_checkpoint, load_checkpoint_policy
from .config import LEGACY_ENERGY_HEAD, PAPER_SIZE, TINY_SIZE, ModelConfig, TrainConfig, merge_train_config
from .data import DataError, Demo, Normalizer, WindowDataset, load_hdf5, load_labels, load_rollouts, split_demos
from .diffusion import clip_sample_range
from .distill import Teacher, scene_shift, start_states
from .export import write_bundle
from .from_bundle import check_norms, policy_from_bundle
from .losses import sigma_t
from .model import recompute_spectral_norm
from .policy import Policy

# the policy and checkpoint loading live below this module (energyflow.policy,
# energyflow.checkpoint); their old names here keep working
__all__ = ["EMA", "LossModule", "Policy", "Trainer", "build_datasets", "export_from_checkpoint", "export_policy",
           "export_random", "load_checkpoint", "load_checkpoint_policy", "lr_lambda", "seed_everything",
           "train_main"]


class LossModule(nn.Module):
    """Computes the policy's loss in ``forward`` so DistributedDataParallel wraps the (double) backward."""

    def __init__(self, policy: Policy, weighting: str = "sigma2") -> None:
        super().__init__()
        self.policy = policy
        self.weighting = weighting

    def forward(self, batch: Dict[str, torch.Tensor], t: torch.Tensor, eps: torch.Tensor,
                cond_shift: Optional[torch.Tensor] = None, target: Optional[torch.Tensor] = None) -> torch.Tensor:
        cond = self.policy.build_cond(batch, train=True)
        if cond_shift is not None:
            cond = cond + cond_shift
        return self.policy.loss(batch["actions"], cond, t, eps, self.weighting, target)


# ---------------------------------------------------------------------------
class EMA:
    """Exponential moving average of a module (Diffusion Policy's power schedule)."""

    def __init__(self, model: nn.Module, max_decay: float = 0.9999, power: float = 0.75) -> None:
        self.model = copy.deepcopy(model).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.max_decay, self.power, self.step = max_decay, power, 0

    def decay(self) -> float:
        d = 1.0 - (1.0 + self.step) ** (-self.power)
        return float(min(max(d, 0.0), self.max_decay))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = self.decay()
        for pe, p in zip(self.model.parameters(), model.parameters()):
            pe.mul_(d).add_(p.detach(), alpha=1.0 - d)
        for be, b in zip(self.model.buffers(), model.buffers()):
            be.copy_(b)
        self.step += 1

    def sync_spectral_norm(self) -> int:
        """Recompute the spectral-norm (u, v) of the averaged weights (``update`` copies the
        live model's, which belong to other weights); call before evaluating or exporting."""
        return recompute_spectral_norm(self.model)


def lr_lambda(warmup: int, total: int):
    """Linear warm-up then cosine decay to 0 (Diffusion Policy's ``cosine`` schedule)."""

    def f(step: int) -> float:
        if step < warmup:
            return float(step + 1) / float(max(1, warmup))
        prog = (step - warmup) / float(max(1, total - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * min(1.0, prog))))

    return f


def _device(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(spec)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _to_device(batch: Dict[str, np.ndarray], device: torch.device) -> Dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.ascontiguousarray(v)).to(device, non_blocking=True) for k, v in batch.items()}


# ---------------------------------------------------------------------------
class Trainer:
    """Holds data, model, optimiser and RNG state; ``run()`` trains to ``cfg.steps``."""

    def __init__(self, mcfg: ModelConfig, tcfg: TrainConfig, train_ds: WindowDataset,
                 val_ds: Optional[WindowDataset], out: Path, meta: Dict[str, Any],
                 vision_weights: Optional[str] = None, progress: bool = True) -> None:
        tcfg = tcfg.for_head(mcfg.energy_head if mcfg.policy == "energyflow" else "pooled")
        self.mcfg, self.tcfg, self.out, self.meta = mcfg, tcfg, out, meta
        self.train_ds, self.val_ds = train_ds, val_ds
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1:
            if not dist.is_initialized():
                dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
            local = int(os.environ.get("LOCAL_RANK", "0"))
            self.device = torch.device(f"cuda:{local}") if torch.cuda.is_available() else torch.device("cpu")
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
        else:
            self.device = _device(tcfg.device)
        if self.device.type == "cpu":
            torch.set_num_threads(max(1, tcfg.threads))
        seed_everything(tcfg.seed)
        self.policy = Policy(mcfg, vision_weights).to(self.device)
        self.loss_mod: nn.Module = LossModule(self.policy, tcfg.loss_weighting)
        if self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.loss_mod = DDP(self.loss_mod, device_ids=ids)
        self.ema = EMA(self.policy, tcfg.ema_decay, tcfg.ema_power)
        self.opt = torch.optim.AdamW(self.policy.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(tcfg.warmup_steps, tcfg.steps))
        self.step = 0
        self.np_rng = np.random.default_rng(tcfg.seed + 7919 * self.rank)
        self.gen = torch.Generator(device=self.device).manual_seed(tcfg.seed + 104729 * self.rank)
        self.history: List[Dict[str, Any]] = []
        self.progress = progress and self.rank == 0
        #: total gradient norm of the last step, before clipping
        self.last_grad_norm = float("nan")
        #: the Diffusion Policy whose score the energy is regressed onto (energyflow.distill), if any
        self.teacher = None
        self.starts: Optional[np.ndarray] = None
        if tcfg.teacher:
            if mcfg.policy != "energyflow":
                raise ValueError("--teacher distils an energyflow policy; this run trains a diffusion one")
            self.teacher = Teacher.load(tcfg.teacher, mcfg, meta, self.device)
            self.starts = start_states(train_ds.state, [d.length for d in train_ds.demos])

    # -- state ---------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return {"step": self.step, "policy": self.policy.state_dict(), "ema": self.ema.model.state_dict(),
                "ema_step": self.ema.step, "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                "np_rng": self.np_rng.bit_generator.state, "gen": self.gen.get_state(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "model_cfg": self.mcfg.to_dict(), "train_cfg": dataclasses.asdict(self.tcfg), "meta": self.meta}

    def load_state_dict(self, sd: Dict[str, Any]) -> None:
        self.step = int(sd["step"])
        self.policy.load_state_dict(sd["policy"])
        self.ema.model.load_state_dict(sd["ema"])
        self.ema.step = int(sd["ema_step"])
        self.opt.load_state_dict(sd["opt"])
        self.sched.load_state_dict(sd["sched"])
        self.np_rng.bit_generator.state = sd["np_rng"]
        self.gen.set_state(sd["gen"])
        torch.set_rng_state(sd["torch_rng"])
        if sd.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(sd["cuda_rng"])

    def save(self, path: Optional[Path] = None) -> Path:
        path = path or self.out / f"ckpt_{self.step:08d}.pt"
        if self.rank == 0:
            tmp = path.with_suffix(".tmp")
            torch.save(self.state_dict(), tmp)
            os.replace(tmp, path)
            latest = self.out / "latest.pt"
            tmp2 = latest.with_suffix(".tmp")
            torch.save(self.state_dict(), tmp2)
            os.replace(tmp2, latest)
        return path

    # -- steps ---------------------------------------------------------------
    def _sample_noise(self, B: int, gen: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
        c = self.mcfg
        t = self.policy.sample_t(B, gen, self.device, self.tcfg)
        eps = torch.randn(B, c.pred_horizon, c.action_dim, generator=gen, device=self.device)
        return t, eps

    def train_step(self) -> float:
        B = self.tcfg.batch_size
        idx = self.np_rng.integers(0, len(self.train_ds), size=B)
        batch = _to_device(self.train_ds.batch(idx), self.device)
        t, eps = self._sample_noise(B, self.gen)
        self.policy.train()
        if self.teacher is None:
            loss = self.loss_mod(batch, t, eps)
        else:
            loss = self._distill_loss(batch, t, eps)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        # the norm before clipping (clip_grad_norm_ returns it; an infinite bound only measures)
        clip = self.tcfg.grad_clip if self.tcfg.grad_clip > 0 else float("inf")
        self.last_grad_norm = float(torch.nn.utils.clip_grad_norm_(self.policy.parameters(), clip))
        self.opt.step()
        self.sched.step()
        self.ema.update(self.policy)
        self.step += 1
        return float(loss.detach())

    def _distill_loss(self, batch: Dict[str, torch.Tensor], t: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """The loss against the teacher: noise levels on its grid, scene shifts it labels."""
        tc = self.tcfg
        t, k = self.teacher.snap(t, self.mcfg.schedule)
        shift = torch.from_numpy(scene_shift(self.starts, t.shape[0], self.mcfg.obs_horizon, tc.teacher_shift,
                                             tc.teacher_shift_fraction, self.np_rng)).to(self.device)
        sig = sigma_t(t, self.mcfg.schedule).reshape(-1, 1, 1)
        with torch.no_grad():
            cond = self.teacher.policy.build_cond(batch) + shift
            target = self.teacher.eps(batch["actions"] + sig * eps, cond, k)
        return self.loss_mod(batch, t, eps, shift, target)

    def validate(self, use_ema: bool = True) -> Optional[float]:
        """Mean loss (DSM or DDPM) over fixed validation batches (fixed t/eps, so values are comparable)."""
        if self.val_ds is None or len(self.val_ds) == 0:
            return None
        if use_ema:
            self.ema.sync_spectral_norm()
        pol = self.ema.model if use_ema else self.policy
        pol.eval()
        gen = torch.Generator(device=self.device).manual_seed(12345)
        rng = np.random.default_rng(12345)
        tot, n = 0.0, 0
        B = min(self.tcfg.batch_size, len(self.val_ds))
        for _ in range(self.tcfg.val_batches):
            idx = rng.integers(0, len(self.val_ds), size=B)
            batch = _to_device(self.val_ds.batch(idx), self.device)
            t, eps = self._sample_noise(B, gen)
            with torch.no_grad():
                cond = pol.build_cond(batch)
            with torch.set_grad_enabled(self.mcfg.policy != "diffusion"):  # DSM needs autograd for the score
                loss = pol.loss(batch["actions"], cond, t, eps, self.tcfg.loss_weighting)
            tot += float(loss.detach()) * B
            n += B
        return tot / n

    def run(self) -> Dict[str, Any]:
        tc = self.tcfg
        bar = None
        if self.progress:
            bar = tqdm(total=tc.steps, initial=self.step, dynamic_ncols=True, desc="train", unit="it")
        log = open(self.out / "log.jsonl", "a") if self.rank == 0 else None
        t0, s0 = time.time(), self.step
        ema_loss = None
        ema_gnorm = None
        last_val = None
        try:
            while self.step < tc.steps:
                loss = self.train_step()
                gn = self.last_grad_norm
                ema_loss = loss if ema_loss is None else 0.98 * ema_loss + 0.02 * loss
                if math.isfinite(gn):
                    ema_gnorm = gn if ema_gnorm is None else 0.98 * ema_gnorm + 0.02 * gn
                if bar is not None:
                    bar.update(1)
                    post = {"loss": f"{ema_loss:.4f}", "gnorm": f"{gn:.3g}",
                            "lr": f"{self.sched.get_last_lr()[0]:.2e}"}
                    if last_val is not None:
                        post["val"] = f"{last_val:.4f}"
                    bar.set_postfix(post, refresh=False)
                rec: Dict[str, Any] = {}
                if self.step % tc.log_every == 0 or self.step == tc.steps:
                    rec = {"step": self.step, "loss": loss, "loss_avg": ema_loss,
                           "grad_norm": gn, "grad_norm_avg": ema_gnorm,
                           "lr": self.sched.get_last_lr()[0],
                           "it_per_s": (self.step - s0) / max(1e-9, time.time() - t0)}
                if tc.val_every and (self.step % tc.val_every == 0 or self.step == tc.steps):
                    last_val = self.validate()
                    rec.update({"step": self.step, "val_loss": last_val})
                if rec and log is not None:
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    self.history.append(rec)
                if tc.ckpt_every and self.step % tc.ckpt_every == 0:
                    self.save()
        finally:
            if bar is not None:
                bar.close()
            if log is not None:
                log.close()
        self.save()
        elapsed = time.time() - t0
        return {"steps": self.step, "seconds": elapsed, "it_per_s": (self.step - s0) / max(elapsed, 1e-9),
                "val_loss": last_val, "train_loss": ema_loss}


# ---------------------------------------------------------------------------
def build_datasets(data: str, mcfg_over: Dict[str, Any], tcfg: TrainConfig, state_key: str,
                   image_keys: Sequence[str], image_size: int = 96, vision_width: int = 64,
                   rollouts: Sequence[str] = (), rollout_failures: bool = False, labels: Sequence[str] = ()):
    """Load + validate the HDF5 file, split by demo, fit normalisers, make ModelConfig and datasets.

    ``rollouts`` (directories of recorded runtime episodes, :func:`energyflow.data.load_rollouts`)
    add their successful episodes to the training windows only: the normalisers are fitted on the
    training demos alone (so a teacher trained on the same demos keeps matching them) and the
    validation split stays the demos'. ``rollout_failures`` adds their other episodes too, for a
    distilled run only (``tcfg.teacher``): the teacher labels the states the recorded policy reached,
    failing ones included (DAgger's aggregation, with the teacher as the expert). ``labels``
    (:func:`energyflow.data.load_labels` files) add one training window per labelled chunk, in the
    demos' normalisers, to a state policy's training set."""
    obs_keys = [state_key] if state_key else []
    demos, info = load_hdf5(data, obs_keys, image_keys)
    train_demos, val_demos = split_demos(demos, tcfg.val_fraction, tcfg.seed)
    a_norm = Normalizer.fit(np.concatenate([d.actions for d in train_demos]))
    s_norm = Normalizer.fit(np.concatenate([d.obs[state_key] for d in train_demos])) if state_key else None
    own: List[Demo] = []
    counts: Dict[str, int] = {}
    if rollout_failures and not rollouts:
        raise DataError("--rollout-failures needs --rollouts DIR …: the recorded runs whose failed episodes to add")
    if rollouts:
        if image_keys or not state_key:
            raise DataError("--rollouts: recorded runtime episodes carry the arm's state only; "
                            "they train state policies, not ones with camera inputs")
        if rollout_failures and not tcfg.teacher:
            raise DataError("--rollout-failures: failed episodes are trained on only with --teacher, which "
                            "labels their states; their own actions are not a target")
        own, counts = load_rollouts(rollouts, obs_keys, failures=rollout_failures)
        for d in own:
            if d.actions.shape[1] != info.action_dim or d.obs[state_key].shape[1:] != info.obs_shapes[state_key]:
                raise DataError(f"{d.name}: actions {d.actions.shape[1:]} and {state_key} {d.obs[state_key].shape[1:]} "
                                f"do not match {data}'s ({info.action_dim},) and {info.obs_shapes[state_key]}")
        if not own:
            raise DataError(f"--rollouts {' '.join(map(str, rollouts))}: no successful episode to train on"
                            + ("" if not rollout_failures else " (nor any other)"))
    over = dict(mcfg_over)
    over.setdefault("action_dim", info.action_dim)
    over["state_dim"] = int(np.prod(info.obs_shapes[state_key])) if state_key else 0
    over["state_key"] = state_key or "state"
    if over["action_dim"] != info.action_dim:
        raise DataError(f"{data}: actions have {info.action_dim} dims but --action-dim is {over['action_dim']}")
    images = []
    for k in image_keys:
        images.append(dict(name=k, shape=(3, image_size, image_size), resize=(image_size + 8, image_size + 8),
                           width=vision_width))
    over["images"] = images
    mcfg = ModelConfig.from_dict(over)
    mk = lambda ds: WindowDataset(ds, state_key or None, list(image_keys), mcfg.obs_horizon, mcfg.pred_horizon,
                                  mcfg.action_horizon, a_norm, s_norm) if ds else None
    meta = {"data": str(data), "env": info.env, "train_demos": [d.name for d in train_demos],
            "val_demos": [d.name for d in val_demos],
            "rollouts": {"dirs": [str(r) for r in rollouts], "with_failures": rollout_failures, **counts}
            if rollouts else None,
            "action_norm": {"mean": a_norm.mean.tolist(), "std": a_norm.std.tolist()},
            "state_norm": None if s_norm is None else {"mean": s_norm.mean.tolist(), "std": s_norm.std.tolist()}}
    train_ds, val_ds = mk(train_demos + own), mk(val_demos)
    if labels:  # WindowDataset.add_windows refuses a camera policy's dataset
        before = len(train_ds)
        train_ds.add_windows(*load_labels(labels))
        meta["labels"] = {"files": [str(f) for f in labels], "windows": len(train_ds) - before}
    if mcfg.policy == "diffusion":
        # DDIM clips x0 to the data range (standardized units) of the training windows
        meta["clip_sample"] = clip_sample_range(train_ds.actions[np.unique(train_ds.act_idx)])
    return mcfg, train_ds, val_ds, meta


def train_main(data: str, out: str, model_over: Dict[str, Any], train_over: Dict[str, Any], state_key: str = "state",
               image_keys: Sequence[str] = (), resume: Optional[str] = None, vision_weights: Optional[str] = None,
               export_bundle: bool = True, name: Optional[str] = None, image_size: int = 96,
               progress: bool = True, vision_width: int = 64, rollouts: Sequence[str] = (),
               rollout_failures: bool = False, init_bundle: Optional[str] = None,
               labels: Sequence[str] = ()) -> Dict[str, Any]:
    """``python -m energyflow train``: returns a summary dict (also written to out/summary.json).

    ``init_bundle``: start the live and EMA weights from that EnergyFlow state bundle
    (:func:`energyflow.from_bundle.policy_from_bundle`), its model config in place of
    ``model_over``'s; the data's normalisers must be the bundle's. ``labels``: labelled windows
    added to the training set (:func:`build_datasets`)."""
    if init_bundle and resume:
        raise ValueError("--init-bundle starts a new run from a bundle; --resume continues a checkpoint: not both")
    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    tcfg = merge_train_config(TrainConfig(), train_over)
    ckpt = None
    init = None
    if init_bundle:
        init, init_man = policy_from_bundle(init_bundle)
        base = init.cfg.to_dict()
        differ = sorted(k for k, v in model_over.items()
                        if k not in base or ModelConfig.from_dict({**base, k: v}) != init.cfg)
        if differ:
            raise ValueError(f"--init-bundle: the model is the bundle's; {', '.join(differ)} differ from it")
        model_over = base
    if resume:
        rp = outp / "latest.pt" if resume == "auto" else Path(resume)
        if rp.exists():
            ckpt = load_checkpoint(rp)
            kind = ckpt["model_cfg"].get("policy", "energyflow")
            if model_over.get("policy", kind) != kind:
                raise ValueError(f"{rp}: checkpoint holds a {kind!r} policy, not {model_over['policy']!r}")
            model_over = ckpt["model_cfg"]
            model_over = {k: v for k, v in model_over.items() if k not in ("images",)} | {"images": model_over["images"]}
            model_over.setdefault("energy_head", LEGACY_ENERGY_HEAD)  # checkpoints from before the option
            tcfg = merge_train_config(TrainConfig(**ckpt["train_cfg"]), train_over)
        elif resume != "auto":
            raise FileNotFoundError(rp)
    if ckpt is not None and model_over.get("images"):
        vision_width = model_over["images"][0].get("width", 64)
    mcfg, train_ds, val_ds, meta = build_datasets(data, model_over, tcfg, state_key, image_keys, image_size,
                                                  vision_width, rollouts, rollout_failures, labels)
    # "auto" noise law and weight become the head's measured recipe (the diffusion
    # baseline ignores both; it keeps Algorithm 1's values in its train_cfg)
    tcfg = tcfg.for_head(mcfg.energy_head if mcfg.policy == "energyflow" else "pooled")
    if mcfg.policy == "energyflow":
        meta["training"] = tcfg.noise_record()  # into the checkpoint and the bundle manifest
    trainer = Trainer(mcfg, tcfg, train_ds, val_ds, outp, meta, vision_weights, progress)
    if ckpt is not None:
        trainer.load_state_dict(ckpt)
    if init is not None:
        check_norms(init_man, meta, init_bundle)
        trainer.policy.load_state_dict(init.state_dict())
        trainer.ema.model.load_state_dict(init.state_dict())
    (outp / "config.json").write_text(json.dumps({"model": mcfg.to_dict(), "train": dataclasses.asdict(tcfg)},
                                                 indent=1))
    summary = trainer.run()
    summary["windows"] = {"train": len(train_ds), "val": 0 if val_ds is None else len(val_ds)}
    if "labels" in meta:
        summary["windows"]["labels"] = meta["labels"]["windows"]
    if export_bundle and trainer.rank == 0:
        trainer.ema.sync_spectral_norm()
        man = export_policy(trainer.ema.model, meta, outp / "bundle", name or Path(data).stem)
        summary["bundle"] = str(outp / "bundle")
        summary["export_check"] = man["model"].get("export_check")
    if trainer.rank == 0:
        (outp / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def export_policy(policy: Policy, meta: Dict[str, Any], out: Path, name: str,
                  tol: Optional[float] = None) -> Dict[str, Any]:
    """Bundle of the policy's kind; ``tol`` None = the kind's export-check default.

    The spectral-norm vectors are first recomputed on the weights being
    exported (an EMA holds the live model's, :meth:`EMA.sync_spectral_norm`);
    ``meta["training"]`` (noise-level law and loss weight) goes into the
    manifest's ``model.training``.
    """
    recompute_spectral_norm(policy)
    sn = meta.get("state_norm") or {}
    return write_bundle(out, policy.net, name, meta["action_norm"]["mean"], meta["action_norm"]["std"],
                        sn.get("mean"), sn.get("std"), vision_encoder=policy.vision, tol=tol,
                        clip_sample=float(meta.get("clip_sample", 0.0)), training=meta.get("training"))


def export_from_checkpoint(ckpt: str, out: str, name: Optional[str] = None, use_ema: bool = True,
                           tol: Optional[float] = None) -> Dict[str, Any]:
    pol, meta = load_checkpoint_policy(ckpt, use_ema)
    return export_policy(pol, meta, Path(out), name or Path(meta.get("data", "policy")).stem, tol)


def export_random(out: str, over: Dict[str, Any], paper_size: bool = False, tiny: bool = False, seed: int = 0,
                  name: str = "random-init", image_keys: Sequence[str] = (), image_size: int = 96,
                  tol: Optional[float] = None, vision_width: int = 64) -> Dict[str, Any]:
    """Random-init bundle (no training): ``--paper-size`` gives down dims 64/128/256, T_p=16, D_a=10.

    ``over["policy"] = "diffusion"`` gives a Diffusion Policy bundle (clip_sample 0: no data range).
    """
    d: Dict[str, Any] = {}
    if paper_size:
        d.update(PAPER_SIZE)
    if tiny:
        d.update(TINY_SIZE)
    d.update(over)
    d["images"] = [dict(name=k, shape=(3, image_size, image_size), resize=(image_size + 8, image_size + 8),
                        width=vision_width) for k in image_keys]
    mcfg = ModelConfig.from_dict(d)
    torch.manual_seed(seed)
    pol = Policy(mcfg).eval()
    meta = {"action_norm": {"mean": [0.0] * mcfg.action_dim, "std": [1.0] * mcfg.action_dim},
            "state_norm": None if mcfg.state_dim == 0 else {"mean": [0.0] * mcfg.state_dim,
                                                             "std": [1.0] * mcfg.state_dim}}
    return export_policy(pol, meta, Path(out), name, tol)
