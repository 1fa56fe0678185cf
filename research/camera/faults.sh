#!/usr/bin/env bash
# The stop on the camera bundles, through the runtime (issue 50): the earlier fault table's
# protocol (research/faults/README.md: 10 Hz, the stop live, 10 episodes a cell, seeds 50000+,
# the fault at step 30) with the camera's faults added (and the object, which a camera sees), and level L against level 0 for the AUROC.
#
#   research/camera/faults.sh [--rate HZ] [--out DIR] [--faults "push occlusion"] [--no-levels] [TASK ...]
#                                              (default: 10 Hz, research/camera/faults, every fault; button-press drawer-open)
#   .venv/bin/python -m research.faults.table research/camera/faults
#
# --faults runs only those (zero_state among them at step 40), with the level 0 / L pair;
# --no-levels leaves the pair out (a directory that has it already).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=research/camera/faults; rate=10; only=""; levels=(0 L)
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --faults) only=$2; shift 2 ;;
    --no-levels) levels=(); shift ;;
    *) break ;;
  esac
done
mkdir -p "$out"
ef=${EF:-./bin/energyflow}
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press drawer-open)
for t in "${tasks[@]}"; do
  b=bundles/metaworld-$t-camera
  faults=(push object blackout freeze camera_shift occlusion zero_state)
  [ -z "$only" ] || read -r -a faults <<< "$only"
  for f in "${faults[@]}"; do
    step=30; [ "$f" != zero_state ] || step=40
    $ef sim eval --bundle "$b" --task "$t" --episodes 10 --seed 50000 --rate "$rate" --fault "$f" --fault-step $step \
        --max-steps 80 --json "$out/$t-camera-$f.json" > /dev/null 2>> "$out/$t-camera.log"
  done
  for l in "${levels[@]}"; do
    $ef sim eval --bundle "$b" --task "$t" --level $l --episodes 10 --seed 51000 --rate "$rate" --max-steps 80 \
        --observe-only --scores "$out/$t-camera-level$l.jsonl" --json "$out/$t-camera-level$l.json" > /dev/null 2>> "$out/$t-camera.log"
  done
done
rm -f "$out"/*.log
.venv/bin/python -m research.faults.table "$out"
