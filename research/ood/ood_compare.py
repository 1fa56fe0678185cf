"""Offline comparison of out-of-distribution scores on the bundle's cond, on the same states.

    OMP_NUM_THREADS=1 .venv/bin/python -m research.ood.ood_compare --bundle bundles/metaworld-button-press \
        --data build/demos/button-press.hdf5 --task button-press [--episodes 20] [--seed 1000] [--json FILE] \
        [--ace-samples 16] [--ace-cell 0.1] [--ace-steps K] [--ace-calib 500]

States: Meta-World's scripted expert (the policy that recorded the
demonstrations, ``sim.record``) at OOD levels 0/S/M/L (``sim.ood``) on fresh
scene seeds (episode i: seed --seed+i), in-process (``sim.world.World``, no
bridge), each episode run to its success plus --extra-steps (as the
recorder keeps) or --max-steps. Each step's cond is built with the bundle's
normalization exactly as for the demonstrations (``state_term.step_conds``:
history of T_o states, the first frame repeated at the start).

Scores (higher = more out of distribution), each fitted on every step of the
training demos and thresholded at the q99.9 of every step of the held-out
demos (the toolkit's by-demo split, --val-fraction/--split-seed):

(a) ``g``: the state term read as max over σ of per-σ z-scores
    (``energyflow.state_term``), through the exported ``state_energy.onnx``
    on ONNX Runtime. Taken from the bundle when its manifest has a
    ``state_energy`` block, else trained here with the CLI's defaults.
(b) ``mahalanobis``: distance of cond to the training steps' mean under
    their covariance (+ ``--ridge`` on the diagonal: cond has constant and
    duplicated dimensions).
(c) ``rnd``: random network distillation on cond, as FIPER's observation
    score (Römer et al., NeurIPS 2025, "RND-OE"): a fixed random MLP target,
    a trained predictor, the squared prediction error as the score.
    Reproduced: RND on the policy's input, trained on the demonstrations only,
    thresholded at a quantile of in-distribution scores. Not reproduced:
    FIPER runs RND on the policy's learned observation *embedding* (here the
    standardized cond itself: the bundle's state encoder is inside the
    policy graph) and the conformal calibration on successful *rollouts*;
    its aggregation over a short window is read through --window (below),
    the same rule for every score. So this compares OOD detectors of
    the state, not FIPER's failure predictor (see (e), (f) for its ACE and
    its alarm).
(d) ``transition``: the state term's transition part alone (the newest
    frame of cond against its linear prediction from the earlier frames,
    ``state_term.fit_transition``), fitted here. When the bundle's state
    term lists components, (a) holds them too (named state_energy g+...).
(e) ``ace``: FIPER's action-chunk entropy, the uncertainty of the policy's
    conditional action distribution. Our reading of the paper (its exact
    estimator may differ): for each state's cond, B = --ace-samples action
    chunks are sampled from the bundle's policy in one batched call of the
    toolkit's reference sampler (``energyflow.rollout.load_planner``:
    Algorithm 2 on energy_grad.onnx, or DDIM for a diffusion bundle; the
    bundle's K unless --ace-steps), from the same B noise draws for every
    state (seed --train-seed, so a state's score is a function of the state
    alone and runs are reproducible). Per chunk step, the B samples' first 3
    action dimensions (the end-effector xyz command, unstandardized) are
    binned on a grid anchored at 0 whose cell per dimension is --ace-cell
    times that dimension's range over every action of the training demos;
    the Shannon entropy (bits) of the cell counts, averaged over the
    chunk's T_p steps, is ACE (``action_chunk_entropy``; 0 when all B
    samples share a cell, at most log2 B). Thresholded like the others, on
    at most --ace-calib held-out steps (seeded subsample: B sampler runs
    per state make every held-out step slow). --ace-samples 0 leaves (e),
    (f) out.
(f) ``fiper``: FIPER's alarm, raised when RND and ACE both exceed their
    thresholds on the same step; its continuous score (for AUROC) is
    min(rnd / q99.9_rnd, ace / q99.9_ace), so the alarm is that score > 1.

Reported: per-step AUROC of level S/M/L steps vs level-0 steps with a 95 %
interval (bootstrap over episodes), episode AUROC (each episode's max over
its first --first steps), the episode AUROC through a window (--window N:M,
the gate's 2 of 5 by default: each step's N-th largest score of the last M
steps, the episode's max of that over its first --first steps; FIPER's alarm
aggregates each of its indicators over the window, then takes both, as the
paper aggregates them over short windows before the alarm), the fraction of
level-0 steps above the held-out q99.9, absurd states against the q99.9,
and, with --faults, each fault (``sim.world.FAULTS``, injected at
--fault-step into level-0 expert episodes on the same seeds): the episodes
with a step above the q99.9 within --within steps of the onset (20 = 1 s
at the evaluation's 20 Hz) and the median delay. The expert reacts to a
fault as the expert, not as a learned policy would; the closed-loop
measurement is ``sim eval --fault``.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

from research.ood.state_components import watched  # noqa: E402

LEVELS = ("0", "S", "M", "L")


# ---------------------------------------------------------------------------
# rollouts of the scripted expert
# ---------------------------------------------------------------------------
def expert_episodes(task: str, level: str, seeds, max_steps: int, extra_steps: int, fault=None):
    """Raw states [L, 39] of each expert episode (obs_t before action t, as sim.record keeps them);
    ``fault`` (a ``sim.world.Fault`` or None) is injected in every episode."""
    from sim.world import World, expert_policy

    w = World(task, camera_size=None)
    pol = expert_policy(task)
    out = []
    for s in seeds:
        obs = w.reset(task, level, int(s), fault=fault)
        states = []
        while True:
            states.append(np.asarray(obs, np.float32))
            a = np.clip(np.asarray(pol.get_action(obs.astype(np.float64)), np.float32), -1, 1)
            r = w.step(a)
            obs = r.obs
            if w.success_step is not None and w.step_count >= w.success_step + extra_steps:
                break
            if r.truncated or w.step_count >= max_steps:
                break
        out.append({"seed": int(s), "states": np.stack(states), "success": bool(w.success)})
    w.close()
    return out


# ---------------------------------------------------------------------------
# the scores
# ---------------------------------------------------------------------------
class StateEnergyScore:
    """(a) g read as max-σ z, through state_energy.onnx on ONNX Runtime."""

    name = "g (max-sigma z)"

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        self.sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def __call__(self, cond: np.ndarray) -> np.ndarray:
        out = [self.sess.run(["state_energy"], {"cond": cond[i:i + 4096]})[0] for i in range(0, len(cond), 4096)]
        return np.concatenate(out).astype(np.float64)


class Mahalanobis:
    """(b) sqrt((x-mu)^T (Sigma + ridge I)^-1 (x-mu)), fitted on the training steps."""

    name = "Mahalanobis"

    def __init__(self, x: np.ndarray, ridge: float) -> None:
        x = np.asarray(x, np.float64)
        self.mu = x.mean(0)
        cov = np.cov(x, rowvar=False) + ridge * np.eye(x.shape[1])
        self.prec = np.linalg.inv(cov)

    def __call__(self, cond: np.ndarray) -> np.ndarray:
        d = np.asarray(cond, np.float64) - self.mu
        return np.sqrt(np.einsum("ni,ij,nj->n", d, self.prec, d))


class Transition:
    """The state term's transition part alone: max_k |newest frame − its linear prediction|_k / sd_k."""

    name = "transition"

    def __init__(self, x: np.ndarray, frames: int) -> None:
        from energyflow import state_term as st

        self.m = st.TransitionScore(*st.fit_transition(x, frames)).eval()

    @torch.no_grad()
    def __call__(self, cond: np.ndarray) -> np.ndarray:
        return self.m(torch.from_numpy(np.asarray(cond, np.float32))).double().numpy()


def action_chunk_entropy(chunks: np.ndarray, cell: np.ndarray, dims: int = 3) -> float:
    """(e) ACE of one batch of chunks ``[B, T_p, D_a]`` sampled for one observation: per chunk step the
    Shannon entropy (base 2) of the counts of the B samples' first ``dims`` action dimensions binned on
    the grid ``floor(a / cell)`` (``cell`` ``[dims]``, > 0), averaged over the T_p steps."""
    x = np.asarray(chunks, np.float64)
    if x.ndim != 3 or x.shape[2] < dims:
        raise ValueError(f"chunks must be [B, T_p, >= {dims}], got {x.shape}")
    cell = np.broadcast_to(np.asarray(cell, np.float64), (dims,))
    if not np.all(cell > 0):
        raise ValueError(f"cell sizes must be > 0, got {cell}")
    B, T = x.shape[:2]
    keys = np.floor(x[:, :, :dims] / cell).astype(np.int64)
    h = 0.0
    for t in range(T):
        _, counts = np.unique(keys[:, t], axis=0, return_counts=True)
        p = counts / B
        h -= float((p * np.log2(p)).sum())
    return h / T


class ACE:
    """(e) FIPER's action-chunk entropy: ``action_chunk_entropy`` of B chunks sampled for each cond from the
    bundle's reference sampler, one batched call per state, the same B noise draws for every state."""

    name = "ACE"

    def __init__(self, bundle: str | Path, samples: int, cell: np.ndarray, steps: int | None, seed: int) -> None:
        from energyflow.rollout import load_planner

        self.planner = load_planner(bundle, steps=steps, threads=1)
        self.steps = int(steps or self.planner.manifest["sampler"]["steps"])
        self.cell = np.asarray(cell, np.float64)
        self.z = np.random.default_rng(seed).standard_normal((samples,) + self.planner.noise_shape).astype(np.float32)
        self.seconds, self.states = 0.0, 0

    def __call__(self, cond: np.ndarray) -> np.ndarray:
        cond = np.asarray(cond, np.float32)
        B = len(self.z)
        out = np.empty(len(cond))
        t0 = time.perf_counter()
        for i in range(len(cond)):
            acts = self.planner.plan(np.repeat(cond[i:i + 1], B, axis=0), self.z)
            out[i] = action_chunk_entropy(acts, self.cell)
        self.seconds += time.perf_counter() - t0
        self.states += len(cond)
        return out

    @property
    def ms_per_state(self) -> float:
        return 1e3 * self.seconds / max(self.states, 1)


def ratio(x: np.ndarray, t: float) -> np.ndarray:
    """x / t, for a threshold t that may be 0 (then inf where x > 0, 0 elsewhere)."""
    x = np.asarray(x, np.float64)
    if t > 0:
        return x / t
    return np.where(x > 0, np.inf, 0.0)


def score_all(scores: dict, thr: dict, cond: np.ndarray) -> dict:
    """Every score on ``cond`` ``[N, C]``; with ACE also (f) ``fiper`` = min(rnd/q_rnd, ace/q_ace)."""
    if len(cond) == 0:
        return {k: np.zeros(0) for k in list(scores) + (["fiper"] if "ace" in scores else [])}
    out = {k: f(cond) for k, f in scores.items()}
    if "ace" in out:
        out["fiper"] = np.minimum(ratio(out["rnd"], thr["rnd"]), ratio(out["ace"], thr["ace"]))
    return out


class RND:
    """(c) random network distillation: |predictor(x) - target(x)|^2 / K, the target fixed at random init
    (``state_term.train_rnd``, the state term's RND component)."""

    name = "RND"

    def __init__(self, x: np.ndarray, steps: int, seed: int) -> None:
        from energyflow import state_term as st

        self.m, rec = st.train_rnd(x, steps, seed)
        self.seconds = rec["seconds"]

    @torch.no_grad()
    def __call__(self, cond: np.ndarray) -> np.ndarray:
        return self.m(torch.from_numpy(np.asarray(cond, np.float32))).double().numpy()


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------
def auroc(neg: np.ndarray, pos: np.ndarray) -> float:
    """P(pos > neg) + ½ P(tie) (Mann-Whitney)."""
    r = rankdata(np.concatenate([neg, pos]))
    n0, n1 = len(neg), len(pos)
    return float((r[n0:].sum() - n1 * (n1 + 1) / 2) / (n0 * n1))


def boot_auroc(neg_eps, pos_eps, reps: int, rng) -> tuple:
    """AUROC of the pooled steps and its 95 % interval, resampling whole episodes in each group."""
    point = auroc(np.concatenate(neg_eps), np.concatenate(pos_eps))
    vals = []
    for _ in range(reps):
        i = rng.integers(0, len(neg_eps), len(neg_eps))
        j = rng.integers(0, len(pos_eps), len(pos_eps))
        vals.append(auroc(np.concatenate([neg_eps[k] for k in i]), np.concatenate([pos_eps[k] for k in j])))
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return point, float(lo), float(hi)


def window_max(x: np.ndarray, n: int, m: int, first: int) -> float:
    """The episode's largest n-of-m statistic over its first ``first`` steps: the highest threshold
    that the rule "n of the last m steps over it" would still trip on (-inf when it never has n steps)."""
    w = watched(np.asarray(x[:first], np.float64), n, m)
    return float(w.max()) if len(w) else float("-inf")


def episode_stats(per_lv: dict, thr: dict, keys, first: int, window=None) -> dict:
    """score -> [one value per episode]: the max over the first steps, or with ``window`` (n, m) the
    windowed max; FIPER's alarm through a window takes RND and ACE each through it (as ratios to
    their q99.9), then their minimum step by step (both above)."""
    out = {}
    for k in keys:
        if window is None:
            out[k] = [float(x[:first].max()) for x in per_lv[k]]
        elif k == "fiper":
            n, m = window
            out[k] = [float(np.minimum(watched(ratio(r[:first], thr["rnd"]), n, m),
                                       watched(ratio(c[:first], thr["ace"]), n, m)).max())
                      for r, c in zip(per_lv["rnd"], per_lv["ace"])]
        else:
            out[k] = [window_max(x, window[0], window[1], first) for x in per_lv[k]]
    return out


def fmt_ci(t) -> str:
    return f"{t[0]:.3f} [{t[1]:.2f}, {t[2]:.2f}]"


# ---------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True, help="bundle giving the cond layout and norms (read only)")
    p.add_argument("--data", required=True, help="the demonstrations (HDF5, read only)")
    p.add_argument("--task", required=True)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--seed", type=int, default=1000, help="first scene seed (fresh: the demos used 0..)")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--extra-steps", type=int, default=10, help="steps kept after the first success (sim.record's 10)")
    p.add_argument("--first", type=int, default=60, help="episode score = max over the first N steps")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="g training steps when the bundle has no state_energy "
                                                           "block (state-term's default)")
    p.add_argument("--rnd-steps", type=int, default=3000)
    p.add_argument("--ridge", type=float, default=1e-3, help="Mahalanobis: added to the covariance diagonal")
    p.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--train-seed", type=int, default=0)
    p.add_argument("--faults", nargs="*", default=[], help="faults to inject at level 0 (push, object)")
    p.add_argument("--fault-step", type=int, default=30, help="environment step of the fault onset")
    p.add_argument("--within", type=int, default=20, help="detection window after the onset, steps (20 = 1 s)")
    p.add_argument("--ace-samples", type=int, default=16, help="ACE: action chunks sampled per state, in one "
                                                               "batched call (0: no ACE and no FIPER alarm)")
    p.add_argument("--ace-cell", type=float, default=0.1, help="ACE: grid cell per xyz dimension, as a fraction "
                                                               "of its range over the training demos' actions")
    p.add_argument("--ace-steps", type=int, default=None, help="ACE: sampler steps K (default: the bundle's)")
    p.add_argument("--ace-calib", type=int, default=500, help="ACE: held-out steps (seeded subsample) for its "
                                                              "q99.9; <= 0: all")
    p.add_argument("--levels", nargs="+", default=["S", "M", "L"], choices=LEVELS[1:],
                   help="shifted levels compared with level 0")
    p.add_argument("--window", default="2:5", help="N:M, the episode window rule (the gate's 2 of 5)")
    p.add_argument("--steps-out", default="", help="an .npz of every episode's per-step scores "
                                                   "(key level/score/episode)")
    p.add_argument("--json", default="")
    a = p.parse_args(argv)
    try:
        win = tuple(int(v) for v in a.window.split(":"))
        if len(win) != 2 or not 1 <= win[0] <= win[1]:
            raise ValueError
    except ValueError:
        raise SystemExit(f"ood_compare: --window {a.window!r}: want N:M with 1 <= N <= M, e.g. 2:5")
    levels = ("0", *[lv for lv in LEVELS[1:] if lv in a.levels])
    torch.set_num_threads(1)

    from energyflow import state_term as st
    from energyflow.bundle import read_manifest
    from energyflow.data import Demo, load_hdf5, split_demos

    man = read_manifest(a.bundle)
    demos, _ = load_hdf5(a.data, [o["name"] for o in man["obs"] if o["kind"] == "state"])
    block = man.get("state_energy")
    if block:  # score against the split the bundle's g was calibrated on
        a.val_fraction, a.split_seed = block["train"]["val_fraction"], block["train"]["split_seed"]
    train_demos, held = split_demos(demos, a.val_fraction, a.split_seed)
    tr, _ = st.step_conds(train_demos, man)
    va, _ = st.step_conds(held, man)

    t0 = time.time()
    tmp = tempfile.TemporaryDirectory()
    if block:
        g_path, g_note = Path(a.bundle) / block["graph"], f"the bundle's state_energy.onnx ({block['train']['steps']} steps)"
    else:
        cfg = st.StateTermConfig(seed=a.train_seed, **({"steps": a.steps} if a.steps else {}))
        reading, rec, _, _ = st.fit_state_term(man, demos, cfg, a.val_fraction, a.split_seed)
        g_path = Path(tmp.name) / st.GRAPH_FILE
        st.export_state_energy(reading, g_path)
        g_note = f"trained here, {cfg.steps} steps in {rec['seconds']:.0f} s"
    scores = {"g": StateEnergyScore(g_path), "mahalanobis": Mahalanobis(tr, a.ridge)}
    parts = block.get("components", ["g"]) if block else ["g"]
    if int(man["obs_horizon"]) >= 2:  # the transition term alone, fitted here as state-term fits it
        scores["transition"] = Transition(tr, int(man["obs_horizon"]))
    rnd = RND(tr, a.rnd_steps, a.train_seed)
    scores["rnd"] = rnd
    names = {"g": "state_energy " + "+".join(parts) if len(parts) > 1 else "g max-sigma z",
             "mahalanobis": "Mahalanobis", "transition": "transition alone", "rnd": "RND (FIPER-style)",
             "ace": "ACE (FIPER-style)", "fiper": "FIPER: RND and ACE"}
    thr = {k: float(np.quantile(f(va), 0.999)) for k, f in scores.items()}
    ace_note = ""
    if a.ace_samples > 0:
        acts = np.concatenate([d.actions for d in train_demos])[:, :3].astype(np.float64)
        span = acts.max(0) - acts.min(0)
        if not np.all(span > 0):
            raise SystemExit(f"ACE: an xyz action dimension is constant over the training demos (range {span})")
        ace = ACE(a.bundle, a.ace_samples, a.ace_cell * span, a.ace_steps, a.train_seed)
        n_cal = len(va) if a.ace_calib <= 0 or a.ace_calib >= len(va) else a.ace_calib
        cal_rows = np.sort(np.random.default_rng(a.split_seed).choice(len(va), n_cal, replace=False))
        thr["ace"] = float(np.quantile(ace(va[cal_rows]), 0.999))
        thr["fiper"] = 1.0  # min(rnd/q_rnd, ace/q_ace) > 1 <=> both above their q99.9
        scores["ace"] = ace
        ace_note = (f"ACE: B={a.ace_samples} chunks per state in one call, K={ace.steps}, cell {a.ace_cell:g} x "
                    f"the training actions' xyz range ({', '.join(f'{c:.3g}' for c in ace.cell)}); its q99.9 on "
                    + (f"a seeded subsample of {n_cal} of the {len(va)} held-out steps (--ace-calib)"
                       if n_cal < len(va) else f"all {len(va)} held-out steps"))
    fit_s = time.time() - t0

    t1 = time.time()
    seeds = range(a.seed, a.seed + a.episodes)
    eps = {lv: expert_episodes(a.task, lv, seeds, a.max_steps, a.extra_steps) for lv in levels}
    roll_s = time.time() - t1
    skey = next(o["name"] for o in man["obs"] if o["kind"] == "state")
    keys = list(scores) + (["fiper"] if "ace" in scores else [])
    per = {}  # level -> score -> list of per-episode step scores
    for lv in levels:
        per[lv] = {k: [] for k in keys}
        for e in eps[lv]:
            c, _ = st.step_conds([Demo("ep", np.zeros((len(e["states"]), man["action_dim"]), np.float32),
                                       {skey: e["states"]})], man)
            for k, v in score_all(scores, thr, c).items():
                per[lv][k].append(v)

    rng = np.random.default_rng(0)
    res = {"task": a.task, "bundle": str(a.bundle), "g": g_note, "thresholds_q99.9": thr,
           "levels": {}, "false_alarm": {}, "absurd": {}}
    lines = [f"{a.task}: bundle {a.bundle}; g: {g_note}; RND {a.rnd_steps} steps in {rnd.seconds:.0f} s",
             f"fit on every step of {len(train_demos)} training demos ({len(tr)} steps), q99.9 of "
             f"{len(held)} held-out demos ({len(va)} steps); fit {fit_s:.0f} s, rollouts {roll_s:.0f} s",
             "expert episodes (seeds %d-%d): " % (a.seed, a.seed + a.episodes - 1) + ", ".join(
                 f"{lv}: {sum(e['success'] for e in eps[lv])}/{len(eps[lv])} success, "
                 f"{sum(len(e['states']) for e in eps[lv])} steps" for lv in levels)]
    if "ace" in scores:
        lines.append(ace_note)
        lines.append(f"ACE cost: {scores['ace'].ms_per_state:.1f} ms per state, wall clock ({scores['ace'].states} "
                     f"states so far: held-out calibration + the level episodes)")
        res["ace"] = {"samples": a.ace_samples, "cell": a.ace_cell, "cell_abs": scores["ace"].cell.tolist(),
                      "steps": scores["ace"].steps, "calib_steps": int(len(cal_rows)), "held_out_steps": len(va),
                      "ms_per_state": scores["ace"].ms_per_state}
    lines.append("")
    w = 22
    ep = {key: {lv: episode_stats(per[lv], thr, keys, a.first, wn) for lv in levels}
          for key, wn in (("episode", None), ("episode_window", win))}
    res["window"] = list(win)
    for title, key in (("per-step AUROC vs level 0 [95% CI, bootstrap over episodes]", "step"),
                       (f"episode AUROC vs level 0 (max over the first {a.first} steps) [95% CI]", "episode"),
                       (f"episode AUROC vs level 0 through the window, {win[0]} of the last {win[1]} steps (the "
                        f"largest {win[0]}-of-{win[1]} statistic over the first {a.first} steps; FIPER: RND and "
                        "ACE each through it, then both) [95% CI]", "episode_window")):
        lines.append(title)
        lines.append(f"{'score':20s}" + "".join(f"{'level ' + lv:{w}s}" for lv in levels[1:]))
        for k in keys:
            row = []
            for lv in levels[1:]:
                neg, pos = per["0"][k], per[lv][k]
                if key != "step":
                    neg = [np.array([v]) for v in ep[key]["0"][k]]
                    pos = [np.array([v]) for v in ep[key][lv][k]]
                ci = boot_auroc(neg, pos, a.boot, rng)
                res["levels"].setdefault(lv, {}).setdefault(k, {})[key] = ci
                row.append(f"{fmt_ci(ci):{w}s}")
            lines.append(f"{names[k]:20s}" + "".join(row))
        lines.append("")
    lines.append("false alarms: level-0 steps above the held-out q99.9 (episodes with any)")
    for k in keys:
        z = per["0"][k]
        n_over = sum(int((x > thr[k]).sum()) for x in z)
        n = sum(len(x) for x in z)
        n_ep = sum(int((x > thr[k]).any()) for x in z)
        res["false_alarm"][k] = {"steps": n_over, "of": n, "episodes": n_ep}
        lines.append(f"  {names[k]:20s} {100 * n_over / n:5.2f} % ({n_over}/{n} steps, {n_ep}/{len(z)} episodes); "
                     + ("alarm: both above their q99.9" if k == "fiper" else f"q99.9 = {thr[k]:.4g}"))
    lines.append("")

    # absurd states
    st_entry = next(o for o in man["obs"] if o["kind"] == "state")
    smean = np.asarray(st_entry["norm"]["mean"], np.float32)
    sstd = np.asarray(st_entry["norm"]["std"], np.float32)
    T_o, D = int(man["obs_horizon"]), len(smean)
    zero_state = np.tile((0 - smean) / sstd, T_o)[None].astype(np.float32)
    zero_cond = np.zeros((1, int(man["cond_dim"])), np.float32)
    r2 = np.random.default_rng(1)
    rows = r2.choice(len(va), 500)
    off = va[rows].copy()
    for i in range(len(off)):
        dims = r2.choice(D, 3, replace=False)
        sign = r2.choice([-1.0, 1.0], 3)
        for t in range(T_o):
            off[i, t * D + dims] += 10.0 * sign
    lines.append("absurd states: score / held-out q99.9 (> 1 trips)")
    lines.append(f"{'score':20s}{'raw state all 0':18s}{'cond all 0 (mean)':20s}{'10 sd off, 3 dims: tripped (min ratio)'}")
    sz, sc, so = score_all(scores, thr, zero_state), score_all(scores, thr, zero_cond), score_all(scores, thr, off)
    for k in keys:
        rz, rc = float(ratio(sz[k], thr[k])[0]), float(ratio(sc[k], thr[k])[0])
        ro = ratio(so[k], thr[k])
        res["absurd"][k] = {"raw_zero": rz, "cond_zero": rc, "off10_tripped": float((ro > 1).mean()),
                            "off10_min_ratio": float(ro.min())}
        lines.append(f"{names[k]:20s}{rz:<18.3g}{rc:<20.3g}{100 * (ro > 1).mean():.1f} % ({ro.min():.3g})")
    if a.faults:
        from sim.world import Fault

        lines += ["", f"faults at step {a.fault_step} (level 0, same seeds): episodes with a step above the "
                      f"held-out q99.9 within {a.within} steps of the onset; median delay in steps"]
        res["faults"] = {}
        for kind in a.faults:
            feps = expert_episodes(a.task, "0", seeds, a.max_steps, a.extra_steps, Fault(kind, a.fault_step))
            fsc = []
            for e in feps:
                c, _ = st.step_conds([Demo("ep", np.zeros((len(e["states"]), man["action_dim"]), np.float32),
                                           {skey: e["states"]})], man)
                # states[i] is the observation before action i; the fault acts in step fault_step,
                # so states[fault_step + 1] is the first observation that can show it (every score is
                # per row of cond, so only the window is scored)
                fsc.append(score_all(scores, thr, c[a.fault_step + 1:a.fault_step + 1 + a.within]))
            row = []
            for k in keys:
                delays = []
                for v in fsc:
                    over = v[k] > thr[k]
                    delays.append(int(np.argmax(over)) + 1 if over.any() else None)
                hit = [d for d in delays if d is not None]
                res["faults"].setdefault(kind, {})[k] = {"detected": len(hit), "of": len(delays), "delays": delays}
                row.append(f"{names[k]} {len(hit)}/{len(delays)}"
                           + (f" (median {np.median(hit):.0f})" if hit else ""))
            lines.append(f"  {kind:8s} " + "; ".join(row))
    print("\n".join(lines))
    if a.steps_out:
        np.savez_compressed(a.steps_out, **{f"{lv}/{k}/{i}": x for lv in levels for k in keys
                                            for i, x in enumerate(per[lv][k])})
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
