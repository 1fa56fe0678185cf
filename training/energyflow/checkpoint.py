"""Reading training checkpoints (``ckpt_*.pt``, ``latest.pt``: :meth:`energyflow.train.Trainer.save`).

Below both :mod:`energyflow.train` (resume, export) and
:mod:`energyflow.distill` (the teacher): a checkpoint holds ``model_cfg``,
``train_cfg``, ``meta``, the live ``policy`` and the ``ema`` weights, the
optimiser, scheduler and every RNG state.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, Tuple

import torch

from .config import ModelConfig, TrainConfig
from .policy import Policy


def load_checkpoint(path: str | Path) -> Dict[str, Any]:
    """The checkpoint dict at ``path``, on the CPU."""
    return torch.load(str(path), map_location="cpu", weights_only=False)


def load_checkpoint_policy(path: str | Path, use_ema: bool = True) -> Tuple[Policy, Dict[str, Any]]:
    """Policy (EMA or live weights, eval mode) and the run's ``meta`` of a checkpoint.

    Checkpoints from before ``energy_head`` hold the pooled head; their meta
    gets the ``training`` record from the checkpoint's train config.
    """
    ck = load_checkpoint(path)
    mcfg = ModelConfig.from_saved(ck["model_cfg"])
    pol = Policy(mcfg)
    pol.load_state_dict(ck["ema"] if use_ema else ck["policy"])
    meta = dict(ck["meta"])
    if mcfg.policy == "energyflow" and "training" not in meta:
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        meta["training"] = TrainConfig(**{k: v for k, v in ck.get("train_cfg", {}).items() if k in known}
                                       ).for_head(mcfg.energy_head).noise_record()
    return pol.eval(), meta
