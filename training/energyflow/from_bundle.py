"""A shipped bundle's weights back in torch: fine-tune a policy whose checkpoint is gone.

A state bundle's ``energy_grad.onnx`` holds every weight of the EnergyFlow network it was exported
from (:mod:`energyflow.export`): the named initialisers are the network's parameters (``model.<key>``,
``__fp16`` when stored in float16, :mod:`energyflow.compact`), and each GroupNorm's scale and shift,
folded by the exporter into anonymous ``onnx::Mul_N`` / ``onnx::Add_N`` constants, come in the
network's own order (the exporter numbers them as it traces). :func:`policy_from_bundle` rebuilds
the :class:`~energyflow.policy.Policy` from the manifest's ``model`` block, loads those weights and
then checks that torch autograd reproduces the bundle's graph on random inputs
(:func:`energyflow.export.check_energy_grad`), so a wrong mapping cannot pass silently.

``energyflow train --init-bundle DIR`` starts a run (live and EMA weights) from them.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from .bundle import BundleError, model_config_from_manifest, read_manifest
from .data import same_values
from .export import ExportCheckError, check_energy_grad
from .policy import Policy

#: relative error allowed between the rebuilt network and the bundle's graph (float16 weights are
#: loaded exactly, so what remains is float32 arithmetic in a different order)
TOL = 1e-4

_ANON = re.compile(r"^onnx::(Mul|Add)_(\d+)(?:__fp16)?$")


def _initialisers(path: Path) -> Tuple[Dict[str, np.ndarray], List[Tuple[str, np.ndarray]]]:
    """The graph's named weights (``model.`` and ``__fp16`` stripped, float32) and its anonymous
    Mul/Add constants in the exporter's order."""
    named: Dict[str, np.ndarray] = {}
    anon: List[Tuple[int, str, np.ndarray]] = []
    for init in onnx.load(str(path)).graph.initializer:
        arr = numpy_helper.to_array(init).astype(np.float32)
        m = _ANON.match(init.name)
        if m:
            anon.append((int(m.group(2)), m.group(1), arr))
        elif init.name.startswith("model."):
            named[init.name[len("model."):].removesuffix("__fp16")] = arr
    anon.sort(key=lambda x: x[0])
    return named, [(op, arr) for _, op, arr in anon]


def policy_from_bundle(bundle: str | Path) -> Tuple[Policy, Dict[str, Any]]:
    """The EnergyFlow state policy a bundle was exported from (float32, eval mode) and its manifest.

    Raises :class:`~energyflow.bundle.BundleError` for a bundle it cannot rebuild (not an
    EnergyFlow state bundle, weights that do not fit the manifest's model, or a rebuilt network
    that does not reproduce the bundle's graph)."""
    bdir = Path(bundle)
    man = read_manifest(bdir)
    if man.get("policy") != "energyflow" or "model" not in man:
        raise BundleError(f"{bdir}: not an EnergyFlow bundle with a model block (policy {man.get('policy')!r})")
    if man["model"].get("images"):
        raise BundleError(f"{bdir}: a camera bundle; only state bundles can be rebuilt")
    cfg = model_config_from_manifest(man)
    pol = Policy(cfg)
    named, anon = _initialisers(bdir / man["graphs"]["energy_grad"]["file"])
    prefix = "energy."
    sd = pol.state_dict()
    norms = [k[:-len(".weight")] for k in sd if k.endswith(".norm.weight")]
    if len(anon) != 2 * len(norms) or [op for op, _ in anon] != ["Mul", "Add"] * len(norms):
        raise BundleError(f"{bdir}: {len(anon)} folded constants for {len(norms)} GroupNorms")
    new: Dict[str, torch.Tensor] = {}
    for i, key in enumerate(norms):
        new[key + ".weight"] = torch.from_numpy(anon[2 * i][1].reshape(-1))
        new[key + ".bias"] = torch.from_numpy(anon[2 * i + 1][1].reshape(-1))
    for key in sd:
        if key in new:
            continue
        if not key.startswith(prefix) or key[len(prefix):] not in named:
            raise BundleError(f"{bdir}: the graph has no weight for {key}")
        new[key] = torch.from_numpy(named[key[len(prefix):]])
    for key, val in new.items():
        if val.shape != sd[key].shape:
            raise BundleError(f"{bdir}: {key} is {tuple(val.shape)} in the graph, {tuple(sd[key].shape)} in the model")
    pol.load_state_dict(new)
    pol.eval()
    try:
        check_energy_grad(bdir / man["graphs"]["energy_grad"]["file"], pol.energy, tol=TOL)
    except ExportCheckError as e:
        raise BundleError(f"{bdir}: the rebuilt network does not reproduce the bundle's graph: {e}") from e
    return pol, man


def check_norms(man: Dict[str, Any], meta: Dict[str, Any], where: str | Path) -> None:
    """Refuse (:class:`~energyflow.bundle.BundleError`) when a run's normalisers (``meta`` of
    :func:`energyflow.train.build_datasets`) are not the bundle's: its weights would see other
    units than they were trained on. ``where`` names the bundle in the message."""
    state = [o["norm"] for o in man.get("obs", []) if o.get("kind") == "state"]
    for label, mine, theirs in (("action", meta.get("action_norm"), man["action_norm"]),
                                ("state", meta.get("state_norm"), state[0] if state else None)):
        if (mine is None) != (theirs is None):
            raise BundleError(f"{where}: the bundle {'has' if theirs else 'has no'} {label} normaliser, "
                              f"the data {'has' if mine else 'has none'}")
        for stat in ("mean", "std") if mine else ():
            if not same_values(mine[stat], theirs[stat]):
                raise BundleError(f"{where}: the data's {label} {stat} is not the bundle's: "
                                  "train on the demonstrations the bundle was trained on")
