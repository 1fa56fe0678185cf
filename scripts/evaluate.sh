#!/usr/bin/env bash
# Closed-loop evaluation of the shipped bundles through the real runtime
# (camera → policy → safety → Modbus → Meta-World), as in docs/evaluation.md.
#
#   scripts/evaluate.sh [--quick] [--episodes N] [--tasks "t1 t2"] [--levels "0 S M L"] [--steps "10 20"]
#
# Writes build/eval/<task>_<level>_K<k>.json (summaries), .jsonl (per-tick
# energy scores) and prints a markdown table. --quick runs 2 short episodes
# at level 0 to check the pipeline, not the numbers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
episodes=50; tasks="button-press"; levels="0 S M L"; ks="10 20"; maxsteps=200
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) episodes=2; levels="0"; ks="20"; maxsteps=30; shift ;;
    --episodes) episodes=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --steps) ks=$2; shift 2 ;;
    --max-steps) maxsteps=$2; shift 2 ;;
    *) echo "evaluate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
make --no-print-directory build >/dev/null
mkdir -p build/eval
echo "| task | level | K | success | 95% CI | mean length | safety stops |"
echo "|---|---|---|---|---|---|---|"
for task in $tasks; do for level in $levels; do for k in $ks; do
  base=build/eval/${task}_${level}_K${k}
  ./bin/energyflow sim eval --task "$task" --level "$level" --steps "$k" --episodes "$episodes" \
    --max-steps "$maxsteps" --seed 1000 --scores "$base.jsonl" --json "$base.json" > "$base.txt" 2> "$base.log"
  .venv/bin/python - "$base.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
trips = ", ".join(f"{k}={v}" for k, v in sorted(s["trips"].items())) or "none"
print(f"| {s['task']} | {s['level']} | {s['steps_k']} | {s['successes']}/{s['episodes']} = {100*s['success_rate']:.0f}% "
      f"| {100*s['ci95_low']:.0f}–{100*s['ci95_high']:.0f}% | {s['mean_length']:.0f} | {trips} |")
PY
done; done; done
