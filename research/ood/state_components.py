"""Which component of the state score fires, along direct closed-loop rollouts.

    OMP_NUM_THREADS=1 .venv/bin/python -m research.ood.state_components --bundle bundles/metaworld-hammer \
        --task hammer [--episodes 30] [--seed 51000] [--fault zero_state] [--fault-step 40] [--json FILE]

The bundle's policy drives Meta-World in-process (``energyflow.rollout``:
the reference sampler, the bundle's K, no runtime, no latency, no stop),
and after every environment step the state term reads the newest
observation history exactly as the runtime does each tick. The exported
``state_energy.onnx`` is run with one extra output, the row of z-scores the
graph takes the max of (g at each σ, then each extra component in the
manifest's ``components`` order), so the reading is the shipped graph's own
and the script checks that the row's max equals ``state_energy``.

Printed per task: episodes succeeded; per component (g = max over σ,
``transition``, ``rnd``) the median and max over episodes of each episode's
largest z, split by success; the episodes whose watched statistic (the
2nd largest of any 5 consecutive ticks: the gate's 2-of-5 rule) reaches
the bundle's default threshold (its closed-loop ``q`` when calibrated for
state_energy, else the block's held-out q99.9). With ``--fault``
(``sim.world.FAULTS``, injected at ``--fault-step``; episodes end
``--after`` steps after it) also each component's median reading over the
10 ticks after the onset, and the ticks from the onset to the 2-of-5 trip.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402

N_OF_M = (2, 5)


def components_session(bundle: Path, man: Dict):
    """An ONNX Runtime session of state_energy.onnx with the z row as a second output,
    and the column names of that row."""
    import onnx
    import onnxruntime as ort

    blk = man.get("state_energy")
    if not blk:
        raise SystemExit(f"state_components: {bundle} has no state term (no state_energy block in the manifest)")
    m = onnx.load(str(bundle / blk["graph"]))
    producer = {o: n for n in m.graph.node for o in n.output}
    chain, name = [], blk["output"]
    for _ in range(3):  # state_energy <- Reshape <- MaxPool <- Reshape(z row)
        n = producer.get(name)
        chain.append(n.op_type if n is not None else None)
        if n is None:
            break
        name = n.input[0]
    if chain != ["Reshape", "MaxPool", "Reshape"]:
        raise SystemExit(f"state_components: {blk['graph']}: not the toolkit's max-z reading "
                         f"(want Reshape <- MaxPool <- Reshape before {blk['output']}, found {chain})")
    zname = name
    m.graph.output.append(onnx.helper.make_tensor_value_info(zname, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = ["g"] * len(blk["sigmas"]) + list(blk.get("components", ["g"]))[1:]
    return sess, blk["output"], zname, names


def threshold(man: Dict) -> Tuple[float, str]:
    """The gate's default state_energy threshold for the 2-of-5 rule (docs/safety.md), as
    research/stop/false_trips.py reads it: the closed-loop calibration's when it is for state_energy
    (its threshold is in the score's units), else the block's held-out q99.9. A time-varying
    closed loop (several bands) is refused: one threshold is compared with every tick here."""
    from research.stop import false_trips

    cl = (man.get("calibration") or {}).get("closed_loop") or {}
    if cl.get("score") == "state_energy" and len(cl.get("bands") or []) > 1:
        raise SystemExit(f"state_components: a closed-loop calibration of {len(cl['bands'])} bands is not read here")
    return false_trips.default_threshold(man)


def watched(x: np.ndarray, n: int = N_OF_M[0], m: int = N_OF_M[1]) -> np.ndarray:
    """Per tick, the n-th largest of the last m scores (the n-of-m rule trips when it is over)."""
    out = np.full(len(x), -np.inf)
    for i in range(len(x)):
        w = np.sort(x[max(0, i - m + 1):i + 1])
        if len(w) >= n:
            out[i] = w[-n]
    return out


def episode(planner, world, sess, out_name: str, z_name: str, seed: int, fault, fault_step: int,
            after: int, max_steps: int) -> Dict:
    """One closed-loop episode; the z row after every step (and at the reset)."""
    from sim.world import Fault

    To, Ta = planner.obs_horizon, planner.action_horizon
    o = world.reset(level="0", seed=seed, fault=Fault(fault, fault_step) if fault else None)
    hist = [o] * To
    rng = np.random.default_rng(seed)
    rows: List[np.ndarray] = []

    def score() -> None:
        se, z = sess.run([out_name, z_name], {"cond": planner.cond(hist[-To:])})
        z = np.asarray(z, np.float64).reshape(-1)
        if abs(z.max() - float(se[0])) > 1e-3 * max(1.0, abs(float(se[0]))):
            raise SystemExit(f"state_components: the z row's max {z.max()} is not state_energy {se[0]}")
        rows.append(z)

    stop = max_steps if not fault else min(max_steps, fault_step + after)
    score()
    steps = 0
    while steps < stop and not world.success:
        noise = rng.standard_normal((1,) + planner.noise_shape).astype(np.float32)
        acts = planner.plan(planner.cond(hist[-To:]), noise)
        for a in acts[0, To - 1:To - 1 + Ta]:
            hist.append(world.step(a).obs)
            steps += 1
            score()
            if world.success or steps >= stop:
                break
        hist = hist[-To:]
    return {"seed": seed, "success": bool(world.success), "steps": steps, "z": np.stack(rows)}


def per_component(z: np.ndarray, names: List[str]) -> Dict[str, np.ndarray]:
    """[ticks, columns] -> {component: [ticks]} (g: the max over its σ columns)."""
    out: Dict[str, np.ndarray] = {}
    for c in dict.fromkeys(names):
        out[c] = z[:, [i for i, n in enumerate(names) if n == c]].max(axis=1)
    return out


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=51000)
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--fault", default="", help="a sim.world fault injected in every episode (zero_state, push, object)")
    p.add_argument("--fault-step", type=int, default=40)
    p.add_argument("--after", type=int, default=40, help="steps run after the fault's onset")
    p.add_argument("--json", default="")
    a = p.parse_args(argv)

    from energyflow.bundle import read_manifest
    from energyflow.rollout import load_planner
    from sim.world import World

    bundle = Path(a.bundle)
    man = read_manifest(bundle)
    sess, out_name, z_name, names = components_session(bundle, man)
    thr, src = threshold(man)
    planner = load_planner(bundle)
    world = World(a.task, camera_size=None)
    eps = []
    for i in range(a.episodes):
        e = episode(planner, world, sess, out_name, z_name, a.seed + i, a.fault, a.fault_step, a.after, a.max_steps)
        comp = per_component(e["z"], names)
        se = e["z"].max(axis=1)
        w = watched(se)
        trip = np.flatnonzero(w > thr)
        e.update(components={c: v.tolist() for c, v in comp.items()}, state_energy=se.tolist(),
                 first_trip=int(trip[0]) if len(trip) else None)
        eps.append(e)
        print(f"episode {i} seed {e['seed']}: success={e['success']} steps={e['steps']} "
              + " ".join(f"max {c} {v.max():.1f}" for c, v in comp.items())
              + f" 2-of-5 max {w.max():.1f}" + (f" trips at tick {e['first_trip']}" if len(trip) else ""), flush=True)

    comps = list(dict.fromkeys(names))
    print(f"\n{a.task}{' fault ' + a.fault + ' at step ' + str(a.fault_step) if a.fault else ' level 0'}: "
          f"success {sum(e['success'] for e in eps)}/{len(eps)}; threshold {thr:.4g} ({src}, 2 of 5)")
    print("| episodes | n | " + " | ".join(f"{c}: largest z, median / max" for c in comps) + " | reach the threshold |")
    print("|---|---|" + "---|" * len(comps) + "---|")
    for label, sel in (("succeeded", [e for e in eps if e["success"]]), ("failed", [e for e in eps if not e["success"]])):
        if not sel:
            continue
        cells = []
        for c in comps:
            mx = np.array([max(e["components"][c]) for e in sel])
            cells.append(f"{np.median(mx):.1f} / {mx.max():.1f}")
        print(f"| {label} | {len(sel)} | " + " | ".join(cells) + f" | {sum(e['first_trip'] is not None for e in sel)} |")
    if a.fault:
        k = a.fault_step  # row k is the reading after step k, the first with the fault applied
        print(f"\nafter the onset (ticks {k}..{k + 9}), median over episodes of each component's median reading:")
        for c in comps:
            med = np.median([np.median(e["components"][c][k:k + 10]) for e in eps])
            onset = np.median([e["components"][c][k] for e in eps])
            print(f"  {c}: onset tick {onset:.1f}, ticks 1-9 after {med:.1f}")
        delays = [e["first_trip"] - k for e in eps if e["first_trip"] is not None and e["first_trip"] >= k]
        print(f"  2-of-5 trip at {thr:.4g}: {len(delays)}/{len(eps)} episodes, ticks after the onset "
              f"{sorted(delays) if delays else '-'}")
    if a.json:
        for e in eps:
            e["z"] = e["z"].tolist()
        Path(a.json).write_text(json.dumps({"task": a.task, "bundle": str(bundle), "fault": a.fault or None,
                                            "threshold": thr, "threshold_source": src, "columns": names,
                                            "episodes": eps}))


if __name__ == "__main__":
    main()
