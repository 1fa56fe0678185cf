#!/usr/bin/env bash
# The stop on the camera bundles, through the runtime (issue 50): the earlier fault table's
# protocol (research/faults/README.md: 10 Hz, the stop live, 10 episodes a cell, seeds 50000+,
# the fault at step 30) with the camera's faults added (and the object, which a camera sees), and level L against level 0 for the AUROC.
#
#   research/camera/faults.sh [TASK ...]        (default: button-press drawer-open)
#   .venv/bin/python -m research.faults.table research/camera/faults
set -euo pipefail
cd "$(dirname "$0")/../.."
out=research/camera/faults; mkdir -p "$out"
ef=${EF:-./bin/energyflow}
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press drawer-open)
for t in "${tasks[@]}"; do
  b=bundles/metaworld-$t-camera
  faults=(push object blackout freeze camera_shift occlusion)
  [ "$t" != hammer ] || faults=(push blackout freeze camera_shift occlusion)  # hammer: no empty object slot
  for f in "${faults[@]}"; do
    $ef sim eval --bundle "$b" --task "$t" --episodes 10 --seed 50000 --rate 10 --fault $f --fault-step 30 \
        --max-steps 80 --json "$out/$t-camera-$f.json" > /dev/null 2>> "$out/$t-camera.log"
  done
  $ef sim eval --bundle "$b" --task "$t" --episodes 10 --seed 50000 --rate 10 --fault zero_state --fault-step 40 \
      --max-steps 80 --json "$out/$t-camera-zero_state.json" > /dev/null 2>> "$out/$t-camera.log"
  for l in 0 L; do
    $ef sim eval --bundle "$b" --task "$t" --level $l --episodes 10 --seed 51000 --rate 10 --max-steps 80 \
        --observe-only --scores "$out/$t-camera-level$l.jsonl" --json "$out/$t-camera-level$l.json" > /dev/null 2>> "$out/$t-camera.log"
  done
done
rm -f "$out"/*.log
.venv/bin/python -m research.faults.table "$out"
