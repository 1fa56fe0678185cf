#!/usr/bin/env bash
# Records a task's Diffusion Policy teacher driving through the runtime, for an EnergyFlow student
# to be distilled on the states a policy reaches in closed loop as well as the demonstrations'
# (research/distill/README.md; the shipped BinPicking bundle is trained this way, scripts/train-defaults.sh):
#
#   scripts/teacher_rollouts.sh TASK OUT [TEACHER_BUNDLE]
#
# three runs of 50 episodes, level 0, the stop observing (a diffusion bundle has no energy stop;
# the other watchdogs act): 10 Hz undelayed (seeds 6000-6049), and 20 Hz with every plan held one
# and two control periods longer (6050-6099, 6100-6149), so that the teacher also shows what it
# does after a late plan. Each run's episodes are recorded under OUT/<run>/ with OUT/<run>/summary.json
# (`energyflow train --rollouts OUT/*` trains on the successful ones). TEACHER_BUNDLE defaults to
# bundles/metaworld-TASK-dp, the teacher's bundle (POLICY=diffusion scripts/train-defaults.sh TASK).
# About 35 minutes for BinPicking here; a run already recorded (its summary.json) is kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { echo "usage: scripts/teacher_rollouts.sh TASK OUT [TEACHER_BUNDLE]" >&2; exit 2; }
task=$1 out=$2 teacher=${3:-bundles/metaworld-$1-dp}
[ -f "$teacher/manifest.json" ] || { echo "teacher_rollouts.sh: no bundle at $teacher" >&2; exit 2; }
bin=${ENERGYFLOW_BIN:-./bin/energyflow}
[ -x "$bin" ] || make --no-print-directory build >/dev/null
record() {
  local run=$1; shift
  local dir=$out/$run
  if [ -f "$dir/summary.json" ]; then echo "teacher_rollouts: $dir done already"; return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  "$bin" sim eval --task "$task" --bundle "$teacher" --level 0 --observe-only --record "$dir" \
    --json "$dir/summary.json.tmp" "$@" 2>"$dir/eval.txt" | tail -n 1
  mv "$dir/summary.json.tmp" "$dir/summary.json"
}
record r10d0 --rate 10 --episodes 50 --seed 6000
record r20d1 --rate 20 --delay 1 --episodes 50 --seed 6050
record r20d2 --rate 20 --delay 2 --episodes 50 --seed 6100
