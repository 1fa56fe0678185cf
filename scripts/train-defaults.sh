#!/usr/bin/env bash
# Regenerates the shipped default bundles in bundles/ from scratch: scripted
# Meta-World demonstrations through the bridge, training (Algorithm 1),
# export with the self-check, and calibration on held-out demos.
#
#   scripts/train-defaults.sh [TASK ...]      (default: button-press)
#   POLICY=diffusion scripts/train-defaults.sh TASK ...   (Diffusion Policy baseline,
#                                              bundles/metaworld-<task>-dp)
#
# Demonstrations: 100 scripted episodes for button-press, 50 for the other
# tasks (seed 0). EnergyFlow uses the Gaussian energy prior with EDM input and
# output scaling (docs/evaluation.md says why: without them the score
# vanishes at sigma_max and sampling never leaves the initial noise).
# Seeds are fixed; on an idle 2-core CPU one task takes about 10 minutes. Training
# uses one torch thread: with two OpenMP threads on a busy 2-core machine a
# step was measured 18× slower (6.8 s vs 0.38 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press)
py=.venv/bin/python
mkdir -p build/demos build/runs bundles
policy=${POLICY:-energyflow}
steps=${STEPS:-3000}
case "$policy" in
  energyflow) suffix=""; extra=(--energy-prior gaussian --input-scale c_in --energy-scale edm) ;;
  diffusion) suffix="-dp"; extra=(--policy diffusion) ;;
  *) echo "train-defaults.sh: POLICY must be energyflow or diffusion, got $policy" >&2; exit 2 ;;
esac
for task in "${tasks[@]}"; do
  demos=build/demos/$task.hdf5
  episodes=50; [ "$task" = button-press ] && episodes=100
  [ -f "$demos" ] || $py -m sim.record --task "$task" --episodes "$episodes" --seed 0 --out "$demos" --no-progress
  name=metaworld-$task$suffix
  run=build/runs/$name
  rm -rf "$run"
  (cd training && ../$py -m energyflow train --data "../$demos" --out "../$run" --name "$name" \
      --down-dims 16 32 64 --state-hidden 64 --head-dims 64 32 --batch-size 64 --lr 5e-4 \
      --warmup-steps 100 --steps "$steps" --ckpt-every 500 --val-every 500 --seed 0 --threads 1 --no-progress \
      "${extra[@]}")
  rm -rf "bundles/$name"
  cp -r "$run/bundle" "bundles/$name"
  if [ "$policy" = energyflow ]; then
    (cd training && ../$py -m energyflow calibrate --bundle "../bundles/$name" --data "../$demos" \
        --n-windows 512 --seed 0 --split-seed 0)
  fi
  ./bin/energyflow bundle verify "bundles/$name" 2>/dev/null || go run ./cmd/energyflow bundle verify "bundles/$name"
done
