#!/usr/bin/env bash
# Hours of level-0 closed-loop driving through the runtime, for the stop's
# false trips per hour (research/notes/evaluation-log.md, "False trips per hour").
#
#   research/stop/level0_hours.sh --out DIR --hours H --seed S [--tasks "t1 t2"] [--chunk N]
#                                 [--steps "assembly=10 hammer=10"] [--rate HZ] [--bundle DIR] [--record]
#                                 [-- extra sim eval flags, e.g. --warm-sigma 1 --warm-steps 5]
#
# Drives the shipped EnergyFlow bundles (bundles/metaworld-<task>; --bundle DIR
# drives a candidate instead, for one task only) at level 0
# with `energyflow sim eval --observe-only`: every score is traced per tick
# (JSONL) and none ends an episode, so research/stop/stop_rules.py can replay any
# rule on the whole of every episode. Tasks take turns, --chunk episodes at a
# time (DIR/<task>_<first seed>.{json,jsonl,txt,log}), until the RUNNING ticks
# of every chunk in DIR add up to --hours at --rate: an interrupted run
# resumes, and the tasks' shares stay balanced whenever it is stopped.
# Episode i of a task's chunk c has scene and sampler seed S + c*N + i.
# --steps sets K per task (default: the bundle manifest's). --record keeps
# every episode's states too (`sim eval --record`, HDF5 under DIR/recordings/
# TASK_SEED/), for research/stop/explain_trip.py. Flags after `--` go to
# every `sim eval` as they are (warm starts, a delay).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=""; hours=1; seed=3000; chunk=20; rate=20; ksets=""; bundle=""; record=""; extra=()
tasks="button-press drawer-open assembly bin-picking hammer"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --hours) hours=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --steps) ksets=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --record) record=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "level0_hours.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "level0_hours.sh: --out DIR is required" >&2; exit 2; }
read -r -a tlist <<< "$tasks"
if [ -n "$bundle" ] && [ ${#tlist[@]} -ne 1 ]; then
  echo "level0_hours.sh: --bundle drives one task: give --tasks TASK (got ${#tlist[@]})" >&2; exit 2
fi
bundle_of() { echo "${bundle:-bundles/metaworld-$1}"; }
for t in $tasks; do
  [ -f "$(bundle_of "$t")/manifest.json" ] || { echo "level0_hours.sh: no bundle $(bundle_of "$t")" >&2; exit 2; }
done
make --no-print-directory build >/dev/null
mkdir -p "$out"

# running hours recorded in DIR so far
driven() {
  .venv/bin/python - "$out" "$rate" <<'PY'
import json, sys, pathlib
n = 0
for f in pathlib.Path(sys.argv[1]).glob("*.jsonl"):
    if not f.with_suffix(".json").exists():
        continue  # a chunk still running, or interrupted: not counted
    n += sum('"state": "RUNNING"' in l or '"state":"RUNNING"' in l for l in f.open())
print(n / float(sys.argv[2]) / 3600)
PY
}

c=0
while :; do
  h=$(driven)
  if .venv/bin/python -c "import sys; sys.exit(0 if float('$h') >= float('$hours') else 1)"; then
    echo "driven $h h of level 0 in $out"; break
  fi
  for t in $tasks; do
    s=$((seed + c * chunk))
    base=$out/${t}_$s
    [ -f "$base.json" ] && continue
    k=""
    for kv in $ksets; do [ "${kv%%=*}" = "$t" ] && k=${kv#*=}; done
    echo "run    $t seeds $s-$((s + chunk - 1))${k:+ K=$k} ($h h so far)"
    ./bin/energyflow sim eval --observe-only --task "$t" --bundle "$(bundle_of "$t")" --level 0 \
      --episodes "$chunk" --seed "$s" --rate "$rate" --max-steps 500 ${k:+--steps "$k"} ${record:+--record "$out/recordings"} \
      "${extra[@]}" --scores "$base.jsonl" --json "$base.json.tmp" > "$base.txt" 2> "$base.log" || {
        echo "level0_hours.sh: $t seed $s failed, see $base.log" >&2; tail -n 5 "$base.log" >&2; exit 1; }
    mv "$base.json.tmp" "$base.json"
    cat "$base.txt"
  done
  c=$((c + 1))
done
