"""Record scripted-expert demonstrations through the bridge (robomimic-style HDF5).

    python -m sim.record --task button-press --episodes 100 --out build/demos/button-press.hdf5 \
        [--camera] [--camera-size 96x96] [--seed 0] [--level 0]

The bridge runs as a subprocess (lockstep); the recorder is a Modbus client
like the runtime: it reads the observation registers, computes Meta-World's
scripted action, writes action + heartbeat, and (with --camera) takes the
frame of each observation from the MJPEG stream (/stream, matched by X-Step).  Episodes are reset over the
harness API with seeds seed, seed+1, ...; only successful episodes are kept,
until --episodes are kept or --max-attempts are spent.

Layout (obs_t and the action taken at obs_t, L samples per demo):

    data                       attrs: env (task), env_name, total, num_demos, attempts,
                                      success_rate, level, seed, camera, env_args (JSON), ...
    data/demo_<i>/obs/state    (L, 39) float32
    data/demo_<i>/obs/proprio  (L, 4) float32: state[:, :4], the arm's own state (hand xyz,
                               gripper opening) = what robot.state [position, gripper] reads
    data/demo_<i>/obs/camera   (L, H, W, 3) uint8, with --camera
    data/demo_<i>/obs/camera_jpeg   (L,) the same frames' JPEG bytes as streamed (vlen uint8)
    data/demo_<i>/actions      (L, 4) float32 in [-1, 1]
    data/demo_<i>/dones        (L,) uint8, 1 on the last sample
    data/demo_<i>              attrs: num_samples, success, seed, success_step, return
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

from .bridge import ST_SUCCESS, ST_TRUNCATED, camera_size_arg
from .client import BridgeProcess, MJPEGReader, http_json
from .world import TASKS, expert_policy, normalize_task


#: width of obs/proprio: hand xyz + gripper opening, observation[0:4]
PROPRIO_DIM = 4


def add_proprio(path: str | Path) -> int:
    """Add obs/proprio to every demo of a file recorded before it existed; returns demos changed."""
    n = 0
    with h5py.File(path, "a") as f:
        for g in f["data"].values():
            if "proprio" not in g["obs"]:
                g["obs"].create_dataset("proprio", data=g["obs/state"][:, :PROPRIO_DIM])
                n += 1
    return n


def record_episode(arm, base: str, task: str, level: str, seed: int, policy, camera,
                   extra_steps: int, max_steps: int | None):
    """camera: an MJPEGReader on the bridge's /stream, or None."""
    ep = http_json(base, "/episode/reset", {"task": task, "level": level, "seed": seed})
    seq0 = ep["frame_seq"]
    limit = min(max_steps or ep["max_steps"], ep["max_steps"])
    arm.enable(True)
    st = arm.state()
    states, actions, frames, jpegs = [], [], [], []
    success_step = None
    for t in range(limit):
        obs = st.observation
        if camera is not None:
            jpeg, _ = camera.frame_jpeg(seq0, t)  # the frame rendered with this observation
            jpegs.append(np.frombuffer(jpeg, np.uint8))
            frames.append(np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")))
        a = np.clip(np.asarray(policy.get_action(obs.astype(np.float64)), dtype=np.float32), -1, 1)
        states.append(obs.astype(np.float32))
        actions.append(a)
        arm.command(a)
        st = arm.state()
        if st.fault:
            return None  # heartbeat lapse or unstable physics: drop the episode
        if st.status & ST_SUCCESS and success_step is None:
            success_step = t + 1
        if success_step is not None and t + 1 >= success_step + extra_steps:
            break
        if st.status & ST_TRUNCATED:
            break
    info = http_json(base, "/episode")
    return {
        "state": np.stack(states), "actions": np.stack(actions),
        "camera": np.stack(frames) if camera is not None else None,
        "camera_jpeg": jpegs if camera is not None else None,
        "success": success_step is not None, "success_step": success_step, "return": info["return"],
    }


def record(task: str, episodes: int, out: str | Path, camera: bool = False, camera_size: str = "96x96",
           seed: int = 0, level: str = "0", extra_steps: int = 10, max_attempts: int | None = None,
           max_steps: int | None = None, progress: bool = True, bridge=None,
           camera_name: str | None = None) -> dict:
    """Record demonstrations; bridge: a running :class:`sim.client.BridgeProcess` to use
    (its camera size and name apply), else one is started for the recording.
    camera_name: the MuJoCo camera (default the bridge's, corner2); written in the file."""
    from tqdm import tqdm

    task = normalize_task(task)
    max_attempts = max_attempts or 2 * episodes + 10
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy = expert_policy(task)
    kept = attempts = total = 0
    lengths = []
    t0 = time.time()
    own = bridge is None
    br = bridge or BridgeProcess(task, camera_size=camera_size if camera else None, seed=seed, level=level,
                                 extra=["--heartbeat-timeout", "10"], camera_name=camera_name)
    if camera and not br.info.get("camera"):
        raise ValueError("--camera needs a bridge with a camera")
    if camera:
        camera_size = "x".join(str(x) for x in br.info["camera"])
        camera_name = br.info.get("camera_name") or camera_name
    with contextlib.ExitStack() as stack, h5py.File(out, "w") as f:
        if own:
            stack.callback(br.close)
        arm = br.arm()
        stream = MJPEGReader(br.http) if camera else None
        if stream is not None:
            stack.callback(stream.close)
        data = f.create_group("data")
        bar = tqdm(total=episodes, desc=f"{task} demos", unit="demo", disable=not progress, file=sys.stderr)
        try:
            while kept < episodes and attempts < max_attempts:
                s = seed + attempts
                attempts += 1
                ep = record_episode(arm, br.http, task, level, s, policy, stream, extra_steps, max_steps)
                if ep is None or not ep["success"]:
                    bar.set_postfix(success_rate=f"{kept / attempts:.2f}")
                    continue
                g = data.create_group(f"demo_{kept}")
                L = len(ep["actions"])
                og = g.create_group("obs")
                og.create_dataset("state", data=ep["state"])
                og.create_dataset("proprio", data=ep["state"][:, :PROPRIO_DIM])
                if camera:
                    og.create_dataset("camera", data=ep["camera"], chunks=(1,) + ep["camera"].shape[1:],
                                      compression="gzip", compression_opts=4)
                    # the frames as the camera sent them: a palette decodes them as the runtime does
                    jp = og.create_dataset("camera_jpeg", (L,), dtype=h5py.vlen_dtype(np.uint8))
                    for i, b in enumerate(ep["camera_jpeg"]):
                        jp[i] = b
                g.create_dataset("actions", data=ep["actions"])
                dones = np.zeros(L, np.uint8)
                dones[-1] = 1
                g.create_dataset("dones", data=dones)
                g.attrs["num_samples"] = L
                g.attrs["success"] = True
                g.attrs["seed"] = s
                g.attrs["success_step"] = ep["success_step"]
                g.attrs["return"] = ep["return"]
                kept += 1
                total += L
                lengths.append(L)
                bar.update(1)
                bar.set_postfix(success_rate=f"{kept / attempts:.2f}")
        finally:
            bar.close()
            arm.close()
        env_name = TASKS[task][0]
        data.attrs["env"] = task
        data.attrs["env_name"] = env_name
        data.attrs["total"] = total
        data.attrs["num_demos"] = kept
        data.attrs["attempts"] = attempts
        data.attrs["success_rate"] = kept / max(attempts, 1)
        data.attrs["level"] = level
        data.attrs["seed"] = seed
        data.attrs["camera"] = camera_size if camera else ""
        data.attrs["camera_name"] = camera_name if camera else ""
        data.attrs["obs_keys"] = json.dumps(["state", "proprio", "camera"] if camera else ["state", "proprio"])
        data.attrs["env_args"] = json.dumps({
            "env_name": env_name, "type": "metaworld", "source": "sim.bridge (Modbus + MJPEG)",
            "env_kwargs": {"task": task, "level": level, "goal_observable": True,
                           "camera": br.info.get("camera"),
                           "camera_name": camera_name if camera else None},
        })
    summary = {"task": task, "out": str(out), "kept": kept, "attempts": attempts,
               "success_rate": kept / max(attempts, 1), "samples": total,
               "mean_length": float(np.mean(lengths)) if lengths else 0.0, "seconds": time.time() - t0}
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.record", description="record scripted demonstrations through the bridge")
    p.add_argument("--task", default="button-press", help=f"one of {', '.join(TASKS)}")
    p.add_argument("--episodes", type=int, default=50, help="successful demonstrations to keep")
    p.add_argument("--out", required=True)
    p.add_argument("--camera", action="store_true", help="also record camera frames (obs/camera)")
    p.add_argument("--camera-size", default="96x96", type=camera_size_arg, help="WxH of the rendered camera")
    p.add_argument("--camera-name", default=None,
                   help="MuJoCo camera to record (corner2 by default; topview, corner4, ...)")
    p.add_argument("--seed", type=int, default=0, help="first episode seed (episode i uses seed+i)")
    p.add_argument("--level", default="0")
    p.add_argument("--extra-steps", type=int, default=10, help="steps kept after the first success")
    p.add_argument("--max-attempts", type=int, default=None, help="default 2*episodes+10")
    p.add_argument("--max-steps", type=int, default=None, help="per-episode step limit (default Meta-World's 500)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    s = record(a.task, a.episodes, a.out, a.camera, a.camera_size, a.seed, a.level, a.extra_steps,
               a.max_attempts, a.max_steps, progress=not a.no_progress, camera_name=a.camera_name)
    print(json.dumps(s), flush=True)
    print(f"{s['task']}: kept {s['kept']} of {s['attempts']} episodes, success rate {100 * s['success_rate']:.1f}%",
          file=sys.stderr)
    return 0 if s["kept"] == a.episodes else 1


if __name__ == "__main__":
    sys.exit(main())
