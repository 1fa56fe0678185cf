#!/usr/bin/env bash
# What the DrawerOpen camera bundle's state term catches at its certified threshold (q = 20.4,
# ../drawer-hours) and its own rate: ../faults.sh's protocol (10 episodes a cell, seeds 50000+,
# the fault at step 30, at most 80 steps, the stop live; level L against level 0 observing)
# at 20 Hz, for the faults the state term is there for (push, occlusion) and the AUROC.
#
#   research/camera/faults-20hz/run.sh
#   .venv/bin/python -m research.faults.table research/camera/faults-20hz
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=research/camera/faults-20hz
ef=${EF:-./bin/energyflow}
t=drawer-open; b=bundles/metaworld-$t-camera
for f in push occlusion; do
  $ef sim eval --bundle "$b" --task "$t" --episodes 10 --seed 50000 --rate 20 --fault $f --fault-step 30 \
      --max-steps 80 --json "$out/$t-camera-$f.json" > /dev/null 2>> "$out/$t-camera.log"
done
for l in 0 L; do
  $ef sim eval --bundle "$b" --task "$t" --level $l --episodes 10 --seed 51000 --rate 20 --max-steps 80 \
      --observe-only --scores "$out/$t-camera-level$l.jsonl" --json "$out/$t-camera-level$l.json" > /dev/null 2>> "$out/$t-camera.log"
done
rm -f "$out"/*.log
.venv/bin/python -m research.faults.table "$out"
