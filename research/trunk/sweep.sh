#!/usr/bin/env bash
# Issue 51 item 4, the trunk: is the shipped U-Net (down dims 32/64/128) more than a task
# needs? Trains the task's EnergyFlow state policy at each WIDTH with the shipped recipe
# (scripts/train-defaults.sh: denoiser head, 12000 steps, seed 0, one torch thread; plain
# denoising score matching, so only tasks whose shipped bundle is not distilled compare
# like with like: Assembly), gives it the shipped bundle's sampler block (K, warm start) and
# held-out calibration, and runs it through the runtime with the stop observing (the policy
# alone) at level 0 (50 episodes, seeds 1000-1049) and S/M/L (20, seeds 1000-1019), 20 Hz,
# the 500-step limit. The shipped bundle runs the same cells as the reference. Then
# `energyflow bench --planner` times every trunk (1 ORT thread, 40 samples) in --rounds rounds;
# `--levels ""` times them alone, on trunks already trained.
#
#   research/trunk/sweep.sh [--task assembly] [--levels "0 S M L"] [--rounds 3] WIDTH...
#       WIDTH: "16,32,64" (comma-separated down dims) or shipped
#
# Runs go to build/trunk/TASK-wA-B-C (the bundle in bundle/); results to
# research/trunk/results/TASK-{wA-B-C,shipped}-{L0,S,M,L}.json and -bench.rN.json, which
# `python -m research.trunk.table research/trunk/results/*.json` prints. A trained width is
# kept and reused; a result file already there is kept (delete it to measure again).
set -euo pipefail
cd "$(dirname "$0")/../.."
task=assembly; levels="0 S M L"; rounds=3; bundles=()
while [ $# -gt 0 ]; do
  case "$1" in
    --task) task=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "sweep.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: research/trunk/sweep.sh [--task T] [--levels \"0 S M L\"] [--rounds N] WIDTH... (e.g. 16,32,64 shipped)" >&2; exit 2; }
for w in "$@"; do
  [ "$w" = shipped ] || [[ "$w" =~ ^[0-9]+(,[0-9]+)*$ ]] \
    || { echo "sweep.sh: width $w: want comma-separated down dims (16,32,64) or shipped" >&2; exit 2; }
done
py=.venv/bin/python
shipped=bundles/metaworld-$task
[ -f "$shipped/manifest.json" ] || { echo "sweep.sh: no shipped bundle $shipped" >&2; exit 2; }
out=research/trunk/results; mkdir -p "$out" build/demos
demos=build/demos/$task.hdf5
[ -f "$demos" ] || $py -m sim.record --task "$task" --episodes 200 --seed 0 --out "$demos" --no-progress
log=$(mktemp); trap 'rm -f "$log"' EXIT
for w in "$@"; do
  if [ "$w" = shipped ]; then
    tag=shipped; bundle=$shipped
  else
    tag=w${w//,/-}; run=build/trunk/$task-$tag; bundle=$run/bundle
    if [ ! -f "$bundle/manifest.json" ] || [ ! -f "$run/calibrated" ]; then
      rm -rf "$run"; mkdir -p "$run"
      echo "sweep.sh: training $task at down dims ${w//,/ } into $run" >&2
      (cd training && ../$py -m energyflow train --data "../$demos" --out "../$run" --name "metaworld-$task-$tag" \
          --down-dims ${w//,/ } --state-hidden 128 --head-dims 64 32 --batch-size 64 --lr 5e-4 \
          --warmup-steps 500 --steps "${STEPS:-12000}" --ckpt-every 2000 --val-every 2000 --seed 0 --threads 1 \
          --no-progress --energy-head denoiser --sigma-sampling lognormal --loss-weighting edm) > "$run/train.txt" 2>&1 \
        || { echo "sweep.sh: training failed:" >&2; tail -n 5 "$run/train.txt" >&2; exit 1; }
      # the shipped bundle's sampler block (K, warm start), so that only the trunk differs
      $py - "$shipped/manifest.json" "$bundle/manifest.json" <<'PY'
import json, sys
src = json.load(open(sys.argv[1]))
m = json.load(open(sys.argv[2]))
m["sampler"] = src["sampler"]
with open(sys.argv[2], "w") as f:
    json.dump(m, f, indent=1, ensure_ascii=False)
    f.write("\n")
PY
      (cd training && ../$py -m energyflow calibrate --bundle "../$bundle" --data "../$demos" \
          --n-windows 512 --seed 0 --split-seed 0 --no-png) > "$run/calibrate.txt" 2>&1 \
        || { echo "sweep.sh: calibration failed:" >&2; tail -n 5 "$run/calibrate.txt" >&2; exit 1; }
      touch "$run/calibrated"
    fi
  fi
  bundles+=("$tag=$bundle")
  for l in $levels; do
    n=20; name=$l; [ "$l" != 0 ] || { n=50; name=L0; }
    f=$out/$task-$tag-$name.json
    [ ! -f "$f" ] || continue
    # into a temporary name first: an interrupted run leaves no result to be kept
    ./bin/energyflow sim eval --bundle "$bundle" --task "$task" --level "$l" --episodes $n --seed 1000 --rate 20 \
        --observe-only --json "$f.part" > /dev/null 2> "$log" \
      || { echo "sweep.sh: level $l of $bundle failed:" >&2; tail -n 5 "$log" >&2; rm -f "$f.part"; exit 1; }
    mv "$f.part" "$f"
  done
done
# the planner's time, all trunks in one run: ROUNDS rounds, each timing every trunk in turn,
# so that the shared machine's drifting speed falls on all alike (the table takes medians)
for r in $(seq 1 "$rounds"); do
  for tb in "${bundles[@]}"; do
    tag=${tb%%=*}; bundle=${tb#*=}; b=$out/$task-$tag-bench.r$r.json
    ./bin/energyflow bench --bundle "$bundle" --planner --n 40 --json > "$b.part" 2> "$log" \
      || { echo "sweep.sh: bench of $bundle failed:" >&2; tail -n 5 "$log" >&2; rm -f "$b.part"; exit 1; }
    mv "$b.part" "$b"
  done
done
$py -m research.trunk.table "$out"/"$task"-*.json
