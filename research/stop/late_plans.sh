#!/usr/bin/env bash
# Does the runtime say when the host falls behind? Level-0 episodes of one
# task through the runtime, with the energy stop live, beside N busy loops
# that each keep a core busy (research/notes/evaluation-log.md, "The host falling behind,
# said out loud").
#
#   research/stop/late_plans.sh --out DIR [--task assembly] [--loads "0 1 4"]
#                               [--episodes 30] [--seed 150000] [--rate 10] [--nice "0 10"]
#                               [--bundle B]
#
# For each N in --loads and each niceness in --nice (default 0): start N
# loops (`python3 -c 'while True: pass'`, under `nice -n` that niceness:
# the runtime and the simulator keep niceness 0, so 10 stands for a runtime
# given priority over the host's other work, as deploy/energyflow.service's
# Nice=-10 does), run `energyflow sim eval` on the shipped bundle (the
# task's state bundle, or --bundle B)
# (DIR/<task>_load<N>.json and .txt, DIR/<task>_load<N>_nice<M>.json for a
# niceness M other than 0), stop the loops. Every load uses the same seeds. Then print one row
# per load: the cell's inference p50/p90, the p90 in control periods against
# the loop's plan_late_limit, the episodes in which the loop warned that its
# plans were late, the energy stops (and those in warned episodes), and any
# other stop by kind.
# An existing DIR/<task>_load<N>.json is kept (rerun by deleting it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=""; task=assembly; loads="0 1 4"; episodes=30; seed=150000; rate=10; nices=0; bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --task) task=$2; shift 2 ;;
    --loads) loads=$2; shift 2 ;;
    --episodes) episodes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --nice) nices=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    *) echo "late_plans.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "late_plans.sh: --out DIR is required" >&2; exit 2; }
bundle=${bundle:-bundles/metaworld-$task}
[ -f "$bundle/manifest.json" ] || { echo "late_plans.sh: --bundle $bundle: no manifest.json there" >&2; exit 2; }
for n in $loads; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "late_plans.sh: --loads \"$loads\": $n is not a count of loops" >&2; exit 2; }
done
for m in $nices; do
  [[ "$m" =~ ^[0-9]+$ ]] && [ "$m" -le 19 ] || { echo "late_plans.sh: --nice \"$nices\": $m is not a niceness from 0 to 19" >&2; exit 2; }
done
make --no-print-directory build >/dev/null
mkdir -p "$out"

pids=()
stop_loops() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; pids=(); }
trap stop_loops EXIT

cells=()
for n in $loads; do
  for m in $nices; do
    name=${task}_load$n; [ "$m" = 0 ] || name=${name}_nice$m
    cells+=("$n:$m:$name")
    base=$out/$name
    [ -f "$base.json" ] && { echo "kept   $base.json"; continue; }
    for _ in $(seq 1 "$n"); do
      nice -n "$m" python3 -c 'while True: pass' &
      pids+=($!)
    done
    echo "run    $task, $n busy loops at niceness $m, seeds $seed-$((seed + episodes - 1)) at $rate Hz"
    ./bin/energyflow sim eval --task "$task" --bundle "$bundle" --level 0 --episodes "$episodes" \
      --seed "$seed" --rate "$rate" --max-steps 500 --json "$base.json.tmp" > "$base.txt" 2> "$base.log" || {
        echo "late_plans.sh: $task with $n loops failed, see $base.log" >&2; tail -n 5 "$base.log" >&2; exit 1; }
    stop_loops
    mv "$base.json.tmp" "$base.json"
    cat "$base.txt"
  done
done

.venv/bin/python - "$out" "$task" "${cells[@]}" <<'PY'
import json, sys
out, task, cells = sys.argv[1], sys.argv[2], [c.split(":") for c in sys.argv[3:]]
print(f"| {task}, busy loops | inference p50 / p90 | p90 in periods (limit) | episodes warned late | succeeded | energy stops (in warned episodes) | other stops |")
print("|---|---|---|---|---|---|---|")
for n, nice, name in cells:
    s = json.load(open(f"{out}/{name}.json"))
    rs = s["results"]
    warned = [r for r in rs if r["late_spells"] > 0]
    stops = [r for r in rs if r.get("stop_kind") == "energy"]
    both = [r for r in stops if r["late_spells"] > 0]
    other = {}
    for r in rs:
        k = r.get("stop_kind")
        if k and k != "energy":
            other[k] = other.get(k, 0) + 1
    other = ", ".join(f"{k} {v}" for k, v in sorted(other.items())) or "none"
    lim = s["plan_late_limit_periods"]
    lim = "none" if lim is None else f"{lim:.2f}"
    label = n if nice == "0" else f"{n} at niceness {nice}"
    print(f"| {label} | {s['inference_p50_ms']:.0f} / {s['inference_p90_ms']:.0f} ms | {s['inference_p90_periods']:.2f} ({lim}) "
          f"| {len(warned)}/{len(rs)} | {s['successes']}/{s['episodes']} | {len(stops)} ({len(both)}) | {other} |")
PY
