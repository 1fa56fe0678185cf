#!/usr/bin/env bash
# Trains a shipped bundle's stop on what the policy itself does when all is
# well (docs/safety.md, "The state term learns the policy's own driving"):
#
#   scripts/stop-from-rollouts.sh TASK [BUNDLE]
#
# 1. the policy's own level-0 rollouts through the runtime at 10 Hz, with
#    plans landing 0–3 control periods late (scripts/rollouts.sh, 15 a delay,
#    seeds 40000+): build/rollouts/TASK/d{0,1,2,3}
# 2. the state term on the demonstrations (build/demos/TASK.hdf5, recorded
#    as train-defaults.sh does when missing) plus their successful episodes,
#    held out by episode in the same proportion (energyflow state-term
#    --rollouts): its held-out q99.9 is the stop's threshold on ButtonPress
#    and DrawerOpen
# 3. on the grasping tasks (assembly, bin-picking, hammer), whose stop uses a
#    closed-loop calibration: fresh level-0 episodes of the same kind with
#    the new state term observing (10 Hz, 15 a delay 0–3, seeds 41000+),
#    calibrated at the smallest alpha they allow (sim calibrate --traces;
#    one false trip in n+1 episodes), and the same at 20 Hz, K = 10
#    (60 episodes, seeds 42000+, driven by sim calibrate).
#
# About 15 min a task on the 2-core machine for steps 1–2, 25 more for 3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 1 ] || { echo "usage: scripts/stop-from-rollouts.sh TASK [BUNDLE]" >&2; exit 2; }
task=$1 bundle=${2:-bundles/metaworld-$1}
py=.venv/bin/python
bin=${ENERGYFLOW_BIN:-./bin/energyflow}
[ -x "$bin" ] || make --no-print-directory build >/dev/null
demos=build/demos/$task.hdf5
[ -f "$demos" ] || $py -m sim.record --task "$task" --episodes 200 --seed 0 --out "$demos" --no-progress
ro=build/rollouts/$task
ENERGYFLOW_BIN=$bin scripts/rollouts.sh "$task" "$ro" 15 40000
(cd training && ../$py -m energyflow state-term --bundle "../$bundle" --data "../$demos" \
   --rollouts "../$ro/d0" "../$ro/d1" "../$ro/d2" "../$ro/d3" --seed 0 --threads 1 --quiet >/dev/null)
$py - "$bundle/manifest.json" <<'PY'
import json, sys
se = json.load(open(sys.argv[1]))["state_energy"]
t = se["train"]
print(f"state term: {t['demos']} demos + {t['rollouts']} rollouts trained, {t['held_out_demos']} + "
      f"{t['held_out_rollouts']} held out ({t['samples']} / {t['held_out_samples']} steps, {t['seconds']} s); "
      f"held-out q99.9 {se['calibration']['quantiles']['99.9']:.3f}")
PY
case "$task" in assembly|bin-picking|hammer) ;; *) exit 0 ;; esac
cal=build/rollouts/$task-cal
mkdir -p "$cal"
traces=()
seed=41000
for d in 0 1 2 3; do
  f=$cal/d$d
  if [ ! -f "$f.json" ]; then
    "$bin" sim eval --task "$task" --bundle "$bundle" --level 0 --rate 10 --episodes 15 --seed "$seed" --delay "$d" \
      --observe-only --scores "$f.jsonl" --json "$f.json.tmp" 2>"$f.log" | tail -n 1
    mv "$f.json.tmp" "$f.json"
  fi
  traces+=("$f.jsonl")
  seed=$((seed + 15))
done
list=$(IFS=,; echo "${traces[*]}")
# 60 conformal episodes: alpha 1/61, the smallest sim calibrate allows on them
"$bin" sim calibrate --task "$task" --bundle "$bundle" --score state_energy --rate 10 --steps 10 \
  --alpha 0.0164 --traces "$list" --json "$cal/calibrate-10hz.json"
"$bin" sim calibrate --task "$task" --bundle "$bundle" --score state_energy --rate 20 --steps 10 \
  --alpha 0.0164 --episodes 60 --seed 42000 --json "$cal/calibrate-20hz.json" 2>"$cal/calibrate-20hz.log"
