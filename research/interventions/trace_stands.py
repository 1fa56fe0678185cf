"""Wall stands of the scripted expert, or of a bundle straight on the simulator: each scene run once,
its physics traced each step in the bridge trace's form (cut to what ``stands`` reads), then counted.

    PYTHONPATH=.:training .venv/bin/python -m research.interventions.trace_stands --task bin-picking \
        (--expert | --bundle B [--max-late 1]) --seeds 0:25 --out TRACE.jsonl.gz [--json SUMMARY.json]

Prints one line per scene with a wall stand, then the count; ``--json`` keeps per scene the success,
its step count, the longest stand and the object's start (x, y). ``--action-horizon N`` runs N
actions of each plan instead of the bundle's T_a. The table of such summaries:

    .venv/bin/python -m research.interventions.trace_stands --table SUMMARY.json[.gz] ...
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from energyflow.stats import wilson
from research.interventions.stands import longest_stand, on_bin


def trace_line(seed: int, step: int, physics: dict) -> dict:
    """One trace line as the bridge writes it, cut as the README's ``jq`` cut does: the object on the
    first two steps only, and only the claw and pad contacts."""
    r = {"seed": seed, "episode_step": step, "hand": [round(v, 5) for v in physics["hand"]],
         "target": [round(v, 5) for v in physics["target"]],
         "contacts": [c for c in physics["contacts"] if "claw" in c or "pad" in c]}
    if step <= 1:
        r["object"] = [round(v, 5) for v in physics["object"]]
    return r


def expert_episode(world, policy, seed: int, level: str, max_steps: int,
                   on_step: Callable[[], None]) -> Dict:
    """One episode of Meta-World's scripted expert on ``world``; ``on_step()`` after the reset and
    every step."""
    obs = world.reset(level=level, seed=seed)
    on_step()
    steps = 0
    while steps < max_steps and not world.success:
        obs = world.step(policy.get_action(obs)).obs
        steps += 1
        on_step()
    return {"seed": seed, "success": bool(world.success), "steps": steps}


def run(task: str, seeds: range, out: Path, bundle: Optional[str] = None, max_late: int = 0,
        level: str = "0", max_steps: int = 500, steps: Optional[int] = None,
        action_horizon: Optional[int] = None) -> Tuple[List[Dict], Optional[int]]:
    """Runs each scene once (the expert when ``bundle`` is None), writes the cut trace to ``out``
    (gzip when it ends in .gz) and returns per scene: seed, success, steps, stand, object; and the
    actions each plan ran (``action_horizon``, else the bundle's T_a; None for the expert)."""
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from sim.world import World, expert_policy
    world = World(task, camera_size=None)
    planner = None
    if bundle is not None:
        from energyflow.rollout import load_planner, rollout
        planner = load_planner(bundle, steps=steps)
        if action_horizon is not None:
            planner.manifest["action_horizon"] = action_horizon
    results: List[Dict] = []
    opener = gzip.open if out.suffix == ".gz" else open
    with opener(out, "wt") as f:
        for seed in seeds:
            lines: List[dict] = []

            def on_step(*_: object) -> None:
                lines.append(trace_line(seed, world.step_count, world.physics()))

            if planner is None:
                r = expert_episode(world, expert_policy(task), seed, level, max_steps, on_step)
            else:
                r = rollout(planner, world, seed, level=level, max_steps=max_steps, max_late=max_late,
                            on_step=on_step)
            for ln in lines:
                f.write(json.dumps(ln) + "\n")
            obj = lines[0]["object"]
            results.append({"seed": seed, "success": bool(r["success"]), "steps": int(r["steps"]),
                            "stand": longest_stand(lines), "object": [round(obj[0], 4), round(obj[1], 4)],
                            "bin_contact_steps": sum(on_bin(ln["contacts"]) for ln in lines)})
    world.close()
    return results, None if planner is None else planner.action_horizon


def table_row(summary: dict) -> str:
    """One ``--json`` summary as a Markdown row: who drove, T_a, lateness, scenes, success with its
    Wilson 95 % interval, scenes with a wall stand and with any claw or pad on a bin."""
    res = summary["results"]
    n, ok = len(res), sum(r["success"] for r in res)
    lo, hi = wilson(ok, n)
    seeds = [r["seed"] for r in res]
    who = "scripted expert" if summary["who"] == "expert" else Path(summary["who"]).name
    ta = "–" if summary["who"] == "expert" else str(summary["action_horizon"])
    late = "–" if summary["who"] == "expert" else f"0–{summary['max_late']}"
    return (f"| {who} | {ta} | {late} | {min(seeds)}–{max(seeds)} | {ok}/{n} [{lo * 100:.0f}–{hi * 100:.0f} %] "
            f"| {sum(1 for r in res if r['stand'])} | {sum(1 for r in res if r['bin_contact_steps'])} |")


def table(paths: List[Path]) -> str:
    """The Markdown table of ``--json`` summaries (plain or gzipped), one row each."""
    head = ("| who drives | T_a | plans late (steps) | scenes | success [Wilson 95 %] | wall stands "
            "| claw or pad on a bin |\n|---|---|---|---|---|---|---|")
    rows = []
    for p in paths:
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt") as f:
            rows.append(table_row(json.load(f)))
    return "\n".join([head] + rows)


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--table"]:
        print(table([Path(x) for x in argv[1:]]))
        return
    p = argparse.ArgumentParser(prog="python -m research.interventions.trace_stands")
    p.add_argument("--task", default="bin-picking")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--expert", action="store_true", help="Meta-World's scripted expert")
    who.add_argument("--bundle", help="a bundle, through its reference sampler on ONNX Runtime")
    p.add_argument("--max-late", type=int, default=0, help="plans land 0..N steps late (a bundle only)")
    p.add_argument("--steps", type=int, help="sampler steps K (the bundle's by default)")
    p.add_argument("--action-horizon", type=int, help="actions run per plan (the bundle's by default)")
    p.add_argument("--seeds", required=True, help="A:B, scenes A..B-1")
    p.add_argument("--level", default="0")
    p.add_argument("--out", required=True, type=Path, help="the cut trace (.jsonl or .jsonl.gz)")
    p.add_argument("--json", type=Path, help="per-scene summary")
    a = p.parse_args(argv)
    lo, hi = (int(v) for v in a.seeds.split(":"))
    res, horizon = run(a.task, range(lo, hi), a.out, a.bundle, a.max_late, a.level, steps=a.steps,
                       action_horizon=a.action_horizon)
    for r in res:
        if r["stand"]:
            print(f"scene {r['seed']}: stand {r['stand']} steps, object x {r['object'][0]:.3f} y {r['object'][1]:.3f}, "
                  f"{'success' if r['success'] else 'failed'} at step {r['steps']}")
    ok = sum(r["success"] for r in res)
    print(f"{'expert' if a.expert else a.bundle}: {len(res)} scenes, {ok} succeeded, "
          f"{sum(1 for r in res if r['stand'])} with a wall stand, "
          f"{sum(1 for r in res if r['bin_contact_steps'])} with a claw or pad on a bin")
    if a.json:
        opener = gzip.open if a.json.suffix == ".gz" else open
        with opener(a.json, "wt") as f:
            json.dump({"task": a.task, "who": "expert" if a.expert else a.bundle, "max_late": a.max_late,
                       "action_horizon": horizon, "steps": a.steps, "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
