"""Benchmark: bridge step + render time per control tick.

    python -m sim.bench [--task button-press] [--camera-size 96x96] [--ticks 300] [--no-modbus]

1. in-process: Meta-World step, offscreen render, JPEG encode (what the bridge
   does per command), per tick, and apart the first render at the size (the
   renderer made: the bridge makes a display view's at reset, docs/sim.md);
2. end to end through a bridge subprocess in lockstep: Modbus command write
   (which returns after step + render) + one read of all input registers, as
   the runtime does per tick.
Target: step + render <= 10 ms at 96x96.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from .bridge import camera_size_arg, parse_size  # noqa: E402
from .world import World, expert_policy  # noqa: E402


def _stats(xs) -> dict:
    a = np.asarray(xs) * 1000
    return {"mean_ms": round(float(a.mean()), 3), "median_ms": round(float(np.median(a)), 3),
            "p95_ms": round(float(np.percentile(a, 95)), 3)}


def bench_inprocess(task: str, size: tuple[int, int], ticks: int) -> dict:
    w = World(task, camera_size=size)
    pol = expert_policy(task)
    obs = w.reset(seed=0)
    t0 = time.perf_counter()
    w.render()  # renderer creation is not part of a tick: timed apart, as first_render
    first = time.perf_counter() - t0
    step, render, enc, tick, cpu_step, cpu_render = [], [], [], [], [], []
    for i in range(ticks):
        a = pol.get_action(obs)
        c0 = time.thread_time()
        t0 = time.perf_counter()
        r = w.step(a)
        t1 = time.perf_counter()
        c1 = time.thread_time()
        img = w.render()
        t2 = time.perf_counter()
        c2 = time.thread_time()
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        t3 = time.perf_counter()
        cpu_step.append(c1 - c0)
        cpu_render.append(c2 - c1)
        step.append(t1 - t0)
        render.append(t2 - t1)
        enc.append(t3 - t2)
        tick.append(t3 - t0)
        obs = r.obs
        if r.success or r.truncated:
            obs = w.reset(seed=i + 1)
    w.close()
    return {"first_render_ms (the renderer made: what a new view size costs once)": round(first * 1000, 1),
            "step": _stats(step), "render": _stats(render), "jpeg": _stats(enc),
            "step+render": _stats(np.add(step, render)), "tick": _stats(tick),
            "cpu_time (this thread; LP_NUM_THREADS=0 renders here)": {
                "step": _stats(cpu_step), "render": _stats(cpu_render),
                "step+render": _stats(np.add(cpu_step, cpu_render))}}


def bench_modbus(task: str, size: str | None, ticks: int) -> dict:
    from .client import BridgeProcess, http_json

    with BridgeProcess(task, camera_size=size, extra=["--heartbeat-timeout", "10"]) as b:
        arm = b.arm()
        arm.enable(True)
        pol = expert_policy(task)
        http_json(b.http, "/episode/reset", {"seed": 0})
        st = arm.state()
        wr, rd = [], []
        seed = 0
        for _ in range(ticks):
            a = pol.get_action(st.observation.astype(np.float64))
            t0 = time.perf_counter()
            arm.command(a)
            t1 = time.perf_counter()
            st = arm.state()
            t2 = time.perf_counter()
            wr.append(t1 - t0)
            rd.append(t2 - t1)
            if st.status & 0x0006:
                seed += 1
                http_json(b.http, "/episode/reset", {"seed": seed})
                st = arm.state()
        ep = http_json(b.http, "/episode")
        arm.close()
    return {"command_write (step+render inside)": _stats(wr), "state_read": _stats(rd),
            "tick": _stats(np.add(wr, rd)),
            "bridge_reported": {k: round(ep[k], 3) for k in ("tick_ms", "step_ms", "render_ms", "encode_ms")}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.bench")
    p.add_argument("--task", default="button-press")
    p.add_argument("--camera-size", default="96x96", type=camera_size_arg, help="WxH of the rendered camera")
    p.add_argument("--ticks", type=int, default=300)
    p.add_argument("--no-modbus", action="store_true")
    a = p.parse_args(argv)
    w, h = parse_size(a.camera_size)
    res = {"task": a.task, "camera": a.camera_size, "ticks": a.ticks,
           "MUJOCO_GL": os.environ.get("MUJOCO_GL"), "cpus": os.cpu_count(),
           "loadavg": [round(x, 2) for x in os.getloadavg()]}
    res["in_process"] = bench_inprocess(a.task, (w, h), a.ticks)
    if not a.no_modbus:
        res["through_modbus"] = bench_modbus(a.task, a.camera_size, a.ticks)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
