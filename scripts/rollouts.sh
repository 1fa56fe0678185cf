#!/usr/bin/env bash
# Records the policy's own level-0 rollouts through the runtime, for the state
# term to learn what the policy does when all is well (docs/safety.md, "The
# state term and the policy's own driving"):
#
#   scripts/rollouts.sh TASK OUT [EPISODES_PER_DELAY] [SEED]
#
# runs `energyflow sim eval` on the task's shipped bundle at level 0, 10 Hz
# (the demo's rate), with the energy stop observing only (every episode runs
# to success or the step limit), once per inference delay of 0, 1, 2 and 3
# control periods (`--delay`: plans landing as late as a loaded host or a
# viewer's browser makes them), EPISODES_PER_DELAY episodes each (default
# 15) from SEED on (default 40000; each delay continues the seeds). Each
# delay's episodes are recorded under OUT/d<delay>/ (one folder per episode,
# TASK_SEED) with the summary OUT/d<delay>/summary.json, which says which
# episodes succeeded. `python -m energyflow state-term --rollouts OUT/d*`
# trains on the successful ones.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { echo "usage: scripts/rollouts.sh TASK OUT [EPISODES_PER_DELAY] [SEED]" >&2; exit 2; }
task=$1 out=$2 n=${3:-15} seed=${4:-40000}
bin=${ENERGYFLOW_BIN:-./bin/energyflow}
[ -x "$bin" ] || make --no-print-directory build >/dev/null
mkdir -p "$out"
for d in 0 1 2 3; do
  dir=$out/d$d
  if [ -f "$dir/summary.json" ]; then
    echo "rollouts: $dir done already"
  else
    rm -rf "$dir"
    mkdir -p "$dir"
    "$bin" sim eval --task "$task" --level 0 --rate 10 --episodes "$n" --seed "$seed" --delay "$d" \
      --observe-only --record "$dir" --json "$dir/summary.json.tmp" 2>"$dir/eval.log" | tail -n 1
    mv "$dir/summary.json.tmp" "$dir/summary.json"
  fi
  seed=$((seed + n))
done
