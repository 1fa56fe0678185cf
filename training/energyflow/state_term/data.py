"""The state term's data: ``cond`` of every step of every demonstration, built
as the runtime builds it (:mod:`energyflow.state_term`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

import numpy as np

from ..data import Normalizer, window_indices
from .network import StateTermError


# ---------------------------------------------------------------------------
# data: every step of every demonstration
# ---------------------------------------------------------------------------
def step_conds(demos: Sequence, man: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray]:
    """``cond`` of every step of every demo, as the runtime builds it, and each row's demo index.

    Step i's history is the observations i−T_o+1 … i, the first frame
    repeated before the start (the toolkit's windows with T_a = 1, so the
    last step of each demo is included): ``[Σ L, cond_dim]`` float32 and
    ``[Σ L]`` int. ``man`` gives the layout (``conditioning``, ``obs`` norms,
    ``obs_horizon``); state items only.
    """
    entries = {o["name"]: o for o in man["obs"]}
    items = man["conditioning"]["items"]
    images = [it["obs"] for it in items if entries[it["obs"]]["kind"] != "state"]
    if images:
        raise StateTermError(f"the bundle's cond holds image features ({', '.join(images)}): "
                             "the state term supports state bundles only")
    if not demos:
        raise StateTermError("no demonstrations")
    lengths = [d.length for d in demos]
    obs_idx, _ = window_indices(lengths, int(man["obs_horizon"]), 1, 1)
    parts = []
    for it in items:
        e = entries[it["obs"]]
        norm = Normalizer(np.asarray(e["norm"]["mean"], np.float32), np.asarray(e["norm"]["std"], np.float32))
        raw = np.concatenate([np.asarray(d.obs[it["obs"]], np.float32).reshape(d.length, -1) for d in demos])
        parts.append(norm(raw)[obs_idx])
    cond = np.concatenate(parts, axis=-1).reshape(len(obs_idx), -1).astype(np.float32)
    if cond.shape[1] != int(man["cond_dim"]):
        raise StateTermError(f"built cond of width {cond.shape[1]}, the manifest's cond_dim is {man['cond_dim']}")
    return cond, np.repeat(np.arange(len(demos)), lengths)


def check_data(man: Dict[str, Any], demos: Sequence, bundle: Path, data: Path) -> None:
    """Refuse ``demos`` whose state observations do not have the widths the bundle's manifest says."""
    for o in man["obs"]:
        if o["kind"] != "state":
            continue
        want = int(np.prod(o["shape"]))
        got = int(np.prod(demos[0].obs[o["name"]].shape[1:]))
        if got != want:
            raise StateTermError(f"{data}: obs '{o['name']}' has width {got}, bundle {bundle} wants {want} "
                                 f"(its obs '{o['name']}' shape {o['shape']})")
