#!/usr/bin/env bash
# The energy-head comparison of research/notes/evaluation-log.md ("The energy head"): the
# pooled and the denoiser head (and optionally Diffusion Policy) trained on
# the identical recipe at several step budgets, each measured by the
# conditioning probe at held-out start states and by 20 direct rollouts on
# fresh scenes (seeds 1000-1019, 500 steps, no runtime). Prints the table.
#
#   research/rollouts/head-sweep.sh [TASK ...]            (default: button-press drawer-open)
#   HEADS="denoiser pooled diffusion" BUDGETS="2000 5000" research/rollouts/head-sweep.sh TASK
#   TABLE_ONLY=1 research/rollouts/head-sweep.sh          (the table of the runs already measured)
#
# Recipe: 200 demonstrations (build/demos/<task>.hdf5, recorded first if
# missing), U-Net 32/64/128, state MLP 128, batch 64, lr 5e-4, 500 warm-up
# steps, seed 0, one torch thread. pooled: --energy-prior gaussian
# --input-scale c_in --energy-scale edm, uniform t, sigma^2 weighting;
# denoiser: log-normal sigma, EDM weighting. Runs go to
# build/head-sweep/<task>-<head>-<steps>/ and are kept (delete one to redo
# it); a 2000-step run takes about 6 min, 5000 about 15 min on one core.
# Probe dims: 4+22+36, the task object's x in the current frame, the
# previous frame and the goal slot (they move together at a start state).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press drawer-open)
heads=${HEADS:-denoiser pooled}
budgets=${BUDGETS:-2000 5000}
py=$root/.venv/bin/python
out=build/head-sweep
mkdir -p "$out" build/demos
export OMP_NUM_THREADS=1
for task in "${tasks[@]}"; do
  [ "${TABLE_ONLY:-0}" = 1 ] && break
  demos=build/demos/$task.hdf5
  [ -f "$demos" ] || $py -m sim.record --task "$task" --episodes 200 --seed 0 --out "$demos" --no-progress
  for head in $heads; do
    case $head in
      denoiser) extra=(--energy-head denoiser --sigma-sampling lognormal --loss-weighting edm) ;;
      pooled) extra=(--energy-head pooled --energy-prior gaussian --input-scale c_in --energy-scale edm) ;;
      diffusion) extra=(--policy diffusion) ;;
      *) echo "head-sweep.sh: HEADS may hold denoiser, pooled, diffusion; got $head" >&2; exit 2 ;;
    esac
    for steps in $budgets; do
      run=$root/$out/$task-$head-$steps
      if [ ! -f "$run/bundle/manifest.json" ]; then
        echo "train  $task $head $steps steps"
        rm -rf "$run"
        (cd training && $py -m energyflow train --data "$root/$demos" --out "$run" --name "$task-$head-$steps" \
          --down-dims 32 64 128 --state-hidden 128 --batch-size 64 --lr 5e-4 --warmup-steps 500 --steps "$steps" \
          --ckpt-every 1000 --val-every 1000 --seed 0 --threads 1 --no-progress "${extra[@]}" > "$run.train.log" 2>&1)
      fi
      [ -f "$run/probe.json" ] || (cd training && $py -m energyflow probe --bundle "$run/bundle" --data "$root/$demos" \
        --dims 4+22+36 --threads 1 --json > "$run/probe.json")
      [ -f "$run/rollout.json" ] || $py -m energyflow.rollout "$run/bundle" --task "$task" --episodes 20 \
        --seed 1000 --max-steps 500 --json "$run/rollout.json" > "$run/rollout.log" 2>&1
    done
  done
done
$py - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
rows = []
for run in sorted(Path(sys.argv[1]).iterdir()):
    if not (run / "rollout.json").exists() or not (run / "probe.json").exists():
        continue
    probe = json.loads((run / "probe.json").read_text())["bundles"][0]["inputs"][0]
    ro = json.loads((run / "rollout.json").read_text())
    eps = ro.get("results") or ro.get("episodes") or []
    wins = [e for e in eps if e.get("success")]
    steps = [e.get("success_step", e.get("steps")) for e in wins]
    d = {round(x["sigma"], 3): x["slope_norm"] for x in probe["denoised"]}
    task, head, budget = run.name.rsplit("-", 2)
    rows.append((task, head, int(budget), probe["slope"][0], d, len(wins), len(eps),
                 statistics.median(steps) if steps else None))
print("| task | head | steps | action x per metre of object x | D slope (norm) at σ = 7 / 2 / 0.5 / 0.1 | direct rollouts | steps to success (median) |")
print("|---|---|---|---|---|---|---|")
for task, head, budget, slope, d, k, n, med in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
    ds = " / ".join(f"{d.get(s, float('nan')):.2f}" for s in (7.0, 2.0, 0.5, 0.1))
    print(f"| {task} | {head} | {budget} | {slope:+.2f} | {ds} | {k}/{n} | {med if med is not None else '–'} |")
PY
