"""Command line: ``python -m energyflow {train,export,calibrate,threshold,state-term,sample,inspect,fixtures,bench,probe}``.

``--policy energyflow`` (default) or ``--policy diffusion`` (the Diffusion
Policy baseline, :mod:`energyflow.diffusion`) selects the kind for ``train``,
``export --random-init`` and ``fixtures``; the other commands read the kind
from the bundle's manifest (``calibrate`` refuses diffusion bundles).

Every hyper-parameter has a flag (defaults = the paper's values) and may also
come from ``--config FILE`` (YAML or JSON with ``model:`` and ``train:``
sections); explicit flags override the file.

The commands that only read bundles (``sample``, ``inspect``, ``calibrate``,
``threshold``, ``probe``, ``gate``) run on ONNX Runtime and never load torch;
``train``, ``export``, ``fixtures``, ``state-term`` and ``bench`` import their
torch modules when they run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .bundle import read_manifest
from .calibrate import CalibrationError, calibrate_bundle, set_threshold
from .config import DEFAULT_ENERGY_HEAD, ENERGY_HEADS, LOSS_WEIGHTINGS, SIGMA_SAMPLINGS, load_config_file
from .ddim import sample_diffusion_bundle
from .gate import GateLimits, run_gate
from .graphs import graph_ops
from .probe import probe_main
from .rtc_fixtures import make_guided_fixtures
from .sampler import sample_bundle


# ---------------------------------------------------------------------------
# shared flag groups
# ---------------------------------------------------------------------------
_MODEL_FLAGS = {
    # flag: (config key, type, help[, choices])
    "--energy-head": ("energy_head", str, "EnergyFlow energy head: pooled = the paper's pooled scalar read-out | "
                      "denoiser = 1/2|c_in a - F(c_in a; s, c_noise)/sigma|^2 over the DP network F "
                      f"(default {DEFAULT_ENERGY_HEAD})", ENERGY_HEADS),
    "--down-dims": ("down_dims", "ints", "U-Net channel widths (paper: 64 128 256)"),
    "--kernel-size": ("kernel_size", int, "temporal conv kernel (5)"),
    "--n-groups": ("n_groups", int, "GroupNorm groups (8)"),
    "--time-embed-dim": ("time_embed_dim", int, "sinusoidal time embedding width (128)"),
    "--state-hidden": ("state_hidden", int, "state-encoder MLP width (128)"),
    "--head-dims": ("head_dims", "ints", "pooled head: scalar head hidden widths (256 128)"),
    "--activation": ("activation", str, "mish | softplus | silu (mish)"),
    "--energy-scale": ("energy_scale", str, "pooled head: none | inv_sigma: E = f/sigma(t) | edm: E = f*sqrt(sigma^2+1)/sigma, use with --input-scale c_in (none)"),
    "--input-scale": ("input_scale", str, "pooled head: none | c_in: U-Net input a_t/sqrt(sigma^2+1) (none)"),
    "--energy-prior": ("energy_prior", str, "pooled head: none | gaussian: E = f + |a_t|^2/(2(sigma^2+1)), f learns the residual (none)"),
    "--pred-horizon": ("pred_horizon", int, "T_p (16)"),
    "--obs-horizon": ("obs_horizon", int, "T_o (2)"),
    "--action-horizon": ("action_horizon", int, "T_a (8)"),
    "--action-dim": ("action_dim", int, "D_a (taken from the data when training)"),
    "--state-dim": ("state_dim", int, "D_s (taken from the data when training)"),
}
_SCHEDULE_FLAGS = {
    "--sigma-min": ("sigma_min", float, "0.01"),
    "--sigma-max": ("sigma_max", float, "10"),
    "--T": ("T", float, "1"),
    "--gamma": ("gamma", float, "ODE endpoint (1e-3)"),
}
_TRAIN_FLAGS = {
    "--lr": ("lr", float, "AdamW learning rate (1e-4)"),
    "--weight-decay": ("weight_decay", float, "AdamW weight decay (1e-6)"),
    "--batch-size": ("batch_size", int, "batch size (256)"),
    "--warmup-steps": ("warmup_steps", int, "cosine schedule warm-up (500)"),
    "--steps": ("steps", int, "training steps (100000)"),
    "--grad-clip": ("grad_clip", float, "gradient-norm clip (1.0)"),
    "--ema-decay": ("ema_decay", float, "max EMA decay (0.9999)"),
    "--val-fraction": ("val_fraction", float, "fraction of demos held out (0.1)"),
    "--val-every": ("val_every", int, "validation period in steps (1000)"),
    "--ckpt-every": ("ckpt_every", int, "checkpoint period in steps (5000)"),
    "--seed": ("seed", int, "random seed (0)"),
    "--sigma-sampling": ("sigma_sampling", str, "energyflow noise levels: uniform = t ~ U[0,T] (Algorithm 1) | "
                         "lognormal = ln sigma ~ N(--sigma-mean, --sigma-std^2) clipped to [sigma_min, sigma_max] "
                         "(EDM) (default: the head's measured recipe, lognormal for denoiser, uniform for pooled)", SIGMA_SAMPLINGS),
    "--sigma-mean": ("sigma_mean", float, "lognormal: mean of ln sigma (-0.5 = EDM's at sigma_data 1)"),
    "--sigma-std": ("sigma_std", float, "lognormal: std of ln sigma (1.2)"),
    "--loss-weighting": ("loss_weighting", str, "energyflow DSM weight: sigma2 = sigma^2|S + eps/sigma|^2 "
                         "(Algorithm 1) | edm = (sigma^2+1)|sigma S + eps|^2 (default: edm for denoiser, sigma2 for pooled)", LOSS_WEIGHTINGS),
    "--teacher": ("teacher", str, "energyflow: distil from this Diffusion Policy checkpoint (.pt, trained on the "
                  "same data): its noise estimate replaces the drawn noise as the loss target (energyflow.distill)"),
    "--teacher-shift": ("teacher_shift", float, "with --teacher: scene shifts c(s_i - s_j), c ~ U[0, KAPPA], of "
                        "demonstration start states, labelled by the teacher (0 = none)"),
    "--teacher-shift-fraction": ("teacher_shift_fraction", float, "with --teacher-shift: fraction of each batch shifted (0.5)"),
    "--threads": ("threads", int, "torch CPU threads (2)"),
    "--device": ("device", str, "auto | cpu | cuda | cuda:N"),
}


def _add_flags(p: argparse.ArgumentParser, flags: Dict[str, tuple], title: str) -> None:
    g = p.add_argument_group(title)
    for flag, spec in flags.items():
        key, typ, hlp = spec[:3]
        choices = spec[3] if len(spec) > 3 else None
        dest = "m_" + key if flags is _MODEL_FLAGS else ("s_" + key if flags is _SCHEDULE_FLAGS else "t_" + key)
        if typ == "ints":
            g.add_argument(flag, dest=dest, type=int, nargs="+", default=None, help=hlp)
        else:
            g.add_argument(flag, dest=dest, type=typ, default=None, help=hlp, choices=choices)


def _add_policy_flag(p: argparse.ArgumentParser, hlp: str) -> None:
    """``--policy`` into the model overrides (``m_policy``; None = config file / energyflow)."""
    p.add_argument("--policy", dest="m_policy", default=None, choices=["energyflow", "diffusion"], help=hlp)


def _collect(args: argparse.Namespace, prefix: str) -> Dict[str, Any]:
    return {k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix) and v is not None}


def model_overrides(args: argparse.Namespace, file_cfg: Dict[str, Any]) -> Dict[str, Any]:
    d = dict(file_cfg.get("model", {}) or {})
    d.update(_collect(args, "m_"))
    sch = dict(d.pop("schedule", {}) or {})
    sch.update(file_cfg.get("schedule", {}) or {})
    sch.update(_collect(args, "s_"))
    if sch:
        d["schedule"] = sch
    return d


def train_overrides(args: argparse.Namespace, file_cfg: Dict[str, Any]) -> Dict[str, Any]:
    d = dict(file_cfg.get("train", {}) or {})
    d.update(_collect(args, "t_"))
    return d


def _file_cfg(args: argparse.Namespace) -> Dict[str, Any]:
    return load_config_file(args.config) if getattr(args, "config", None) else {}


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------
def cmd_train(args: argparse.Namespace) -> int:
    from .train import train_main  # torch (~2 s, ~1 GB): loaded only by the commands that train or export

    fc = _file_cfg(args)
    train_main(data=args.data, out=args.out, model_over=model_overrides(args, fc),
               train_over=train_overrides(args, fc), state_key=args.state_key, image_keys=args.image_keys,
               resume=args.resume, vision_weights=args.vision_weights, export_bundle=not args.no_export,
               name=args.name, image_size=args.image_size, progress=not args.no_progress,
               vision_width=args.vision_width, rollouts=args.rollouts or (),
               rollout_failures=args.rollout_failures, init_bundle=args.init_bundle, labels=args.labels or ())
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .train import export_from_checkpoint, export_random  # torch (heavy): only when exporting

    if args.random_init:
        fc = _file_cfg(args)
        over = model_overrides(args, fc)
        man = export_random(args.out, over, paper_size=args.paper_size, tiny=args.tiny, seed=args.seed,
                            name=args.name or ("paper-size-random" if args.paper_size else "random-init"),
                            image_keys=args.image_keys, image_size=args.image_size, tol=args.tol,
                            vision_width=args.vision_width)
    else:
        if not args.checkpoint:
            print("export: give --checkpoint FILE or --random-init", file=sys.stderr)
            return 2
        if args.m_policy:
            print("export: --policy only applies to --random-init (a checkpoint knows its kind)", file=sys.stderr)
            return 2
        man = export_from_checkpoint(args.checkpoint, args.out, name=args.name, use_ema=not args.no_ema,
                                     tol=args.tol)
    print(json.dumps({"bundle": str(args.out), "files": man["files"],
                      "export_check": man["model"].get("export_check")}, indent=1))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    try:
        res = calibrate_bundle(args.bundle, args.data, n_windows=args.n_windows, seed=args.seed, steps=args.steps,
                               val_fraction=args.val_fraction, split_seed=args.split_seed,
                               all_demos=args.all_demos, quantile=args.quantile, score=args.score,
                               png=not args.no_png, batch=args.batch)
    except CalibrationError as e:
        print(f"calibrate: {e}", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1))
    return 0


def cmd_threshold(args: argparse.Namespace) -> int:
    try:
        rec = set_threshold(args.bundle, args.score, args.value, args.rule)
    except CalibrationError as e:
        print(f"threshold: {e}", file=sys.stderr)
        return 2
    print(json.dumps(rec, indent=1))
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    man = read_manifest(args.bundle)
    rng = np.random.default_rng(args.seed)
    cond_dim = man["cond_dim"]
    if args.cond:
        cond = np.asarray(json.loads(Path(args.cond).read_text()), np.float32).reshape(-1, cond_dim)
    else:
        cond = rng.standard_normal((args.batch, cond_dim)).astype(np.float32)
    B = cond.shape[0]
    z = rng.standard_normal((B, man["pred_horizon"], man["action_dim"])).astype(np.float32)
    if man["policy"] == "diffusion":
        dres = sample_diffusion_bundle(args.bundle, cond, z, steps=args.steps, threads=args.threads)
        print(json.dumps({"policy": "diffusion", "actions": dres.actions.tolist()}))
        return 0
    res = sample_bundle(args.bundle, cond, z, steps=args.steps, threads=args.threads)
    out = {"actions": res.actions.tolist(), "energy": res.energy.tolist(),
           "centered_reward": res.centered_reward.tolist()}
    print(json.dumps(out))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    man = read_manifest(args.bundle, verify=True)
    summary = {k: man[k] for k in ("name", "policy", "created", "source_commit", "action_dim", "pred_horizon",
                                   "obs_horizon", "action_horizon", "cond_dim", "schedule", "sampler",
                                   "conditioning")}
    if "alphas_cumprod" in summary["schedule"]:  # diffusion: 100 numbers, show the ends
        ac = summary["schedule"]["alphas_cumprod"]
        summary["schedule"] = dict(summary["schedule"], alphas_cumprod=f"{len(ac)} values, {ac[0]:.6g} .. {ac[-1]:.6g}")
    summary["obs"] = [{k: v for k, v in o.items() if k != "norm"} for o in man["obs"]]
    summary["files"] = man["files"]
    summary["graphs"] = {}
    for g, spec in man["graphs"].items():
        summary["graphs"][g] = {"file": spec["file"], "ops": graph_ops(Path(args.bundle) / spec["file"])}
    se = man.get("state_energy")
    if se:  # the state term (energyflow state-term): its own block, not one of the policy's graphs
        summary["state_energy"] = {"file": se["graph"], "ops": graph_ops(Path(args.bundle) / se["graph"]),
                                   **{k: se[k] for k in ("reading", "sigmas", "calibration")}}
    summary["calibration"] = man.get("calibration")
    summary["model"] = man.get("model")
    summary["hashes_ok"] = True
    print(json.dumps(summary, indent=1))
    return 0


def cmd_fixtures(args: argparse.Namespace) -> int:
    if args.guided_from:
        print(json.dumps(make_guided_fixtures(args.guided_from, args.out, seed=args.seed), indent=1))
        return 0
    from .fixtures import make_fixtures  # torch (heavy): only when writing fixtures

    if args.policy == "diffusion" and args.energy_head != "pooled":
        print("fixtures: --energy-head applies to --policy energyflow only", file=sys.stderr)
        return 2
    if args.policy == "diffusion" and args.state_term:
        print("fixtures: --state-term applies to --policy energyflow only", file=sys.stderr)
        return 2
    res = make_fixtures(args.out, n_cases=args.cases, seed=args.seed, action_dim=args.action_dim,
                        state_dim=args.state_dim, train_steps=args.train_steps, steps=args.steps,
                        policy=args.policy, energy_head=args.energy_head, state_term=args.state_term)
    print(json.dumps(res, indent=1))
    return 0


def cmd_state_term(args: argparse.Namespace) -> int:
    from .state_term import state_term_main  # torch (heavy): only when training the state term

    return state_term_main(args)


def cmd_probe(args: argparse.Namespace) -> int:
    return probe_main(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import bench_bundle  # torch (heavy): only when benchmarking

    print(json.dumps(bench_bundle(args.bundle, steps=args.steps, batch=args.batch, threads=args.threads,
                                  repeats=args.repeats, backend=args.backend)))
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    lim = GateLimits(max_change_ratio=args.max_change_ratio, min_change_slack=args.min_change_slack,
                     max_extra_flips=args.max_extra_flips, min_success=args.min_success)
    res = run_gate(args.bundle, args.data, episodes=args.episodes, windows=args.windows, max_steps=args.max_steps,
                   steps=args.steps, seed=args.seed, limits=lim)
    print(res.to_json() if args.json else res)
    return 0 if res.passed else 3


# ---------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m energyflow", description="EnergyFlow training toolkit")
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="train a policy on HDF5 demonstrations (EnergyFlow: Algorithm 1)")
    t.add_argument("--data", required=True, help="robomimic-style HDF5 file")
    _add_policy_flag(t, "policy kind: energyflow (default) | diffusion (Diffusion Policy baseline: DDPM "
                        "epsilon loss, 100 timesteps, DDIM bundle)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, logs, bundle/)")
    t.add_argument("--config", help="YAML/JSON config file with model:/schedule:/train: sections")
    t.add_argument("--state-key", default="state", help="obs key of the state vector ('' for none)")
    t.add_argument("--image-keys", nargs="*", default=[], help="obs keys of camera images (uint8 HxWx3)")
    t.add_argument("--image-size", type=int, default=96, help="crop size of camera images (96)")
    t.add_argument("--vision-weights", help="state_dict file for the ResNet-18 image encoder")
    t.add_argument("--vision-width", type=int, default=64,
                   help="ResNet-18 channel base: 64 = standard (512 features); 16 costs ~1/16 (CPU training)")
    t.add_argument("--rollouts", nargs="+", metavar="DIR",
                   help="more training episodes: the successful ones of `energyflow sim eval --record DIR "
                        "--json DIR/summary.json` runs (scripts/rollouts.sh), e.g. a teacher's own driving; "
                        "training windows only (the normalisers and the validation split stay the demos')")
    t.add_argument("--rollout-failures", action="store_true",
                   help="with --rollouts and --teacher: the rollouts' failed episodes too, their states labelled "
                        "by the teacher (DAgger-style: a student's own driving, the teacher as the expert)")
    t.add_argument("--labels", nargs="+", metavar="FILE",
                   help="labelled windows, one training window each: .npz files of raw states [N, T_o, D_s] and "
                        "chunks [N, T_p, D_a] (e.g. research/delay/forward_labels.py's); state policies only")
    t.add_argument("--resume", help="checkpoint to resume from ('auto' = latest in --out)")
    t.add_argument("--init-bundle", metavar="DIR",
                   help="start the weights from this EnergyFlow state bundle (its model config too): fine-tune a "
                        "shipped policy whose checkpoint is gone, on the demonstrations it was trained on")
    t.add_argument("--name", default=None, help="bundle name")
    t.add_argument("--no-export", action="store_true", help="do not write out/bundle at the end")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_flags(t, _MODEL_FLAGS, "model")
    _add_flags(t, _SCHEDULE_FLAGS, "noise schedule")
    _add_flags(t, _TRAIN_FLAGS, "optimisation")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("export", help="write an engine bundle from a checkpoint or a random init")
    e.add_argument("--out", required=True, help="bundle directory to write")
    e.add_argument("--checkpoint", help="training checkpoint (.pt)")
    e.add_argument("--no-ema", action="store_true", help="export the raw weights instead of the EMA")
    e.add_argument("--random-init", action="store_true", help="random weights, no training (benchmarks)")
    e.add_argument("--paper-size", action="store_true", help="paper-size model: down dims 64 128 256, D_a=10")
    e.add_argument("--tiny", action="store_true", help="tiny model (down dims 8 16 32)")
    e.add_argument("--image-keys", nargs="*", default=[], help="(random init) camera obs names")
    e.add_argument("--image-size", type=int, default=96)
    e.add_argument("--vision-width", type=int, default=64, help="(random init) ResNet-18 channel base (64)")
    e.add_argument("--config", help="YAML/JSON config (random init)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--name", default=None)
    _add_policy_flag(e, "(random init) policy kind: energyflow (default) | diffusion")
    e.add_argument("--tol", type=float, default=None,
                   help="export check: energyflow: max relative error of ONNX Runtime vs torch autograd (1e-5); "
                        "diffusion: max abs error of eps (1e-4)")
    _add_flags(e, _MODEL_FLAGS, "model (random init)")
    _add_flags(e, _SCHEDULE_FLAGS, "noise schedule (random init)")
    e.set_defaults(func=cmd_export)

    c = sub.add_parser("calibrate", help="energy-score statistics on held-out windows -> manifest "
                                         "(energyflow bundles only)")
    c.add_argument("--bundle", required=True)
    c.add_argument("--data", required=True, help="HDF5 demonstrations")
    c.add_argument("--n-windows", type=int, default=512)
    c.add_argument("--steps", type=int, default=None, help="sampler steps K (manifest default)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--val-fraction", type=float, default=0.1, help="held-out fraction (same split as train)")
    c.add_argument("--split-seed", type=int, default=0, help="split seed (train --seed)")
    c.add_argument("--all-demos", action="store_true", help="use every demo (data file is already held out)")
    c.add_argument("--score", default="energy", choices=["energy", "centered_energy"])
    c.add_argument("--quantile", default="99.9", choices=["50", "90", "99", "99.9"])
    c.add_argument("--batch", type=int, default=64)
    c.add_argument("--no-png", action="store_true")
    c.set_defaults(func=cmd_calibrate)

    th = sub.add_parser("threshold", help="set the calibration's recommended score and threshold "
                                          "(the evaluation's choice) without re-running calibrate")
    th.add_argument("--bundle", required=True)
    th.add_argument("--score", default="energy", choices=["energy", "centered_energy"])
    th.add_argument("--value", type=float, required=True)
    th.add_argument("--rule", required=True, help="how the value was chosen (kept in the manifest)")
    th.set_defaults(func=cmd_threshold)

    se = sub.add_parser("state-term", help="train the state term g(s) (training/README.md, 'State term') for a state bundle: "
                                           "state_energy.onnx + the manifest's state_energy block")
    se.add_argument("--bundle", required=True, help="an energyflow or diffusion bundle (its cond layout and norms)")
    se.add_argument("--data", required=True, help="HDF5 demonstrations (every step of every demo is used)")
    se.add_argument("--rollouts", nargs="+", metavar="DIR",
                    help="the policy's own level-0 rollouts through the runtime (scripts/rollouts.sh "
                         "directories: DIR/summary.json + recordings); their successful episodes join the "
                         "demonstrations, split into training and held-out the same way")
    se.add_argument("--rollout-max-factor", type=float, default=2.0,
                    help="leave out rollouts that succeeded only after this many times the longest "
                         "demonstration's length (2): a policy that wandered first is not doing what it does "
                         "when all is well")
    se.add_argument("--steps", type=int, default=4000, help="training steps (4000)")
    se.add_argument("--sigmas", type=int, default=8, help="number of log-spaced noise levels (8)")
    se.add_argument("--sigma-min", type=float, default=0.05)
    se.add_argument("--sigma-max", type=float, default=3.0)
    se.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="MLP hidden widths (256 256)")
    se.add_argument("--batch-size", type=int, default=256)
    se.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate, cosine decay (1e-3)")
    se.add_argument("--val-fraction", type=float, default=0.1,
                    help="held-out demos for the reading's mean/std and the calibration (same split as train)")
    se.add_argument("--split-seed", type=int, default=0, help="split seed (train --seed)")
    se.add_argument("--seed", type=int, default=0, help="initialization and noise seed")
    se.add_argument("--threads", type=int, default=1, help="torch CPU threads (1)")
    se.add_argument("--no-transition", action="store_true",
                    help="g alone: no transition term (the newest frame of cond against its linear "
                         "prediction from the earlier ones; needs T_o >= 2)")
    se.add_argument("--rnd-steps", type=int, default=0,
                    help="add the random network distillation component, trained this many steps (e.g. 3000; "
                         "0, the default: none — it false-alarmed on the policy's own states in closed loop)")
    se.add_argument("--quiet", action="store_true", help="no progress lines")
    se.set_defaults(func=cmd_state_term)

    s = sub.add_parser("sample", help="run the reference sampler (ONNX Runtime) on a bundle "
                                      "(Algorithm 2, or DDIM for diffusion bundles)")
    s.add_argument("--bundle", required=True)
    s.add_argument("--cond", help="JSON file with cond rows (default: random)")
    s.add_argument("--batch", type=int, default=1)
    s.add_argument("--steps", type=int, default=None)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=2)
    s.set_defaults(func=cmd_sample)

    i = sub.add_parser("inspect", help="print a bundle's manifest summary and verify hashes")
    i.add_argument("--bundle", required=True)
    i.set_defaults(func=cmd_inspect)

    f = sub.add_parser("fixtures", help="tiny bundle + reference sampler cases for the Go parity tests")
    f.add_argument("--out", required=True, help="e.g. engines/testdata/parity")
    f.add_argument("--cases", type=int, default=24)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--action-dim", type=int, default=3)
    f.add_argument("--state-dim", type=int, default=5)
    f.add_argument("--policy", default="energyflow", choices=["energyflow", "diffusion"],
                   help="policy kind (diffusion: e.g. --out engines/testdata/parity-diffusion)")
    f.add_argument("--energy-head", default="pooled", choices=list(ENERGY_HEADS),
                   help="energyflow head of the fixture bundle (pooled: engines/testdata/parity; "
                        "denoiser: e.g. --out engines/testdata/parity-denoiser)")
    f.add_argument("--train-steps", type=int, default=None, help="training steps (energyflow 120, diffusion 1000)")
    f.add_argument("--steps", type=int, default=None,
                   help="sampler steps in the cases (energyflow K=10, diffusion DDIM S=20)")
    f.add_argument("--state-term", action="store_true",
                   help="add a tiny state term (state_energy.onnx + manifest block) and each case's state_energy "
                        "(e.g. --out engines/testdata/parity-state)")
    f.add_argument("--guided-from", default=None,
                   help="write real-time chunking cases (engines.Guide) from this EnergyFlow fixture folder's bundle "
                        "and cases instead (e.g. --guided-from engines/testdata/parity --out engines/testdata/parity-guided)")
    f.set_defaults(func=cmd_fixtures)

    g = sub.add_parser("gate", help="before closed-loop evaluation: chunk smoothness vs the demonstrations and "
                                    "direct rollouts on the training scenes (exit 3 when a check fails)")
    g.add_argument("--bundle", required=True)
    g.add_argument("--data", required=True, help="the HDF5 demonstrations the bundle was trained on (sim.record)")
    g.add_argument("--episodes", type=int, default=20, help="training scenes to replay (0: smoothness only)")
    g.add_argument("--windows", type=int, default=256, help="observation windows for the smoothness check")
    g.add_argument("--max-steps", type=int, default=500)
    g.add_argument("--steps", type=int, default=None, help="sampler steps (bundle default)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-change-ratio", type=float, default=2.0,
                   help="policy step change at most this × the demos' (action std units)")
    g.add_argument("--min-change-slack", type=float, default=0.05, help="... or the demos' + this, if larger")
    g.add_argument("--max-extra-flips", type=float, default=0.1, help="gripper flips per window above the demos'")
    g.add_argument("--min-success", type=float, default=0.9, help="training-scene success rate required")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gate)

    b = sub.add_parser("bench", help="time the reference sampler (median ms, JSON)")
    b.add_argument("--bundle", required=True)
    b.add_argument("--steps", type=int, default=20)
    b.add_argument("--batch", type=int, default=1)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--repeats", type=int, default=20)
    b.add_argument("--backend", default="torch", choices=["torch", "ort"])
    b.set_defaults(func=cmd_bench)

    pr = sub.add_parser("probe", help="conditioning probe: slope of the executed action and of the denoised "
                                      "estimate per unit of the most varying observation inputs, at the start "
                                      "states of held-out demos (energyflow and diffusion bundles)")
    pr.add_argument("--bundle", required=True)
    pr.add_argument("--data", required=True, help="HDF5 demonstrations (start states: first frames)")
    pr.add_argument("--against", default=None, help="a second bundle, probed identically and shown side by side")
    pr.add_argument("--dims", default=None,
                    help="observation dims to probe, comma-separated; '+' moves dims together (e.g. 4+22+36,5); "
                         "default: the --top inputs varying most across the start states")
    pr.add_argument("--top", type=int, default=3, help="how many inputs without --dims (3)")
    pr.add_argument("--no-group", action="store_true",
                    help="without --dims: probe single dims (default: dims that are copies of each other across "
                         "the start states move together)")
    pr.add_argument("--episodes", type=int, default=20, help="held-out demos whose first frame is used (20)")
    pr.add_argument("--samples", type=int, default=32, help="fixed noise draws per state (32)")
    pr.add_argument("--delta", type=float, default=0.5,
                    help="finite-difference step, ± this many start-state stds of the input (0.5)")
    pr.add_argument("--sigmas", default=",".join(f"{s:g}" for s in (7.0, 2.0, 0.5, 0.1)),
                    help="noise levels of the denoised-estimate sensitivity (7,2,0.5,0.1)")
    pr.add_argument("--steps", type=int, default=None, help="sampler steps (manifest default)")
    pr.add_argument("--val-fraction", type=float, default=0.1, help="held-out fraction (same split as train)")
    pr.add_argument("--split-seed", type=int, default=0, help="split seed (train --seed)")
    pr.add_argument("--all-demos", action="store_true", help="use every demo (data file is already held out)")
    pr.add_argument("--seed", type=int, default=0, help="noise seed")
    pr.add_argument("--threads", type=int, default=1)
    pr.add_argument("--json", action="store_true", help="machine-readable output")
    pr.set_defaults(func=cmd_probe)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)
