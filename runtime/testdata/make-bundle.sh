#!/usr/bin/env bash
# Regenerates runtime/testdata/simarm-bundle: a tiny random-init EnergyFlow
# bundle shaped for the Go simulated arm (examples/maps/simarm.yaml):
# state = position(7) + velocity(7) + gripper(1) = 15, actions = 7 joint
# velocities + gripper = 8. Used by the runtime's end-to-end tests only; its
# actions are not meant to do anything useful.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/training"
rm -rf "$root/runtime/testdata/simarm-bundle"
../.venv/bin/python -m energyflow export --random-init --tiny --energy-head pooled --seed 7 --name simarm-test \
  --state-dim 15 --action-dim 8 --out "$root/runtime/testdata/simarm-bundle"

# simarm-vision-bundle: the same shapes plus one camera input ("camera",
# 32×32 crop of a 40×40 resize, ResNet-18 of width 4 = 32 features), for the
# tests of image observations in the control loop.
rm -rf "$root/runtime/testdata/simarm-vision-bundle"
../.venv/bin/python -m energyflow export --random-init --tiny --energy-head pooled --seed 7 --name simarm-vision-test \
  --state-dim 15 --action-dim 8 --image-keys camera --image-size 32 --vision-width 4 \
  --out "$root/runtime/testdata/simarm-vision-bundle"
