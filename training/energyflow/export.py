"""ONNX export of the energy-gradient graph (hand-written VJP), the DP noise graph and the vision encoder.

``energy_grad.onnx``: inputs ``a_t [B,T_p,D_a]``, ``cond [B,cond_dim]``, ``t [B]``;
outputs ``grad_a [B,T_p,D_a]`` (= dE/da_t) and ``energy [B]``; opset 17,
dynamic batch, spectral norm baked into plain weights. Either energy head
traces through its ``energy_and_grad``: the pooled head's hand-written VJP of
the scalar read-out, or the denoiser head's one forward of F plus one VJP
with cotangent u (``grad_a = c_in (u - J_F^T u / sigma)``).

``eps.onnx`` (Diffusion Policy baseline, :func:`export_eps`): inputs as above
(``t`` = integer DDPM timestep as float32), output ``eps [B,T_p,D_a]``; the
NoiseUNet forward through the same plain-operator block code.

Every export verifies itself: the ONNX file is run in ONNX Runtime on random
inputs and compared with torch autograd on the original model; a mismatch
above the tolerance raises :class:`ExportCheckError` and the file is removed.

:func:`write_bundle` writes a whole bundle: the checked graphs and the
manifest (:mod:`energyflow.bundle`). :func:`export_onnx`, :func:`rel_err`,
:data:`ALLOWED_OPS` and :data:`OPSET` are shared with the state term's export
(:mod:`energyflow.state_term.export`).
"""
from __future__ import annotations

import copy
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from .bundle import build_manifest, reference_actions, write_manifest
from .config import NUM_TRAIN_TIMESTEPS, ModelConfig
from .graphs import graph_ops, ort_session
from .model import bake_spectral_norm

#: an EnergyFlow network: EnergyUNet (pooled head) or DenoiserEnergy (same interface)
EnergyNet = nn.Module

OPSET = 17

#: Operators the exported graphs may contain (all supported by TensorRT 10's ONNX parser).
ALLOWED_OPS = frozenset({
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Neg",
    "ReduceMean", "ReduceSum", "Reshape", "Exp", "Log", "Tanh", "Sigmoid", "Softplus",
    "Sin", "Cos", "Concat", "Unsqueeze", "Squeeze", "Transpose", "Sqrt", "Reciprocal",
    "Pow", "Slice", "Expand", "Shape", "Gather", "Constant", "Identity", "Flatten",
    "Relu", "MaxPool", "GlobalAveragePool", "ConstantOfShape", "Split",
    "Cast",  # float16 weights cast back to float32 (energyflow.compact)
})


class ExportCheckError(RuntimeError):
    """The exported graph does not reproduce torch autograd within tolerance."""


class EnergyGradGraph(nn.Module):
    """Traceable wrapper: (a_t, cond, t) -> (grad_a, energy)."""

    def __init__(self, model: EnergyNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, a_t: torch.Tensor, cond: torch.Tensor, t: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.model.energy_and_grad(a_t, cond, t)


def prepare_for_export(model: EnergyNet) -> EnergyNet:
    """Float32 CPU copy in eval mode with spectral norm baked into plain weights."""
    m = copy.deepcopy(model).to("cpu", torch.float32).eval()
    bake_spectral_norm(m)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def export_onnx(module: nn.Module, args: tuple, path: Path, input_names: List[str], output_names: List[str],
                dynamic_axes: Dict[str, Dict[int, str]]) -> None:
    """``torch.onnx.export`` of ``module`` (eval mode) at :data:`OPSET` with constant folding, warnings silenced."""
    module.eval()
    kwargs = dict(input_names=input_names, output_names=output_names, opset_version=OPSET,
                  dynamic_axes=dynamic_axes, do_constant_folding=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, args, str(path), dynamo=False, **kwargs)
        except TypeError:  # torch versions without the dynamo argument
            torch.onnx.export(module, args, str(path), **kwargs)
    module.eval()


def _export_action_graph(graph: nn.Module, cfg, t0: float, path: Path, outputs: List[str],
                         check: Callable[[], Dict[str, float]]) -> Dict[str, float]:
    """Export a graph with inputs (a_t, cond, t) and a dynamic batch, refuse
    operators outside ALLOWED_OPS, then run ``check``; on any failure the
    file is deleted and the error raised (a bundle never holds an unchecked graph)."""
    B = 2
    args = (torch.zeros(B, cfg.pred_horizon, cfg.action_dim), torch.zeros(B, cfg.cond_dim), torch.full((B,), t0))
    names = ["a_t", "cond", "t"]
    export_onnx(graph, args, path, names, outputs, {n: {0: "batch"} for n in names + outputs})
    try:
        bad = sorted(set(graph_ops(path)) - ALLOWED_OPS)
        if bad:
            raise ExportCheckError(f"{path.name} uses operators outside the allowed set: {bad}")
        return check()
    except Exception:
        if path.exists():
            path.unlink()
        raise


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """Relative error ||a - b||_2 / ||b||_2 over the whole batch."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a64 - b64) / max(float(np.linalg.norm(b64)), 1e-30))


def _max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b| (reported, not gated)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a64 - b64)) / max(float(np.max(np.abs(b64))), 1e-30))


def check_energy_grad(path: str | Path, model: EnergyNet, batches: Iterable[int] = (1, 3),
                      tol: float = 1e-5, seed: int = 0) -> Dict[str, float]:
    """Compare ONNX Runtime with torch autograd (float64 reference) on random inputs.

    Returns the worst relative errors ``{"grad_a": .., "energy": ..}`` (L2 norm
    of the difference over the L2 norm of the reference, per batch; the
    ``*_max`` entries give max-abs over max-abs for information); raises
    :class:`ExportCheckError` when ``grad_a`` or ``energy`` exceeds ``tol``.
    """
    cfg = model.cfg
    ref = copy.deepcopy(model).to("cpu", torch.float64).eval()
    sess = ort_session(path, threads=1)
    gen = torch.Generator().manual_seed(seed)
    worst = {"grad_a": 0.0, "energy": 0.0, "grad_a_max": 0.0, "energy_max": 0.0}
    T = cfg.schedule.T
    for B in batches:
        a = torch.randn(B, cfg.pred_horizon, cfg.action_dim, generator=gen) * 2.0
        c = torch.randn(B, cfg.cond_dim, generator=gen)
        t = torch.rand(B, generator=gen) * T
        t[0] = cfg.schedule.gamma
        if B > 1:
            t[-1] = T
        g_ort, e_ort = sess.run(["grad_a", "energy"], {"a_t": a.numpy(), "cond": c.numpy(), "t": t.numpy()})
        s, e = ref.score(a.double(), c.double(), t.double())
        g_ref, e_ref = (-s).numpy(), e.detach().numpy()
        if g_ort.shape != g_ref.shape or e_ort.shape != e_ref.shape:
            raise ExportCheckError(f"shape mismatch: onnx {g_ort.shape},{e_ort.shape} vs torch {g_ref.shape},{e_ref.shape}")
        worst["grad_a"] = max(worst["grad_a"], rel_err(g_ort, g_ref))
        worst["energy"] = max(worst["energy"], rel_err(e_ort, e_ref))
        worst["grad_a_max"] = max(worst["grad_a_max"], _max_rel_err(g_ort, g_ref))
        worst["energy_max"] = max(worst["energy_max"], _max_rel_err(e_ort, e_ref))
    if not (worst["grad_a"] <= tol and worst["energy"] <= tol):
        raise ExportCheckError(f"ONNX energy_grad differs from torch autograd: relative errors {worst} > {tol}")
    return worst


def export_energy_grad(model: EnergyNet, path: str | Path, tol: float = 1e-5, check: bool = True) -> Dict[str, float]:
    """Export ``energy_grad.onnx`` and verify it; removes the file and raises on failure."""
    path = Path(path)
    cfg = model.cfg
    m = prepare_for_export(model)
    graph = EnergyGradGraph(m).eval()
    return _export_action_graph(graph, cfg, 0.5, path, ["grad_a", "energy"],
                                lambda: check_energy_grad(path, model, tol=tol) if check else {})


def export_vision(encoder: nn.Module, image_shape: Tuple[int, int, int], path: str | Path,
                  tol: float = 1e-4) -> Dict[str, float]:
    """Export ``vision.onnx`` (image [B,3,H,W] -> features [B,F]) and verify it."""
    path = Path(path)
    enc = copy.deepcopy(encoder).to("cpu", torch.float32).eval()
    x = torch.randn(2, *image_shape)
    export_onnx(enc, (x,), path, ["image"], ["features"], {"image": {0: "batch"}, "features": {0: "batch"}})
    try:
        bad = sorted(set(graph_ops(path)) - ALLOWED_OPS - {"InstanceNormalization", "GroupNormalization"})
        if bad:
            raise ExportCheckError(f"vision.onnx uses operators outside the allowed set: {bad}")
        sess = ort_session(path)
        xs = torch.randn(3, *image_shape, generator=torch.Generator().manual_seed(1))
        (f_ort,) = sess.run(["features"], {"image": xs.numpy()})
        with torch.no_grad():
            f_ref = copy.deepcopy(encoder).to("cpu", torch.float64).eval()(xs.double()).numpy()
        err = rel_err(f_ort, f_ref)
        if err > tol:
            raise ExportCheckError(f"vision.onnx differs from torch: relative error {err} > {tol}")
        return {"features": err}
    except Exception:
        if path.exists():
            path.unlink()
        raise


# ---------------------------------------------------------------------------
# Diffusion Policy baseline: eps.onnx
# ---------------------------------------------------------------------------
#: max |ONNX Runtime - torch| allowed for eps.onnx
EPS_TOL = 1e-4


class EpsGraph(nn.Module):
    """Traceable wrapper: (a_t, cond, t) -> eps, through the plain-operator forward."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, a_t: torch.Tensor, cond: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.model(a_t, cond, t, plain=True)


def check_eps(path: str | Path, model: nn.Module, batches: Iterable[int] = (1, 7), tol: float = EPS_TOL,
              seed: int = 0) -> Dict[str, float]:
    """Compare ``eps.onnx`` in ONNX Runtime with the torch forward (float64) on random inputs.

    Timesteps are random integers in 0..N-1 (0 and N-1 always included);
    returns ``{"eps_max_abs": .., "eps": ..}`` (max-abs error and relative L2
    error); raises :class:`ExportCheckError` when the max-abs error exceeds ``tol``.
    """
    cfg = model.cfg
    ref = copy.deepcopy(model).to("cpu", torch.float64).eval()
    sess = ort_session(path, threads=1)
    gen = torch.Generator().manual_seed(seed)
    worst = {"eps_max_abs": 0.0, "eps": 0.0}
    for B in batches:
        a = torch.randn(B, cfg.pred_horizon, cfg.action_dim, generator=gen) * 2.0
        c = torch.randn(B, cfg.cond_dim, generator=gen)
        t = torch.randint(0, NUM_TRAIN_TIMESTEPS, (B,), generator=gen).to(torch.float32)
        t[0] = NUM_TRAIN_TIMESTEPS - 1
        if B > 1:
            t[-1] = 0
        (e_ort,) = sess.run(["eps"], {"a_t": a.numpy(), "cond": c.numpy(), "t": t.numpy()})
        with torch.no_grad():
            e_ref = ref(a.double(), c.double(), t.double()).numpy()
        if e_ort.shape != e_ref.shape:
            raise ExportCheckError(f"shape mismatch: onnx {e_ort.shape} vs torch {e_ref.shape}")
        worst["eps_max_abs"] = max(worst["eps_max_abs"], float(np.max(np.abs(e_ort.astype(np.float64) - e_ref))))
        worst["eps"] = max(worst["eps"], rel_err(e_ort, e_ref))
    if not worst["eps_max_abs"] <= tol:
        raise ExportCheckError(f"ONNX eps differs from torch: max abs error {worst['eps_max_abs']} > {tol}")
    return worst


def export_eps(model: nn.Module, path: str | Path, tol: float = EPS_TOL, check: bool = True) -> Dict[str, float]:
    """Export ``eps.onnx`` (a_t, cond, t -> eps) of a NoiseUNet and verify it.

    Opset 17, dynamic batch, only :data:`ALLOWED_OPS`; removes the file and
    raises :class:`ExportCheckError` when ONNX Runtime and torch differ by more
    than ``tol`` (max abs) on batches 1 and 7.
    """
    path = Path(path)
    cfg = model.cfg
    m = prepare_for_export(model)
    graph = EpsGraph(m).eval()
    return _export_action_graph(graph, cfg, 50.0, path, ["eps"],
                                lambda: check_eps(path, model, tol=tol) if check else {})


# ---------------------------------------------------------------------------
# a whole bundle: checked graphs plus the manifest
# ---------------------------------------------------------------------------
def write_bundle(out_dir: str | Path, model, name: str, action_mean: Sequence[float], action_std: Sequence[float],
                 state_mean: Optional[Sequence[float]] = None, state_std: Optional[Sequence[float]] = None,
                 vision_encoder=None, ref_seed: int = 0, steps: int = 20,
                 calibration: Optional[Dict[str, Any]] = None, tol: Optional[float] = None,
                 overwrite: bool = True, clip_sample: float = 0.0,
                 training: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Export graphs (each verified against torch) and write a complete bundle.

    ``model`` is an EnergyFlow network, EnergyUNet or DenoiserEnergy
    (``energy_grad.onnx``, relative-error gate ``tol``, default 1e-5) or a
    NoiseUNet (``eps.onnx``, max-abs gate ``tol``, default 1e-4;
    ``clip_sample`` goes into the schedule). ``training`` (how the loss drew
    and weighted noise levels, :meth:`TrainConfig.noise_record`) is written to
    the manifest's ``model.training`` when given. Graphs are first written to a temporary sibling directory; the bundle is
    only moved into place when every check passed, so a failing export never
    leaves a bundle behind.
    """
    cfg: ModelConfig = model.cfg
    out = Path(out_dir)
    tmp = out.parent / (out.name + ".tmp-export")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        if cfg.policy == "diffusion":
            check = {"eps": export_eps(model, tmp / "eps.onnx", tol=EPS_TOL if tol is None else tol)}
        else:
            check = {"energy_grad": export_energy_grad(model, tmp / "energy_grad.onnx",
                                                       tol=1e-5 if tol is None else tol)}
        verr = None
        if cfg.images:
            if vision_encoder is None:
                raise ValueError("model config has image observations but no vision encoder was given")
            if len(cfg.images) > 1:
                raise NotImplementedError("bundles with more than one camera are not supported yet")
            verr = export_vision(vision_encoder, tuple(cfg.images[0].shape), tmp / "vision.onnx")
        extra: Dict[str, Any] = {"export_check": {**check, "vision": verr}}
        if training is not None:
            extra["training"] = training
        man = build_manifest(cfg, name, action_mean, action_std, state_mean, state_std,
                             reference_actions(cfg, ref_seed), steps, calibration,
                             extra_model=extra, clip_sample=clip_sample)
        if out.exists():
            if not overwrite:
                raise FileExistsError(out)
            shutil.rmtree(out)
        tmp.rename(out)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return write_manifest(out, man)
