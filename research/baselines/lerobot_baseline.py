"""LeRobot's Diffusion Policy on our demonstrations, evaluated with its own code.

The issue's baseline (b): an implementation nobody on this project wrote.
It runs in its own virtual environment (lerobot pins torch < 2.11):

    python3 -m venv build/lerobot-venv
    build/lerobot-venv/bin/pip install lerobot==0.4.4 h5py metaworld==3.1.1
    build/lerobot-venv/bin/python -m research.baselines.lerobot_baseline train \\
        --data build/demos/button-press.hdf5 --out build/lerobot/button-press --steps 2000
    build/lerobot-venv/bin/python -m research.baselines.lerobot_baseline eval \\
        --policy build/lerobot/button-press --task button-press --level 0 --episodes 10 \\
        --seed 1000 --max-steps 500 --json build/eval/lerobot_button-press_0_K20.json

What is LeRobot's: the policy (`DiffusionPolicy`: its U-Net, FiLM, its
DDPM/DDIM schedulers from diffusers, its loss, its action queue in
``select_action``) and its normalization (min-max, its processor
pipeline). What is ours: the windows fed to it (DP's layout: 2 observation
steps, 16 actions starting one step back, padded by repetition with
``action_is_pad``), the AdamW/cosine loop (LeRobot's optimizer preset
values), and the rollout on ``sim.world.World`` with the evaluation's
seeds. Settings that differ from LeRobot's defaults, to match the paper's
protocol and our CPU: U-Net down dims 64/128/256 (default 512/1024/2048),
DDIM with 20 inference steps (default DDPM 100). No runtime in the loop:
actions go straight to Meta-World (no latency, no safety gate).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Dict, List

import h5py
import numpy as np
import torch

N_OBS, HORIZON, N_ACT = 2, 16, 8
ROBOT = 4  # Meta-World obs[0:4] (hand xyz, gripper) is LeRobot's robot state; obs[4:] its environment state


def split(o: np.ndarray) -> Dict[str, np.ndarray]:
    """Meta-World's observation as LeRobot's two state inputs (the last axis is split)."""
    return {"observation.state": o[..., :ROBOT], "observation.environment_state": o[..., ROBOT:]}


def _config(state_dim: int, action_dim: int):
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    return DiffusionConfig(
        n_obs_steps=N_OBS, horizon=HORIZON, n_action_steps=N_ACT,
        input_features={"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(ROBOT,)),
                        "observation.environment_state": PolicyFeature(type=FeatureType.ENV,
                                                                       shape=(state_dim - ROBOT,))},
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))},
        down_dims=(64, 128, 256), noise_scheduler_type="DDIM", num_inference_steps=20, device="cpu")


def load_windows(path: str):
    """DP windows: obs [i-1, i], actions [i-1 .. i+14], edge-padded, with the pad mask."""
    obs_w, act_w, pad_w, all_obs, all_act = [], [], [], [], []
    with h5py.File(path, "r") as f:
        for name in sorted(f["data"].keys()):
            d = f["data"][name]
            o = d["obs/state"][:].astype(np.float32)
            a = d["actions"][:].astype(np.float32)
            all_obs.append(o)
            all_act.append(a)
            n = len(a)
            for i in range(n):
                oi = [max(i - 1, 0), i]
                ai = np.arange(i - 1, i - 1 + HORIZON)
                pad = (ai < 0) | (ai >= n)
                obs_w.append(o[oi])
                act_w.append(a[np.clip(ai, 0, n - 1)])
                pad_w.append(pad)
    o, a = np.concatenate(all_obs), np.concatenate(all_act)

    def stats(x):
        return {"min": torch.tensor(x.min(0)), "max": torch.tensor(x.max(0)),
                "mean": torch.tensor(x.mean(0)), "std": torch.tensor(x.std(0))}

    so = split(o)
    return (np.stack(obs_w), np.stack(act_w), np.stack(pad_w),
            {"observation.state": stats(so["observation.state"]),
             "observation.environment_state": stats(so["observation.environment_state"]), "action": stats(a)})


def train(a: argparse.Namespace) -> None:
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.policies.diffusion.processor_diffusion import make_diffusion_pre_post_processors

    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    obs, act, pad, st = load_windows(a.data)
    cfg = _config(obs.shape[-1], act.shape[-1])
    policy = DiffusionPolicy(cfg)
    pre, _ = make_diffusion_pre_post_processors(cfg, dataset_stats=st)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.optimizer_lr, betas=cfg.optimizer_betas,
                            eps=cfg.optimizer_eps, weight_decay=cfg.optimizer_weight_decay)
    warm = min(cfg.scheduler_warmup_steps, a.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, a.steps - warm))))
    rng = np.random.default_rng(a.seed)
    policy.train()
    t0, log = time.time(), []
    for step in range(a.steps):
        idx = rng.integers(0, len(obs), a.batch_size)
        batch = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in split(obs[idx]).items()}
        batch.update({"action": torch.from_numpy(act[idx]), "action_is_pad": torch.from_numpy(pad[idx])})
        batch = pre(batch)
        loss, _ = policy.forward(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == a.steps - 1:
            log.append({"step": step, "loss": float(loss), "s": time.time() - t0})
            print(json.dumps(log[-1]), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    torch.save({k: {kk: vv for kk, vv in v.items()} for k, v in st.items()}, out / "stats.pt")
    (out / "train_log.json").write_text(json.dumps(log))


def evaluate(a: argparse.Namespace) -> None:
    import os

    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.policies.diffusion.processor_diffusion import make_diffusion_pre_post_processors
    from sim.world import World

    torch.set_num_threads(a.threads)
    policy = DiffusionPolicy.from_pretrained(a.policy)
    policy.eval()
    st = torch.load(Path(a.policy) / "stats.pt")
    pre, post = make_diffusion_pre_post_processors(policy.config, dataset_stats=st)
    w = World(a.task, camera_size=None)
    results: List[Dict] = []
    infer_ms: List[float] = []  # select_action calls that planned a chunk (every N_ACT-th)
    for ep in range(a.episodes):
        seed = a.seed + ep
        o = w.reset(level=a.level, seed=seed)
        policy.reset()
        torch.manual_seed(seed)
        steps = 0
        while steps < a.max_steps and not w.success:
            with torch.no_grad():
                t0 = time.perf_counter()
                b = pre({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in split(o.astype(np.float32)).items()})
                act = post(policy.select_action(b))
                if steps % N_ACT == 0:
                    infer_ms.append(1000 * (time.perf_counter() - t0))
            o = w.step(np.asarray(act).reshape(-1)).obs
            steps += 1
        results.append({"episode": ep, "seed": seed, "policy_seed": seed, "success": bool(w.success), "steps": steps,
                        "success_step": w.success_step, "return": w.ret})
        print(f"episode {ep} seed {seed}: success={w.success} steps={steps}", flush=True)
    k = sum(r["success"] for r in results)
    s = {"task": a.task, "level": a.level, "bundle": a.policy, "steps_k": 20, "max_steps": a.max_steps,
         "episodes": len(results),
         "successes": k, "success_rate": k / max(1, len(results)), "trips": {}, "results": results,
         "implementation": "lerobot==0.4.4 DiffusionPolicy (DDIM 20), no runtime",
         "inference_p50_ms": float(np.median(infer_ms)) if infer_ms else None,
         "inference_p90_ms": float(np.quantile(infer_ms, 0.9)) if infer_ms else None}
    print(f"task {a.task} level {a.level}: success {k}/{len(results)}")
    if a.json:
        Path(a.json).write_text(json.dumps(s, indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=2000)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=1)
    t.set_defaults(func=train)
    e = sub.add_parser("eval")
    e.add_argument("--policy", required=True)
    e.add_argument("--task", required=True)
    e.add_argument("--level", default="0")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--seed", type=int, default=1000)
    e.add_argument("--max-steps", type=int, default=500)
    e.add_argument("--threads", type=int, default=1)
    e.add_argument("--json", default="")
    e.set_defaults(func=evaluate)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
