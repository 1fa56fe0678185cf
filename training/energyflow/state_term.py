"""The state term g_φ(s, σ): an alarm score that is high for an unseen state
(training/README.md, "State term"; docs/safety.md).

g is a small scalar network on the bundle's conditioning vector ``cond``
(the standardized observation history the policy graph is fed), trained by
denoising score matching on noisy ``cond`` vectors, so that −∇ₛg estimates
the score of the demonstrations' state distribution at each noise level σ::

    g(s, σ) = f(c_in·s, c_noise)/σ + |s|²/(2(σ²+1)),   c_in = 1/√(σ²+1), c_noise = ¼ ln σ

f is an MLP (SiLU) whose last layer starts at zero, so at initialization g is
the exact energy of unit-variance Gaussian data (the quadratic term, as the
policy's denoiser head, training/README.md) and, whatever f learns, g grows
quadratically far from the data at every σ. The 1/σ keeps σ·∇g, the noise
estimate the loss compares with ε, O(1) at every level. Loss (λ = σ²)::

    σ ~ U{σ_1 … σ_J} (log-spaced),  ε ~ N(0, I),  s̃ = s + σε
    L = ‖σ·∇ₛg(s̃, σ) − ε‖² / D              (= σ²‖−∇g − (−ε/σ)‖² per dimension)

Score matching shapes g only where its noise reached, so a state 10σ away is
read at several levels. The reading (measured best in the prototype)::

    z_j = (g(s, σ_j) − μ_j) / sd_j          μ_j, sd_j: over held-out demonstration steps
    state_energy = max_j z_j                 higher = more out of distribution

The **transition term** (measured: a push of the arm, whose states the
demonstrations all visit, is invisible to g — DSM's smallest noise level,
0.05 std, is coarser than the step-to-step motion of the hand): a linear
model of the newest frame of ``cond`` given the earlier ones (ridge
regression on every demonstration step, bias included), read as the largest
per-dimension residual in units of its training std::

    r = x_t − (W x_<t + b),   t(s) = max_k |r_k| / sd_k
    z_t = (t(s) − μ_t)/sd_t                                 μ_t, sd_t: held-out steps

It sees motion the robot does not make on its own (a shove, a slipping
grasp, a frame from another time) and a value that jumps between frames
(an object that appears). ``cond`` must hold T_o ≥ 2 frames (with one
frame, or ``--no-transition``, it is left out).

The **RND component** (FIPER's observation score, Römer et al. 2025, which
separated shifted scenes better than g in ``research/ood/ood_compare.py``):
random network distillation on cond, a fixed random MLP and a predictor
trained on every demonstration step, read as the mean squared prediction
error and z-scored on the held-out steps like the others. Off by default
(``--rnd-steps N`` adds it): measured through the runtime on ButtonPress it
lifted state_energy above its held-out q99.9 in 20 of 50 normal episodes,
where g with the transition term stayed below it. The policy's own states
are near, not on, the demonstrations', and RND, the sharpest detector of
shifted scenes offline, calls them new. With either extra component the reading is
``max_z`` and the block lists ``components`` (["g", "transition", "rnd"]);
g alone is ``max_sigma_z``.

Training and calibration use **every step of every demonstration**, each
step's history built as the runtime's episode start (the first frame
repeated; :func:`step_conds`). A g trained on the policy's training windows
alone never sees the last T_a−1 states of an episode and alarms on them.

``state_energy.onnx`` (input ``cond [B, cond_dim]``, output ``state_energy
[B]``, float32, dynamic batch, opset 17) holds the whole reading with σ_j,
μ_j and sd_j as constants; the max over σ is a MaxPool (only operators of
:data:`energyflow.export.ALLOWED_OPS`). Its export checks itself against
torch in float64 and is refused above the tolerance.

State bundles only: for an image bundle ``cond`` holds vision features, and
building them for every demonstration step is not implemented here.
"""
from __future__ import annotations

import copy
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPH_FILE = "state_energy.onnx"
INPUT, OUTPUT = "cond", "state_energy"
READING = "max_sigma_z"
#: the reading with extra components (the max of the σ levels' z and theirs; block "components")
READING_MAX_Z = "max_z"
#: shape-computing operators a TensorRT-friendly graph must not contain
SHAPE_OPS = frozenset({"Shape", "Where", "Equal", "Cast", "Expand", "ConstantOfShape"})
EXPORT_TOL = 1e-5


class StateTermError(ValueError):
    """The state term cannot be trained for this bundle / data."""


def sigma_grid(n: int = 8, sigma_min: float = 0.05, sigma_max: float = 3.0) -> np.ndarray:
    """``n`` log-spaced noise levels from ``sigma_min`` to ``sigma_max``, float32."""
    if n < 1 or not 0 < sigma_min <= sigma_max:
        raise StateTermError(f"noise levels: want n >= 1 and 0 < sigma_min <= sigma_max, "
                             f"got n={n}, sigma_min={sigma_min}, sigma_max={sigma_max}")
    return np.exp(np.linspace(math.log(sigma_min), math.log(sigma_max), n)).astype(np.float32)


@dataclass
class StateTermConfig:
    hidden: Tuple[int, ...] = (256, 256)
    sigmas: int = 8
    sigma_min: float = 0.05
    sigma_max: float = 3.0
    steps: int = 4000
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 100
    noise_freqs: int = 8
    seed: int = 0
    transition: bool = True        # add the transition term when cond holds T_o >= 2 frames
    transition_ridge: float = 1e-3  # ridge on the regression (cond is standardized)
    transition_sd_floor: float = 1e-3  # smallest residual std (a dimension constant in the demos)
    rnd_steps: int = 0             # random network distillation predictor steps (0: no RND component)


# ---------------------------------------------------------------------------
# the network and its loss
# ---------------------------------------------------------------------------
class StateEnergyNet(nn.Module):
    """g(s, σ) = f(c_in·s, c_noise)/σ + |s|²/(2(σ²+1)), f an MLP with SiLU.

    ``forward(s, sigma)``: ``s [..., D]`` and ``sigma`` broadcastable against
    ``s[..., 0]``; returns g of that broadcast shape. The noise level enters f
    as a learned bias of the first layer from a Fourier embedding of
    c_noise = ¼ ln σ (the same as concatenating the embedding to the input).
    """

    def __init__(self, cond_dim: int, hidden: Sequence[int] = (256, 256), noise_freqs: int = 8) -> None:
        super().__init__()
        if not hidden:
            raise StateTermError("the state network needs at least one hidden layer")
        self.cond_dim = int(cond_dim)
        self.register_buffer("freqs", 2.0 ** torch.arange(noise_freqs, dtype=torch.float32))
        self.inp = nn.Linear(cond_dim, hidden[0])
        self.noise = nn.Linear(2 * noise_freqs, hidden[0], bias=False)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(hidden[:-1], hidden[1:]))
        self.out = nn.Linear(hidden[-1], 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, s: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        c_in = torch.rsqrt(sigma * sigma + 1.0)
        c_noise = 0.25 * torch.log(sigma)
        ang = c_noise.unsqueeze(-1) * self.freqs
        emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=-1)
        # c_in (W s + b) + V emb(σ): the input layer on c_in·s, with a σ-dependent bias
        h = F.silu(c_in.unsqueeze(-1) * self.inp(s) + self.noise(emb))
        for lin in self.hidden:
            h = F.silu(lin(h))
        f = self.out(h).squeeze(-1)
        return f / sigma + 0.5 * (s * s).sum(-1) / (sigma * sigma + 1.0)


def dsm_loss(net: StateEnergyNet, s0: torch.Tensor, sigma: torch.Tensor,
             eps: torch.Tensor) -> torch.Tensor:
    """Per-sample ‖σ·∇ₛg(s0 + σε, σ) − ε‖² / D (score −∇g against −ε/σ, weighted σ²)."""
    x = (s0 + sigma[:, None] * eps).requires_grad_(True)
    g = net(x, sigma)
    (grad,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    return ((sigma[:, None] * grad - eps) ** 2).mean(-1)


# ---------------------------------------------------------------------------
# the reading: max over sigma of per-sigma z-scores
# ---------------------------------------------------------------------------
class TransitionScore(nn.Module):
    """cond [B, T_o·F] -> t(s) [B] = max_k |(cond @ M − b)_k| / sd_k.

    ``M`` [T_o·F, F] is (−W over the earlier frames; I over the newest), so
    ``cond @ M − b`` is the newest frame minus its linear prediction. M and b
    are stored divided by sd; the max of |r| is √ of a MaxPool over r².
    """

    def __init__(self, m: np.ndarray, b: np.ndarray, sd: np.ndarray) -> None:
        super().__init__()
        sd = np.asarray(sd, np.float64)
        self.register_buffer("m", torch.as_tensor((np.asarray(m, np.float64) / sd).astype(np.float32)))
        self.register_buffer("c", torch.as_tensor((np.asarray(b, np.float64) / sd).astype(np.float32)))

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        r = cond @ self.m - self.c
        k = int(self.m.shape[1])
        return torch.sqrt(F.max_pool2d((r * r).reshape(-1, 1, 1, k), kernel_size=(1, k)).reshape(-1))


def fit_transition(cond: np.ndarray, frames: int, ridge: float = 1e-3,
                   sd_floor: float = 1e-3) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The newest of ``frames`` time-major frames of ``cond`` regressed on the
    earlier ones (ridge, bias): returns M [D, F], b [F] and the residual std
    sd [F] (floored at ``sd_floor``) on these rows."""
    cond = np.asarray(cond, np.float64)
    n, d = cond.shape
    if frames < 2 or d % frames:
        raise StateTermError(f"the transition term needs cond of T_o >= 2 equal frames, got width {d} "
                             f"and T_o = {frames}")
    f = d // frames
    x = np.concatenate([cond[:, :d - f], np.ones((n, 1))], axis=1)
    y = cond[:, d - f:]
    reg = ridge * np.eye(x.shape[1])
    reg[-1, -1] = 0.0  # the bias is not shrunk
    w = np.linalg.solve(x.T @ x + reg, x.T @ y)  # [d-f+1, f]
    m = np.concatenate([-w[:-1], np.eye(f)], axis=0)
    b = w[-1]
    sd = np.maximum((cond @ m - b).std(0), sd_floor)
    return m, b, sd


def _mlp(d_in: int, widths: Sequence[int]) -> nn.Sequential:
    layers: List[nn.Module] = []
    d = d_in
    for w in widths[:-1]:
        layers += [nn.Linear(d, w), nn.SiLU()]
        d = w
    layers.append(nn.Linear(d, widths[-1]))
    return nn.Sequential(*layers)


class RNDScore(nn.Module):
    """Random network distillation on cond (the observation score of FIPER,
    Römer et al. 2025): a fixed random MLP ``target`` and a ``predictor``
    trained to match it on the demonstrations; cond [B, D] -> ‖predictor −
    target‖² / K [B], small where the predictor has seen data."""

    TARGET, PREDICTOR = (256, 256, 128), (256, 256, 256, 128)

    def __init__(self, cond_dim: int) -> None:
        super().__init__()
        self.target = _mlp(cond_dim, self.TARGET)
        self.predictor = _mlp(cond_dim, self.PREDICTOR)
        for q in self.target.parameters():
            q.requires_grad_(False)

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        d = self.predictor(cond) - self.target(cond)
        return (d * d).mean(-1)


def train_rnd(cond: np.ndarray, steps: int = 3000, seed: int = 0, batch_size: int = 256,
              lr: float = 1e-3) -> Tuple[RNDScore, Dict[str, Any]]:
    """Fit the RND predictor on every row of ``cond`` (AdamW, cosine decay)."""
    torch.manual_seed(seed)
    x = torch.from_numpy(np.asarray(cond, np.float32))
    if len(x) == 0:
        raise StateTermError("no training steps for RND")
    m = RNDScore(x.shape[1])
    opt = torch.optim.AdamW(m.predictor.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps))
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    recent: List[float] = []
    for _ in range(steps):
        loss = m(x[torch.randint(0, len(x), (batch_size,), generator=gen)]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        recent = (recent + [loss.item()])[-100:]
    m.eval()
    return m, {"steps": steps, "seed": seed, "batch_size": batch_size, "lr": lr,
               "loss": float(np.mean(recent)) if recent else None, "seconds": round(time.time() - t0, 1)}


#: components of the reading besides g, in the order the graph concatenates them
EXTRA_COMPONENTS = ("transition", "rnd")


class StateEnergyReading(nn.Module):
    """cond [B, D] -> state_energy [B]: the max of the z-scores
    (g(cond, σ_j) − μ_j)/sd_j over the noise levels and, for each extra
    component c (``transition``, ``rnd``), (c(cond) − μ_c)/sd_c."""

    def __init__(self, net: StateEnergyNet, sigmas: Sequence[float], mean: Sequence[float],
                 std: Sequence[float], extras: Optional[Dict[str, nn.Module]] = None,
                 extra_stats: Optional[Dict[str, Tuple[float, float]]] = None) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("sigmas", torch.as_tensor(np.asarray(sigmas, np.float32)))
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean, np.float32)))
        self.register_buffer("std", torch.as_tensor(np.asarray(std, np.float32)))
        extras = extras or {}
        unknown = sorted(set(extras) - set(EXTRA_COMPONENTS))
        if unknown:
            raise StateTermError(f"unknown components {unknown}: want some of {', '.join(EXTRA_COMPONENTS)}")
        self.extras = nn.ModuleDict({k: extras[k] for k in EXTRA_COMPONENTS if k in extras})
        stats = [(extra_stats or {}).get(k, (0.0, 1.0)) for k in self.extras]
        self.register_buffer("extra_stats", torch.tensor(stats, dtype=torch.float32).reshape(-1, 2))

    @property
    def components(self) -> List[str]:
        return ["g", *self.extras.keys()]

    def per_sigma(self, cond: torch.Tensor) -> torch.Tensor:
        """g(cond, σ_j) for every level: [B, J]."""
        return self.net(cond.unsqueeze(1), self.sigmas)

    def z(self, cond: torch.Tensor) -> torch.Tensor:
        return (self.per_sigma(cond) - self.mean) / self.std

    def extra_z(self, cond: torch.Tensor) -> torch.Tensor:
        """The extra components' z-scores, [B, len(extras)]."""
        zs = [(m(cond) - self.extra_stats[i, 0]) / self.extra_stats[i, 1] for i, m in enumerate(self.extras.values())]
        return torch.stack(zs, dim=-1) if zs else cond.new_zeros((cond.shape[0], 0))

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        z = self.z(cond)
        if len(self.extras):
            z = torch.cat([z, self.extra_z(cond)], dim=-1)
        J = int(z.shape[-1])
        # the max as a MaxPool over the J levels (ReduceMax is not in the allowed operator set)
        return F.max_pool2d(z.reshape(-1, 1, 1, J), kernel_size=(1, J)).reshape(-1)


@torch.no_grad()
def per_sigma_values(net: StateEnergyNet, cond: np.ndarray, sigmas: Sequence[float],
                     batch: int = 4096) -> np.ndarray:
    """g(cond, σ_j) in float64 numpy, [N, J]."""
    r = StateEnergyReading(net, sigmas, np.zeros(len(sigmas)), np.ones(len(sigmas))).eval()
    out = [r.per_sigma(torch.from_numpy(np.asarray(cond[i:i + batch], np.float32))).double().numpy()
           for i in range(0, len(cond), batch)]
    return np.concatenate(out) if out else np.zeros((0, len(sigmas)))


def fit_reading(net: StateEnergyNet, sigmas: Sequence[float], held_cond: np.ndarray,
                extras: Optional[Dict[str, nn.Module]] = None) -> StateEnergyReading:
    """The max-z reading with μ_j, sd_j measured on ``held_cond`` (held-out
    demonstration steps), and each extra component's μ_c, sd_c measured there too."""
    if len(held_cond) < 2:
        raise StateTermError(f"{len(held_cond)} held-out steps: need at least 2 to measure the per-sigma mean and std")
    g = per_sigma_values(net, held_cond, sigmas)
    stats: Dict[str, Tuple[float, float]] = {}
    x = torch.from_numpy(np.asarray(held_cond, np.float32))
    for k, m in (extras or {}).items():
        with torch.no_grad():
            v = m(x).double().numpy()
        stats[k] = (float(v.mean()), float(max(v.std(), 1e-12)))
    return StateEnergyReading(net, sigmas, g.mean(0), np.maximum(g.std(0), 1e-6), extras, stats).eval()


@torch.no_grad()
def read(reading: StateEnergyReading, cond: np.ndarray, batch: int = 4096) -> np.ndarray:
    """state_energy of each row of ``cond`` (torch, float64 result)."""
    out = [reading(torch.from_numpy(np.asarray(cond[i:i + batch], np.float32))).double().numpy()
           for i in range(0, len(cond), batch)]
    return np.concatenate(out) if out else np.zeros(0)


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
    from .data import Normalizer, window_indices

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


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------
def train_state_term(train_cond: np.ndarray, cfg: StateTermConfig, val_cond: Optional[np.ndarray] = None,
                     log_every: int = 0) -> Tuple[StateEnergyNet, Dict[str, Any]]:
    """DSM on every row of ``train_cond`` (AdamW, cosine decay after a linear warm-up).

    Returns the network (eval mode) and a record: final training loss (mean
    of the last 100 steps), validation loss per σ on ``val_cond`` with fixed
    noise, seconds.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    x = torch.from_numpy(np.asarray(train_cond, np.float32))
    n, d = x.shape
    if n == 0:
        raise StateTermError("no training steps")
    net = StateEnergyNet(d, cfg.hidden, cfg.noise_freqs)
    sig = torch.from_numpy(sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    warm = max(1, min(cfg.warmup_steps, cfg.steps // 10))

    def lr_at(k: int) -> float:
        if k < warm:
            return cfg.lr * (k + 1) / warm
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * (k - warm) / max(1, cfg.steps - warm)))

    t0 = time.time()
    recent: List[float] = []
    net.train()
    for k in range(cfg.steps):
        idx = torch.randint(0, n, (cfg.batch_size,), generator=gen)
        s = sig[torch.randint(0, len(sig), (cfg.batch_size,), generator=gen)]
        eps = torch.randn(cfg.batch_size, d, generator=gen)
        loss = dsm_loss(net, x[idx], s, eps).mean()
        for g in opt.param_groups:
            g["lr"] = lr_at(k)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent = (recent + [loss.item()])[-100:]
        if log_every and (k + 1) % log_every == 0:
            print(f"state-term: step {k + 1}/{cfg.steps} loss {np.mean(recent):.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    net.eval()
    rec: Dict[str, Any] = {"loss": float(np.mean(recent)), "seconds": round(time.time() - t0, 1)}
    if val_cond is not None and len(val_cond):
        rec["val_loss_per_sigma"] = val_loss_per_sigma(net, val_cond, sig.numpy(), seed=cfg.seed)
    return net, rec


def val_loss_per_sigma(net: StateEnergyNet, cond: np.ndarray, sigmas: Sequence[float], seed: int = 0,
                       n: int = 2048) -> List[float]:
    """The DSM loss per σ on up to ``n`` rows of ``cond`` with fixed noise (1 = no better than ∇g = 0)."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.from_numpy(np.asarray(cond, np.float32))
    if len(x) > n:
        x = x[torch.randperm(len(x), generator=gen)[:n]]
    eps = torch.randn(x.shape, generator=gen)
    out = []
    for s in sigmas:
        out.append(float(dsm_loss(net, x, torch.full((len(x),), float(s)), eps).mean().detach()))
    return out


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------
def export_state_energy(reading: StateEnergyReading, path: str | Path, tol: float = EXPORT_TOL,
                        seed: int = 0) -> Dict[str, float]:
    """Write ``state_energy.onnx`` and check it against torch (float64) on random cond rows.

    Refuses (deletes the file, raises :class:`~energyflow.export.ExportCheckError`)
    operators outside :data:`~energyflow.export.ALLOWED_OPS`, shape-computing
    ones, or a relative error ‖ort − torch‖/‖torch‖ above ``tol`` at batch 1 or 7.
    """
    import onnx
    import onnxruntime as ort

    from .export import ALLOWED_OPS, OPSET, ExportCheckError, _export, _rel_err, graph_ops

    path = Path(path)
    m = copy.deepcopy(reading).to("cpu", torch.float32).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    d = m.net.cond_dim
    _export(m, (torch.zeros(2, d),), path, [INPUT], [OUTPUT], {INPUT: {0: "batch"}, OUTPUT: {0: "batch"}})
    try:
        ops = set(graph_ops(path))
        bad = sorted((ops - ALLOWED_OPS) | (ops & SHAPE_OPS))
        if bad:
            raise ExportCheckError(f"{path.name} uses operators outside the allowed set: {bad}")
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        ref = copy.deepcopy(reading).to("cpu", torch.float64).eval()
        gen = torch.Generator().manual_seed(seed)
        worst = 0.0
        for B, scale in ((1, 1.0), (7, 1.0), (7, 4.0)):
            c = torch.randn(B, d, generator=gen) * scale
            (y,) = sess.run([OUTPUT], {INPUT: c.numpy()})
            with torch.no_grad():
                y_ref = ref(c.double()).numpy()
            if y.shape != y_ref.shape:
                raise ExportCheckError(f"{path.name}: output shape {y.shape}, torch {y_ref.shape}")
            worst = max(worst, _rel_err(y, y_ref))
        if not worst <= tol:
            raise ExportCheckError(f"{path.name} differs from torch: relative error {worst:.3g} > {tol}")
        model = onnx.load(str(path))
        if model.opset_import[0].version != OPSET:
            raise ExportCheckError(f"{path.name}: opset {model.opset_import[0].version}, want {OPSET}")
        return {"state_energy": worst}
    except Exception:
        if path.exists():
            path.unlink()
        raise


# ---------------------------------------------------------------------------
# statistics and the manifest block
# ---------------------------------------------------------------------------
def score_calibration(scores: Sequence[float]) -> Dict[str, Any]:
    """Held-out statistics of state_energy: mean, std, quantiles 50/90/99/99.9 (as ``calibrate``), max, n."""
    from .calibrate import score_stats

    a = np.asarray(scores, np.float64)
    return {**score_stats(a), "max": float(a.max()), "n": int(a.size)}


def manifest_block(reading: StateEnergyReading, cfg: StateTermConfig, train_rec: Dict[str, Any],
                   calibration: Dict[str, Any], export_check: Dict[str, float]) -> Dict[str, Any]:
    from .bundle import f32

    block = {
        "graph": GRAPH_FILE, "input": INPUT, "output": OUTPUT,
        "reading": READING_MAX_Z if len(reading.extras) else READING,
        "sigmas": f32(reading.sigmas.numpy()), "mean": f32(reading.mean.numpy()), "std": f32(reading.std.numpy()),
        "model": {"kind": "mlp", "hidden": list(cfg.hidden), "activation": "silu", "noise_freqs": cfg.noise_freqs,
                  "form": "f(c_in s, 1/4 ln sigma)/sigma + |s|^2/(2(sigma^2+1))"},
        "train": train_rec,
        "calibration": calibration,
        "export_check": export_check,
    }
    if len(reading.extras):
        block["components"] = reading.components
    stats = {k: reading.extra_stats[i].tolist() for i, k in enumerate(reading.extras)}
    if "transition" in stats:
        block["transition"] = {
            "form": "max_k |x_t,k - (W x_<t + b)_k| / sd_k, x_t the newest frame of cond",
            "frames": train_rec["transition"]["frames"], "ridge": cfg.transition_ridge,
            "sd_floor": cfg.transition_sd_floor, "mean": stats["transition"][0], "std": stats["transition"][1]}
    if "rnd" in stats:
        block["rnd"] = {"form": "|predictor(cond) - target(cond)|^2 / K, target a fixed random MLP",
                        "target": list(RNDScore.TARGET), "predictor": list(RNDScore.PREDICTOR),
                        "activation": "silu", **train_rec["rnd"],
                        "mean": stats["rnd"][0], "std": stats["rnd"][1]}
    return block


def fit_state_term(man: Dict[str, Any], demos: Sequence, cfg: StateTermConfig, val_fraction: float = 0.1,
                   split_seed: int = 0, log_every: int = 0,
                   rollouts: Sequence = ()) -> Tuple[StateEnergyReading, Dict[str, Any], Dict[str, Any], np.ndarray]:
    """Train g on every step of the training demos, fit the reading on every
    step of the held-out ones (split by demo as the toolkit's ``split_demos``).
    ``rollouts`` (the policy's own successful episodes, :func:`energyflow.data.load_rollouts`)
    are split the same way on their own, so the held-out steps the reading
    and the calibration are fitted on hold fresh rollouts in the same
    proportion as the training steps. Returns the reading, the ``train``
    record, the held-out ``calibration`` and the held-out state energies."""
    from .data import split_demos

    train_demos, held = split_demos(demos, val_fraction, split_seed)
    if not held:
        raise StateTermError(f"no held-out demos with --val-fraction {val_fraction} of {len(demos)} demos: "
                             "the reading's mean/std need held-out steps")
    n_demos = (len(train_demos), len(held))
    if rollouts:
        r_train, r_held = split_demos(rollouts, val_fraction, split_seed)
        train_demos, held = train_demos + r_train, held + r_held
    n_rollouts = (len(train_demos) - n_demos[0], len(held) - n_demos[1])
    tr, _ = step_conds(train_demos, man)
    va, _ = step_conds(held, man)
    net, rec = train_state_term(tr, cfg, va, log_every=log_every)
    frames = int(man["obs_horizon"])
    extras: Dict[str, nn.Module] = {}
    if cfg.transition and frames >= 2:
        extras["transition"] = TransitionScore(*fit_transition(tr, frames, cfg.transition_ridge,
                                                               cfg.transition_sd_floor))
        rec["transition"] = {"frames": frames, "fit_samples": int(len(tr))}
    if cfg.rnd_steps > 0:
        extras["rnd"], rec["rnd"] = train_rnd(tr, cfg.rnd_steps, cfg.seed)
    reading = fit_reading(net, sigma_grid(cfg.sigmas, cfg.sigma_min, cfg.sigma_max), va, extras)
    scores = read(reading, va)
    train_rec = {"steps": cfg.steps, "seed": cfg.seed, "batch_size": cfg.batch_size, "lr": cfg.lr,
                 "weight_decay": cfg.weight_decay, "val_fraction": val_fraction, "split_seed": split_seed,
                 "demos": n_demos[0], "samples": int(len(tr)), "held_out_demos": n_demos[1],
                 "held_out_samples": int(len(va)), **rec}
    if rollouts:
        train_rec["rollouts"] = n_rollouts[0]
        train_rec["held_out_rollouts"] = n_rollouts[1]
    return reading, train_rec, score_calibration(scores), scores


def _check_data(man: Dict[str, Any], demos: Sequence, bundle: Path, data: Path) -> None:
    for o in man["obs"]:
        if o["kind"] != "state":
            continue
        want = int(np.prod(o["shape"]))
        got = int(np.prod(demos[0].obs[o["name"]].shape[1:]))
        if got != want:
            raise StateTermError(f"{data}: obs '{o['name']}' has width {got}, bundle {bundle} wants {want} "
                                 f"(its obs '{o['name']}' shape {o['shape']})")


def state_term_bundle(bundle: str | Path, data: str | Path, cfg: StateTermConfig, val_fraction: float = 0.1,
                      split_seed: int = 0, log_every: int = 0,
                      rollouts: Sequence[str | Path] = (), rollout_max_factor: float = 2.0) -> Dict[str, Any]:
    """Train g for an existing bundle (energyflow or diffusion), write
    ``state_energy.onnx`` into it and the ``state_energy`` block into its
    manifest (other content kept, ``files`` hashes rewritten). ``rollouts``
    are ``scripts/rollouts.sh`` directories whose successful episodes join
    the demonstrations, those that succeeded within ``rollout_max_factor``
    times the longest demonstration's length. Nothing is changed when any
    step fails."""
    from .bundle import BundleError, read_manifest, write_manifest
    from .data import DataError, load_hdf5, load_rollouts

    bundle, data = Path(bundle), Path(data)
    try:
        man = read_manifest(bundle)
    except BundleError as e:
        raise StateTermError(str(e)) from e
    images = [o["name"] for o in man["obs"] if o["kind"] != "state"]
    if images:
        raise StateTermError(f"{bundle}: takes camera images ({', '.join(images)}): the state term supports "
                             "state bundles only")
    try:
        demos, _ = load_hdf5(data, [o["name"] for o in man["obs"]])
    except DataError as e:
        raise StateTermError(str(e)) from e
    _check_data(man, demos, bundle, data)
    own: List = []
    if rollouts:
        try:
            longest = max(d.length for d in demos)
            max_step = int(rollout_max_factor * longest)
            own, counts = load_rollouts(rollouts, [o["name"] for o in man["obs"]], max_step)
        except DataError as e:
            raise StateTermError(str(e)) from e
        if not own:
            raise StateTermError(f"no successful rollouts in {', '.join(map(str, rollouts))} "
                                 f"({counts['episodes']} episodes): nothing of the policy's own to learn")
        _check_data(man, own, bundle, Path(rollouts[0]))
    reading, train_rec, cal, _ = fit_state_term(man, demos, cfg, val_fraction, split_seed, log_every, own)
    if rollouts:
        train_rec["rollout_sources"] = [str(Path(r)) for r in rollouts]
        train_rec["rollout_episodes"] = counts["episodes"]
        train_rec["rollout_successes"] = counts["successes"]
        train_rec["rollout_late_successes"] = {"left_out": counts["late_successes"], "after_step": max_step}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_graph = Path(tmp) / GRAPH_FILE
        check = export_state_energy(reading, tmp_graph)
        shutil.copyfile(tmp_graph, bundle / GRAPH_FILE)
    man["state_energy"] = manifest_block(reading, cfg, train_rec, cal, check)
    write_manifest(bundle, man)
    return man["state_energy"]


def state_term_main(args) -> int:
    """``python -m energyflow state-term`` (arguments from :mod:`energyflow.cli`)."""
    import json
    import sys

    torch.set_num_threads(max(1, args.threads))
    cfg = StateTermConfig(steps=args.steps, sigmas=args.sigmas, sigma_min=args.sigma_min,
                          sigma_max=args.sigma_max, seed=args.seed, hidden=tuple(args.hidden),
                          batch_size=args.batch_size, lr=args.lr, transition=not args.no_transition,
                          rnd_steps=args.rnd_steps)
    try:
        block = state_term_bundle(args.bundle, args.data, cfg, args.val_fraction, args.split_seed,
                                  log_every=0 if args.quiet else 1000, rollouts=args.rollouts or (),
                                  rollout_max_factor=args.rollout_max_factor)
    except StateTermError as e:
        print(f"state-term: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: block[k] for k in ("graph", "reading", "sigmas", "train", "calibration", "export_check")},
                     indent=1))
    return 0


__all__ = ["EXTRA_COMPONENTS", "RNDScore", "StateTermConfig", "StateEnergyNet", "StateEnergyReading",
           "StateTermError", "TransitionScore", "train_rnd",
           "dsm_loss", "fit_transition",
           "export_state_energy", "fit_reading", "fit_state_term", "read", "sigma_grid", "state_term_bundle",
           "step_conds", "train_state_term"]
