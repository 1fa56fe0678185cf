#!/usr/bin/env bash
# Regenerates the shipped default bundles in bundles/ from scratch: scripted
# Meta-World demonstrations through the bridge, training (Algorithm 1),
# export with the self-check, and calibration on held-out demos.
#
#   scripts/train-defaults.sh [TASK ...]      (default: button-press)
#
# Seeds are fixed; on a 2-core CPU one task takes about 25 minutes. Training
# uses one torch thread: with two OpenMP threads on a busy 2-core machine a
# step was measured 18× slower (6.8 s vs 0.38 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press)
py=.venv/bin/python
mkdir -p build/demos build/runs bundles
for task in "${tasks[@]}"; do
  demos=build/demos/$task.hdf5
  [ -f "$demos" ] || $py -m sim.record --task "$task" --episodes 100 --seed 0 --out "$demos" --no-progress
  run=build/runs/$task
  rm -rf "$run"
  (cd training && ../$py -m energyflow train --data "../$demos" --out "../$run" --name "metaworld-$task" \
      --down-dims 16 32 64 --state-hidden 64 --head-dims 64 32 --batch-size 64 --lr 5e-4 \
      --warmup-steps 100 --steps 3000 --ckpt-every 250 --val-every 250 --seed 0 --threads 1 --no-progress)
  rm -rf "bundles/metaworld-$task"
  cp -r "$run/bundle" "bundles/metaworld-$task"
  (cd training && ../$py -m energyflow calibrate --bundle "../bundles/metaworld-$task" --data "../$demos" \
      --n-windows 512 --seed 0 --split-seed 0)
  ./bin/energyflow bundle verify "bundles/metaworld-$task" 2>/dev/null || go run ./cmd/energyflow bundle verify "bundles/metaworld-$task"
done
