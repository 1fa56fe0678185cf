"""A policy told its delay: the shipped network with one more input, how many steps late its plan lands.

Stop 84's forward labels (:mod:`research.delay.forward_labels`) taught the shipped BinPicking
network the chunk that is right 3–5 steps late. That bought the late cells back and lost level 0
on time (research/delay/README.md): one network cannot be right both on time and late unless it
knows which it is. The runtime measures how late each plan lands; this experiment asks, straight
on Meta-World, whether a network given that number keeps the shipped one's driving on time and
B's when late. A yes would justify the bundle input it needs (architecture.md's graph I/O); a
no ends the lever.

How:

- :func:`widen` puts the delay into the conditioning as one more state value per observation
  step (``cond`` = per step the 39 state values, then the delay), its weights zero: at delay 0
  the widened network is the shipped one exactly.
- :func:`told_datasets`: the demonstrations' windows at delay 0 and one window per forward label
  at the delay its plan landed (``forward_labels`` records it), in the demonstrations'
  normalisers; the delay enters as ``d / DELAY_SCALE``.
- ``train`` fine-tunes it from the shipped bundle as ``energyflow train --init-bundle --labels``
  does and exports an ordinary state bundle whose state is 40 wide: the delay's norm (mean 0,
  std DELAY_SCALE) is in the manifest, so the reference sampler needs nothing new.
- ``screen`` drives it as :func:`energyflow.rollout.rollout` does (the same scene, noise and
  lateness draws), each plan told the steps it will land late (the rollout's own draw, drawn
  before the plan: an oracle the runtime would estimate from the plans before).

    .venv/bin/python -m research.delay.told train --bundle B --data DEMOS.hdf5 \
        --labels LABELS.npz … --steps 8000 --out RUN
    .venv/bin/python -m research.delay.told screen RUN/bundle --task bin-picking --seed 1000 \
        --episodes 50 --min-late 3 --max-late 5 --json OUT.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from energyflow.config import ModelConfig, TrainConfig, merge_train_config
from energyflow.data import DataError, Normalizer, WindowDataset
from energyflow.from_bundle import check_norms, policy_from_bundle
from energyflow.policy import Policy
from energyflow.rollout import Planner, late_plan, load_planner, world_class
from energyflow.stats import wilson
from energyflow.train import Trainer, build_datasets, export_policy

#: the delay enters the network as d / DELAY_SCALE (steps late; 0..5 in these runs)
DELAY_SCALE = 4.0


def widen(pol: Policy) -> Policy:
    """A copy of the state policy ``pol`` taking one more state value per observation step (the
    delay), whose weights on it are zero: the same energy as ``pol`` wherever that value is 0."""
    cfg = pol.cfg
    if cfg.images or cfg.state_dim <= 0:
        raise ValueError("widen: state policies only")
    wide = Policy(ModelConfig.from_dict({**cfg.to_dict(), "state_dim": cfg.state_dim + 1}))
    sd = pol.state_dict()
    new = wide.state_dict()
    key = "energy.net.enc_lin1.weight"
    w = sd[key]  # [hidden, T_o * D_s]
    ds, to = cfg.state_dim, cfg.obs_horizon
    if w.shape[1] != to * ds:
        raise ValueError(f"widen: {key} is {tuple(w.shape)}, expected {to * ds} inputs")
    wider = torch.zeros(new[key].shape, dtype=w.dtype)
    for k in range(to):  # cond is per step (oldest first): the state, then the delay
        wider[:, k * (ds + 1):k * (ds + 1) + ds] = w[:, k * ds:(k + 1) * ds]
    for name, val in sd.items():
        if name != key and val.shape != new[name].shape:
            raise ValueError(f"widen: {name} is {tuple(val.shape)}, the wide model's {tuple(new[name].shape)}")
    wide.load_state_dict({**sd, key: wider})
    return wide.eval()


def told_datasets(train_ds: WindowDataset, val_ds: Optional[WindowDataset], labels: Sequence[str | Path],
                  scale: float = DELAY_SCALE, min_delay: int = 0) -> Tuple[WindowDataset, Optional[WindowDataset], int]:
    """The demonstrations' datasets widened with delay 0, and the training set given one window
    per label (``forward_labels`` files, with their ``delays``) at its delay; labels less than
    ``min_delay`` steps late are left out. Both take the demonstrations' state normaliser widened
    by the delay's, mean 0 and std ``scale`` (the delay enters as d / scale). Returns both and the
    labelled windows added."""
    norm = train_ds.state_norm
    wide = Normalizer(np.append(norm.mean, np.float32(0)), np.append(norm.std, np.float32(scale)))
    for ds in (train_ds, val_ds):
        if ds is not None:
            ds.state = np.concatenate([ds.state, np.zeros((len(ds.state), 1), ds.state.dtype)], axis=1)
            ds.state_norm = wide
    added = 0
    for path in labels:
        with np.load(path) as z:
            if "delays" not in z.files:
                raise DataError(f"{path}: no 'delays' (steps late per label): collect it again with "
                                "research.delay.forward_labels")
            states, chunks, delays = z["states"], z["chunks"], z["delays"].astype(np.float32)
        if delays.shape != (states.shape[0],):
            raise DataError(f"{path}: {delays.shape[0]} delays for {states.shape[0]} labels")
        keep = delays >= min_delay
        states, chunks, delays = states[keep], chunks[keep], delays[keep]
        n, to, _ = states.shape
        train_ds.add_windows(np.concatenate([states, np.broadcast_to(delays[:, None, None], (n, to, 1))], axis=2),
                             chunks)
        added += n
    return train_ds, val_ds, added


def train(bundle: str, data: str, labels: Sequence[str], out: str, over: Dict, scale: float = DELAY_SCALE,
          min_delay: int = 0) -> Dict:
    """Fine-tune the widened network of ``bundle`` on the demonstrations (delay 0) and the labels
    (their delays; :func:`told_datasets`), as ``energyflow train --init-bundle --labels`` does;
    export a state bundle whose delay norm is (0, ``scale``). Returns the run's summary."""
    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    init, man = policy_from_bundle(bundle)
    tcfg = merge_train_config(TrainConfig(), over)
    _, train_ds, val_ds, meta = build_datasets(data, init.cfg.to_dict(), tcfg, "state", ())
    check_norms(man, meta, bundle)
    train_ds, val_ds, added = told_datasets(train_ds, val_ds, labels, scale, min_delay)
    wide = widen(init)
    tcfg = tcfg.for_head(wide.cfg.energy_head)
    meta["training"] = tcfg.noise_record()
    meta["state_norm"] = {"mean": train_ds.state_norm.mean.tolist(), "std": train_ds.state_norm.std.tolist()}
    meta["labels"] = {"files": [str(f) for f in labels], "windows": added, "told": {"scale": scale, "min_delay": min_delay}}
    trainer = Trainer(wide.cfg, tcfg, train_ds, val_ds, outp, meta, progress=False)
    trainer.policy.load_state_dict(wide.state_dict())
    trainer.ema.model.load_state_dict(wide.state_dict())
    summary = trainer.run()
    summary["windows"] = {"train": len(train_ds), "labels": added}
    trainer.ema.sync_spectral_norm()
    export_policy(trainer.ema.model, meta, outp / "bundle", "told")
    summary["bundle"] = str(outp / "bundle")
    (outp / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def told_rollout(planner: Planner, world, seed: int, min_late: int, max_late: int, max_steps: int = 500,
                 tell: bool = True) -> Dict:
    """One episode as :func:`energyflow.rollout.rollout` drives it with ``max_late`` > 0 (the same
    draws in the same order), each plan conditioned on the observations with the steps it lands
    late appended (0 when not ``tell``)."""
    To, Ta = planner.obs_horizon, planner.action_horizon
    o = world.reset(level="0", seed=seed)
    hist = [o] * To
    rng = np.random.default_rng(seed)
    steps, pending = 0, []
    while steps < max_steps and not world.success:
        z = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        d = int(rng.integers(min_late, max_late + 1))
        told = float(d if tell else 0)
        actions = planner.plan(planner.cond([np.append(h, told) for h in hist]), z)
        run, pending = late_plan(actions[0], pending, To, Ta, d)
        for act in run:
            hist.append(world.step(act).obs)
            steps += 1
            if world.success or steps >= max_steps:
                break
        hist = hist[-To:]
    return {"seed": seed, "success": bool(world.success), "steps": steps}


def screen(bundle: str, task: str, seed: int, episodes: int, min_late: int, max_late: int,
           tell: bool = True) -> List[Dict]:
    """Episodes ``seed``.. of :func:`told_rollout`, one line each as they end."""
    planner = load_planner(bundle, threads=1)
    world = world_class()(task=task, camera_size=None)
    rows = []
    for ep in range(episodes):
        r = told_rollout(planner, world, seed + ep, min_late, max_late, tell=tell)
        rows.append(r)
        print(json.dumps(r), flush=True)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m research.delay.told", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="fine-tune the widened network")
    t.add_argument("--bundle", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--labels", nargs="+", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=8000)
    t.add_argument("--lr", type=float, default=7e-5)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--delay-scale", type=float, default=DELAY_SCALE, help="the delay enters as d / this")
    t.add_argument("--min-delay", type=int, default=0, help="leave out labels fewer steps late than this")
    s = sub.add_parser("screen", help="closed-loop episodes, each plan told its delay")
    s.add_argument("bundle")
    s.add_argument("--task", default="bin-picking")
    s.add_argument("--seed", type=int, default=1000)
    s.add_argument("--episodes", type=int, default=50)
    s.add_argument("--min-late", type=int, default=0)
    s.add_argument("--max-late", type=int, required=True)
    s.add_argument("--tell-zero", action="store_true", help="tell every plan 0 (the network as if untold)")
    s.add_argument("--json", default="")
    a = ap.parse_args(argv)
    if a.cmd == "train":
        print(json.dumps(train(a.bundle, a.data, a.labels, a.out,
                               {"steps": a.steps, "lr": a.lr, "batch_size": a.batch_size, "warmup_steps": 100,
                                "seed": 0, "threads": 1}, a.delay_scale, a.min_delay)["windows"]))
        return
    if not 0 <= a.min_late <= a.max_late:
        ap.error(f"--min-late must be 0..--max-late ({a.max_late}), got {a.min_late}")
    rows = screen(a.bundle, a.task, a.seed, a.episodes, a.min_late, a.max_late, tell=not a.tell_zero)
    k = sum(r["success"] for r in rows)
    lo, hi = wilson(k, len(rows))
    print(f"{a.task}: success {k}/{len(rows)} [{100 * lo:.1f}–{100 * hi:.1f} %, Wilson 95 %] "
          f"(plans {a.min_late}–{a.max_late} steps late, {'told 0' if a.tell_zero else 'told'})")
    if a.json:
        Path(a.json).write_text(json.dumps({"task": a.task, "bundle": a.bundle, "min_late": a.min_late,
                                            "max_late": a.max_late, "told": not a.tell_zero, "episodes": len(rows),
                                            "successes": k, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
