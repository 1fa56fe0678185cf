"""Conditioning probe: how much the policy's action follows its observation (training/README.md, "Conditioning probe").

At real start states (the first frame of held-out demonstrations, repeated
over the T_o history steps as training and the runtime pad an episode's
start), each probed input -- one observation dimension, or a group of
dimensions that are copies of each other across those start states (e.g.
the button's x, its previous-frame copy and the goal x in Meta-World's
state) -- is moved by ±h raw units (h = ``delta`` × its std across the start
states, or across every frame of those demos when it does not vary there) and
the probe reports, by central finite differences with the same
noise on both sides:

* the **executed-action slope**: d mean_z actions[T_o-1] / d input, per action
  dimension, in raw action units per raw input unit (mean over start states;
  its norm, and the mean of the per-state norms), through the bundle's own
  reference sampler (Algorithm 2 for energyflow, DDIM for diffusion) on ONNX
  Runtime with ``samples`` fixed noise draws;
* per noise level sigma, the **denoised estimate's sensitivity**: D(a; s, sigma) at
  a = a_demo + sigma z (a_demo: the demonstration's first standardized chunk),
  with D = a + sigma^2 score = a - sigma^2 grad_a for energyflow and DP's x0
  prediction (x_k = sqrt(ab_k)(a_demo + sigma_k z), x0 = (x_k - sqrt(1-ab_k) eps)/sqrt(ab_k), no
  clipping, k the DDPM step whose sigma_k = sqrt((1-ab_k)/ab_k) is nearest) for
  diffusion; reported as the slope of D at actions[T_o-1] (raw units, as
  above) and as ``chunk_rms_per_std``: the RMS over the chunk of the change of
  D for +1 std of the input, in standardized action units.

``--against B2`` runs the same states, inputs, steps and noise on a second
bundle (same state layout) and prints the two side by side.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .bundle import read_manifest
from .config import Schedule
from .data import load_hdf5, split_demos
from .ddim import OrtEps, ddim_sample
from .sampler import OrtEnergyGrad, sample

DEFAULT_SIGMAS = (7.0, 2.0, 0.5, 0.1)


class ProbeError(ValueError):
    """The probe cannot run on these bundles / this data."""


# ---------------------------------------------------------------------------
# a bundle behind one interface: sample actions, denoise at sigma
# ---------------------------------------------------------------------------
class ProbeBundle:
    """A state-conditioned energyflow or diffusion bundle on ONNX Runtime."""

    def __init__(self, path: str | Path, steps: Optional[int] = None, threads: int = 1) -> None:
        self.path = Path(path)
        man = read_manifest(self.path)
        self.man = man
        self.policy = man.get("policy", "energyflow")
        self.name = man.get("name", self.path.name)
        if any(o["kind"] != "state" for o in man["obs"]) or len(man["obs"]) != 1:
            raise ProbeError(f"{path}: the probe needs a bundle conditioned on one state vector "
                             f"(obs: {[o['name'] + ':' + o['kind'] for o in man['obs']]})")
        st = man["obs"][0]
        self.state_key: str = st["name"]
        self.state_mean = np.asarray(st["norm"]["mean"], np.float32)
        self.state_std = np.asarray(st["norm"]["std"], np.float32)
        self.a_mean = np.asarray(man["action_norm"]["mean"], np.float32)
        self.a_std = np.asarray(man["action_norm"]["std"], np.float32)
        self.T_o, self.T_p, self.D_a = man["obs_horizon"], man["pred_horizon"], man["action_dim"]
        sch = man["schedule"]
        if self.policy == "diffusion":
            self.eps = OrtEps(self.path / man["graphs"]["eps"]["file"], threads=threads)
            self.alphas_cumprod = np.asarray(sch["alphas_cumprod"], np.float64)
            self.clip = float(sch.get("clip_sample", 0.0))
        else:
            self.grad = OrtEnergyGrad(self.path / man["graphs"]["energy_grad"]["file"], threads=threads)
            self.schedule = Schedule(**{k: sch[k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
        self.steps = int(steps or man["sampler"]["steps"])

    @property
    def head(self) -> str:
        """``diffusion`` or the EnergyFlow head (``pooled`` for bundles from before the field)."""
        if self.policy == "diffusion":
            return "diffusion"
        return str(self.man.get("model", {}).get("energy_head", "pooled"))

    def cond(self, hist: np.ndarray) -> np.ndarray:
        """Raw state histories [B, T_o, D_s] -> cond [B, T_o*D_s] (standardized, oldest first)."""
        return ((hist - self.state_mean) / self.state_std).astype(np.float32).reshape(hist.shape[0], -1)

    def sample(self, cond: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Raw action chunks [B, T_p, D_a] from noise z [B, T_p, D_a] (the bundle's reference sampler)."""
        if self.policy == "diffusion":
            return ddim_sample(self.eps, cond, z, self.alphas_cumprod, self.steps, self.clip,
                               self.a_mean, self.a_std).actions
        return sample(self.grad, cond, z, self.schedule, self.steps, self.a_mean, self.a_std).actions

    def sigma_point(self, sigma: float) -> Tuple[float, Dict[str, float]]:
        """The noise level actually probed for a requested ``sigma`` and how it is addressed."""
        if self.policy == "diffusion":
            ac = self.alphas_cumprod
            sig = np.sqrt((1.0 - ac) / ac)
            k = int(np.argmin(np.abs(np.log(sig) - math.log(sigma))))
            return float(sig[k]), {"k": k}
        s = self.schedule
        sig = float(np.clip(sigma, s.sigma_min, s.sigma_max))
        t = s.T * math.log(sig / s.sigma_min) / math.log(s.sigma_max / s.sigma_min)
        return sig, {"t": t}

    def denoise(self, a0: np.ndarray, z: np.ndarray, cond: np.ndarray, sigma: float) -> np.ndarray:
        """D(a0 + sigma z; s, sigma) in standardized action units [B, T_p, D_a]."""
        sig, where = self.sigma_point(sigma)
        B = a0.shape[0]
        if self.policy == "diffusion":
            ab = float(self.alphas_cumprod[where["k"]])
            sa, sb = math.sqrt(ab), math.sqrt(1.0 - ab)
            x = (sa * (a0 + sig * z)).astype(np.float32)
            eps = self.eps(x, cond, np.full((B,), float(where["k"]), np.float32))
            return ((x - sb * eps) / sa).astype(np.float32)
        a = (a0 + np.float32(sig) * z).astype(np.float32)
        g, _ = self.grad(a, cond, np.full((B,), where["t"], np.float32))
        return (a - np.float32(sig * sig) * g).astype(np.float32)


# ---------------------------------------------------------------------------
# start states and probed inputs
# ---------------------------------------------------------------------------
@dataclass
class StartStates:
    demos: List[str]
    states: np.ndarray        # [N, D_s] raw first frames
    chunks: np.ndarray        # [N, T_p, D_a] raw first action chunks (window at step 0)
    frames: np.ndarray        # [M, D_s] every frame of these demos (fallback when start states do not vary)


def start_states(data: str | Path, state_key: str, T_o: int, T_p: int, episodes: int = 20,
                 val_fraction: float = 0.1, split_seed: int = 0, all_demos: bool = False) -> StartStates:
    """First frames (and first action chunks) of up to ``episodes`` held-out demos (training's by-demo split)."""
    demos, _ = load_hdf5(data, [state_key])
    held = list(demos) if all_demos else split_demos(demos, val_fraction, split_seed)[1]
    if not held:
        raise ProbeError(f"{data}: no held-out demos (use --all-demos with a separate held-out file)")
    held = held[:episodes]
    idx = np.clip(np.arange(T_p) - (T_o - 1), 0, None)
    chunks = np.stack([d.actions[np.minimum(idx, d.length - 1)] for d in held])
    states = np.stack([d.obs[state_key][0] for d in held]).astype(np.float64)
    frames = np.concatenate([d.obs[state_key] for d in held]).astype(np.float64)
    return StartStates([d.name for d in held], states, chunks.astype(np.float32), frames)


def parse_dims(spec: str, state_dim: int) -> List[List[int]]:
    """``"4+22+36,5"`` -> [[4, 22, 36], [5]] (``+`` moves dims together)."""
    groups = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        g = [int(x) for x in part.split("+")]
        for j in g:
            if not 0 <= j < state_dim:
                raise ProbeError(f"--dims: dimension {j} outside 0..{state_dim - 1}")
        groups.append(g)
    if not groups:
        raise ProbeError("--dims: no dimension given")
    return groups


def top_varying_groups(states: np.ndarray, top: int = 3, group: bool = True, rtol: float = 1e-3) -> List[List[int]]:
    """The ``top`` inputs that vary most (raw std) across the start states.

    With ``group``, dimensions whose start-state values are copies of each
    other up to a constant offset (std of the difference ≤ rtol × std) form
    one input, moved together, led by the lowest index.
    """
    std = states.std(0)
    order = [int(j) for j in np.argsort(-std, kind="stable") if std[j] > 0]
    used: set = set()
    groups: List[List[int]] = []
    for j in order:
        if j in used:
            continue
        g = [j]
        if group:
            g += [k for k in order if k != j and k not in used
                  and np.std(states[:, k] - states[:, j]) <= rtol * std[j]]
        used.update(g)
        groups.append(sorted(g))
        if len(groups) >= top:
            break
    if not groups:
        raise ProbeError("no observation dimension varies across the start states; name them with --dims")
    return groups


# ---------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------
def _perturbed(states: np.ndarray, dims: Sequence[int], h: float, T_o: int) -> np.ndarray:
    """Raw histories [N, T_o, D_s]: the start state repeated, ``dims`` moved by ``h``."""
    s = states.copy()
    s[:, list(dims)] += h
    return np.repeat(s[:, None, :], T_o, axis=1)


def probe_bundle(pb: ProbeBundle, st: StartStates, groups: List[List[int]], steps_raw: List[float],
                 stds: List[float], sigmas: Sequence[float], samples: int = 32, seed: int = 0) -> Dict[str, Any]:
    """Slopes of one bundle for every probed input (see the module docstring)."""
    N = st.states.shape[0]
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((samples, pb.T_p, pb.D_a)).astype(np.float32)
    zz = np.broadcast_to(z[None], (N,) + z.shape).reshape((N * samples,) + z.shape[1:])
    a0 = ((st.chunks - pb.a_mean) / pb.a_std).astype(np.float32)            # [N, T_p, D_a] standardized
    a0 = np.repeat(a0, samples, axis=0)
    ex = pb.T_o - 1
    out: List[Dict[str, Any]] = []
    for dims, h, sd in zip(groups, steps_raw, stds):
        conds = {sgn: np.repeat(pb.cond(_perturbed(st.states, dims, sgn * h, pb.T_o)), samples, axis=0)
                 for sgn in (1, -1)}
        acts = {sgn: pb.sample(c, zz).reshape(N, samples, pb.T_p, pb.D_a)[:, :, ex].mean(1)
                for sgn, c in conds.items()}
        per_state = (acts[1] - acts[-1]) / (2.0 * h)                          # [N, D_a] raw per raw unit
        rec: Dict[str, Any] = {"dims": list(dims), "step": h, **_slope_summary(per_state)}
        den = []
        for sigma in sigmas:
            sig, where = pb.sigma_point(sigma)
            D = {sgn: pb.denoise(a0, zz, c, sigma).reshape(N, samples, pb.T_p, pb.D_a).mean(1)
                 for sgn, c in conds.items()}
            dD = (D[1] - D[-1]) / (2.0 * h)                                     # [N, T_p, D_a] std units per raw unit
            d = {"sigma": float(sigma), "sigma_used": sig, **where,
                 **_slope_summary(dD[:, ex] * pb.a_std),
                 "chunk_rms_per_std": float(np.mean(np.sqrt(np.mean((dD * sd) ** 2, axis=(1, 2)))))}
            den.append(d)
        rec["denoised"] = den
        out.append(rec)
    return {"bundle": str(pb.path), "name": pb.name, "policy": pb.policy, "head": pb.head,
            "sampler_steps": pb.steps, "inputs": out}


def _slope_summary(per_state: np.ndarray) -> Dict[str, Any]:
    """[N, D_a] per-state slopes -> mean per dim, its norm, mean of the per-state norms."""
    m = per_state.mean(0)
    return {"slope": [float(v) for v in m], "slope_norm": float(np.linalg.norm(m)),
            "slope_norm_per_state": float(np.mean(np.linalg.norm(per_state, axis=1)))}


def run_probe(bundle: str | Path, data: str | Path, against: Optional[str | Path] = None,
              dims: Optional[str] = None, episodes: int = 20, samples: int = 32, delta: float = 0.5,
              sigmas: Sequence[float] = DEFAULT_SIGMAS, top: int = 3, group: bool = True, steps: Optional[int] = None,
              val_fraction: float = 0.1, split_seed: int = 0, all_demos: bool = False, seed: int = 0,
              threads: int = 1) -> Dict[str, Any]:
    """The whole probe: start states, inputs, one result per bundle (``bundles[0]`` = ``bundle``)."""
    pbs = [ProbeBundle(bundle, steps, threads)]
    if against is not None:
        pbs.append(ProbeBundle(against, steps, threads))
    ref = pbs[0]
    for pb in pbs[1:]:
        if (pb.state_key, pb.state_mean.shape, pb.T_p, pb.D_a) != (ref.state_key, ref.state_mean.shape, ref.T_p,
                                                                   ref.D_a):
            raise ProbeError(f"{pb.path} and {ref.path} differ in state key/size or action shape")
    st = start_states(data, ref.state_key, ref.T_o, ref.T_p, episodes, val_fraction, split_seed, all_demos)
    if st.states.shape[1] != ref.state_mean.shape[0]:
        raise ProbeError(f"{data}: state '{ref.state_key}' has {st.states.shape[1]} dims, "
                         f"the bundle {ref.state_mean.shape[0]}")
    # with a single start state nothing varies across start states: rank by every frame instead
    ranked_on = st.states if len(st.demos) > 1 else st.frames
    groups = parse_dims(dims, st.states.shape[1]) if dims else top_varying_groups(ranked_on, top, group)
    stds, steps_raw = [], []
    for g in groups:
        sd = float(st.states[:, g[0]].std())
        if sd <= 0:
            sd = float(st.frames[:, g[0]].std()) or 1.0
        stds.append(sd)
        steps_raw.append(delta * sd)
    res = [probe_bundle(pb, st, groups, steps_raw, stds, sigmas, samples, seed) for pb in pbs]
    return {"data": str(data), "start_states": {"n": len(st.demos), "demos": st.demos,
                                                "held_out": "all demos" if all_demos else
                                                f"val_fraction {val_fraction}, split_seed {split_seed}"},
            "samples": samples, "delta_std": delta, "seed": seed,
            "inputs": [{"dims": g, "std": sd, "step": h} for g, sd, h in zip(groups, stds, steps_raw)],
            "bundles": res}


def format_probe(res: Dict[str, Any]) -> str:
    """Human-readable table, the bundles side by side."""
    bs = res["bundles"]
    w = max([34] + [len(b["name"]) + len(b["head"]) + 5 for b in bs])
    lines = [f"probe: {res['start_states']['n']} start states of {res['data']} "
             f"({res['start_states']['held_out']}), {res['samples']} noise samples, "
             f"finite difference ±{res['delta_std']} std",
             "slope = d action[T_o-1] / d input (raw units, mean over start states); "
             "|mean slope| (mean |per-state slope|)"]
    head = f"{'':28s}" + "".join(f"{b['name'] + ' [' + b['head'] + ']':<{w}s}" for b in bs)
    for i, inp in enumerate(res["inputs"]):
        lines.append("")
        lines.append(f"input dims {'+'.join(map(str, inp['dims']))}: std {inp['std']:.4g}, "
                     f"step ±{inp['step']:.4g}")
        lines.append(head)
        recs = [b["inputs"][i] for b in bs]
        lines.append(f"{'  executed action':28s}" + "".join(f"{_fmt_slope(r):<{w}s}" for r in recs))
        lines.append(f"{'    per action dim':28s}" + "".join(
            f"{' '.join(f'{v:+.3g}' for v in r['slope']):<{w}s}" for r in recs))
        for j, d0 in enumerate(recs[0]["denoised"]):
            label = f"  D at sigma {d0['sigma']:g}"
            lines.append(f"{label:28s}" + "".join(f"{_fmt_slope(r['denoised'][j]):<{w}s}" for r in recs))
            lines.append(f"{'    chunk rms per +1 std':28s}" + "".join(
                f"{r['denoised'][j]['chunk_rms_per_std']:<{w}.4g}" for r in recs))
    return "\n".join(lines)


def _fmt_slope(r: Dict[str, Any]) -> str:
    return f"{r['slope_norm']:.4g} ({r['slope_norm_per_state']:.4g})"


def probe_main(args) -> int:
    """``python -m energyflow probe`` (arguments from :mod:`energyflow.cli`)."""
    sig = tuple(float(s) for s in args.sigmas.split(",") if s.strip())
    try:
        res = run_probe(args.bundle, args.data, args.against, args.dims, args.episodes, args.samples, args.delta,
                        sig, args.top, not args.no_group, args.steps, args.val_fraction, args.split_seed,
                        args.all_demos, args.seed, args.threads)
    except ProbeError as e:
        print(f"probe: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1) if args.json else format_probe(res))
    return 0
