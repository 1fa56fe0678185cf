#!/usr/bin/env bash
# Closed-loop evaluation of the shipped bundles through the real runtime
# (camera → policy → safety → Modbus → Meta-World), and the report of
# docs/evaluation.md: every number there comes from this script.
#
#   scripts/evaluate.sh [--quick] [--episodes N] [--tasks "t1 t2"] [--levels "0 S M L"]
#                       [--steps "10 20"] [--policies "energyflow diffusion"]
#                       [--faults "push object"] [--image-faults "occlusion"] [--fault-tasks "button-press"]
#                       [--fault-step N] [--max-steps N] [--rate HZ] [--seed S] [--out DIR] [--publish]
#                       [--rollouts "10 20 50"] [--no-bench] [--bundles DIR] [--watch SCORES] [--observe]
#   scripts/evaluate.sh --preset cpu10 [--publish]
#   scripts/evaluate.sh --preset cpu50 [--publish]
#
# --preset cpu10 is the grid docs/evaluation.md reports (10 episodes per cell,
# what a 2-core machine runs in about an hour): every task at level 0 with
# EnergyFlow (K = 10, 20) and Diffusion Policy, with their direct rollouts;
# button-press and drawer-open at S/M/L and under both faults; LeRobot on
# button-press. Cells already in the output directory are kept when they were
# measured under the current protocol (below).
# --preset cpu50 is the 50-episode grid of research/notes/evaluation-results-50.md
# (build/eval50; about 10 min per cell on 2 cores; the published cells ran as
# two evaluate.sh processes with different --tasks sharing --out): every
# task at levels 0/S/M/L with EnergyFlow (K = 20, 10) and Diffusion Policy, the
# push and object faults on every task, the image policy on ButtonPress (levels
# 0/S/M/L, occlusion at step 30 and from step 0), LeRobot at level 0 on every
# task and at S/M/L on ButtonPress and DrawerOpen. Cells already in
# build/eval50 are kept, so an interrupted run resumes where it stopped.
#
# Protocol: up to --max-steps (500, the official Meta-World evaluation's
# limit) environment steps per episode; episode i uses scene seed --seed+i
# and sampler seed --seed+i (recorded as policy_seed), so episodes are
# independent; steps to success come from the simulator's success step.
# Policies: energyflow runs bundles/metaworld-<task> at every K of --steps;
# diffusion runs bundles/metaworld-<task>-dp (the Diffusion Policy baseline, from the
# branch `baselines`: scripts/baselines.sh restores it,
# DDIM with its manifest's 20 steps); image runs bundles/metaworld-<task>-image
# (EnergyFlow on camera + proprioception, at every K of --steps, skipped when
# the task has none) and, on the fault tasks, under --image-faults; lerobot trains (once, into
# build/lerobot/<task>) and evaluates LeRobot's Diffusion Policy with its own
# code in build/lerobot-venv (research/baselines/lerobot_baseline.py, 10000 steps on
# the task's 200 demonstrations; a model already in build/lerobot/<task> is reused; skipped
# with a note when that venv is missing). Faults (docs/sim.md) run EnergyFlow
# at level 0 with the first K, injected at environment step 30; --fault-step N
# injects them at step N instead and names those cells <fault>-at<N>. Rollouts:
# every task's bundles at level 0 through the reference samplers straight on
# Meta-World, no runtime (python -m energyflow.rollout), EnergyFlow at each
# K of --rollouts and Diffusion Policy at 20, on the runtime cells' seeds
# (rollout_<policy>_<task>_0_K<k>.json); the report pairs them with the
# runtime cells.
# Every cell uses the same episode seeds (--seed, --seed+1, ...).
#
# Writes <out>/<policy>_<task>_<level>_K<k>[_<fault>[-at<N>]].{json,jsonl,log} and
# <out>/report.md (+ report.json, img/*.png) via scripts/eval_report.py.
# --publish copies the report to research/notes/evaluation-results.md and the
# plots to research/notes/img/ (from --out build/eval50:
# research/notes/evaluation-results-50.md and research/notes/img/eval50/);
# docs/evaluation.md, the results page, cites what it takes from them. --no-bench skips the latency benches and keeps the
# latency files already in --out: pass it to evaluate.sh processes that run
# beside each other, whose benches would be taken on a loaded machine.
# --bundles DIR takes the EnergyFlow bundles from DIR/metaworld-<task> instead of
# bundles/ (candidates before they are shipped; keep them in their own --out).
# --watch SCORES makes the energy stop of every runtime cell watch these scores
# (sim eval --watch: e.g. state_energy, or energy,state_energy) instead of the
# bundle's default watch set (state_energy alone when the bundle has the state
# term, else its calibration's score); the cells keep their names, so give them their
# own --out.
# --observe runs every runtime cell with the energy stop observing only (sim eval
# --observe-only): the scores are traced to the end of every episode and nothing
# trips on them, for research/stop/stop_rules.py and research/stop/false_trips.py to replay
# rules on; give those cells their own --out.
# --quick checks the pipeline, not the numbers: 2 short episodes
# of each policy at level 0 and one fault episode, into build/eval-quick, and
# a dry run of `sim calibrate` (closed-loop thresholds, the bundle untouched;
# 4 episodes of up to 100 steps, so that its 2 fit episodes hold the 50 fresh
# scores one band needs even when a loaded host scores only every other tick).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
episodes=50; tasks="button-press drawer-open assembly bin-picking hammer"; levels="0 S M L"; ks="10 20"
policies="energyflow diffusion image lerobot"; rollouts="10 20 50"; faults="push object"; fault_tasks="button-press drawer-open"
image_faults="occlusion"
maxsteps=500; rate=20; seed=1000; out=build/eval; publish=0; fault_step=30; fault_tag=""; bench=1; calibrate=0
cal_maxsteps=100 # --quick's calibration dry run: steps per episode
efdir=bundles # where the EnergyFlow bundles are (--bundles)
watch=""      # sim eval --watch ("": the bundle's default watch set)
observe=0     # sim eval --observe-only (--observe)
if [ "${1:-}" = --preset ]; then
  case "${2:-}" in cpu10|cpu50) ;; *) echo "evaluate.sh: unknown preset ${2:-} (cpu10, cpu50)" >&2; exit 2 ;; esac
fi
if [ "${1:-}" = --preset ] && [ "${2:-}" = cpu10 ]; then
  shift 2
  all="button-press drawer-open assembly bin-picking hammer"
  # extra arguments (--publish, --no-bench) go to every part of the grid
  "$0" --episodes 10 --tasks "$all" --levels 0 --steps "20 10" --policies "energyflow diffusion" --faults "" --rollouts 20 "$@"
  "$0" --episodes 10 --tasks "button-press drawer-open" --levels "S M L" --steps 20 --policies "energyflow diffusion" \
    --faults "push object" --fault-tasks "button-press drawer-open" --rollouts "" "$@"
  exec "$0" --episodes 10 --tasks button-press --levels "0 S M L" --steps 20 --policies lerobot --faults "" \
    --rollouts "" "$@"
fi
if [ "${1:-}" = --preset ] && [ "${2:-}" = cpu50 ]; then
  shift 2
  all="button-press drawer-open assembly bin-picking hammer"
  e50=(--episodes 50 --out build/eval50 --rollouts "")
  # extra arguments (--publish, --no-bench) go to every part of the grid
  "$0" "${e50[@]}" --tasks "$all" --levels "0 S M L" --steps "20 10" --policies "energyflow diffusion" \
    --faults "push object" --fault-tasks "$all" --rollouts 20 "$@"
  "$0" "${e50[@]}" --tasks button-press --levels "0 S M L" --steps 20 --policies image --faults "" \
    --image-faults occlusion --fault-tasks button-press "$@"
  "$0" "${e50[@]}" --tasks button-press --levels 0 --steps 20 --policies image --faults "" \
    --image-faults occlusion --fault-tasks button-press --fault-step 0 "$@"
  "$0" "${e50[@]}" --tasks "$all" --levels 0 --policies lerobot --faults "" "$@"
  exec "$0" "${e50[@]}" --tasks "button-press drawer-open" --levels "0 S M L" --policies lerobot --faults "" "$@"
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) episodes=2; tasks="button-press"; levels="0"; ks="20"; maxsteps=40; faults="object"
             fault_tasks="button-press"; fault_step=10; out=build/eval-quick; policies="energyflow diffusion image"
             rollouts=""; calibrate=1; shift ;;
    --episodes) episodes=$2; shift 2 ;;
    --tasks) tasks=$2; shift 2 ;;
    --levels) levels=$2; shift 2 ;;
    --steps) ks=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --rollouts) rollouts=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --image-faults) image_faults=$2; shift 2 ;;
    --fault-tasks) fault_tasks=$2; shift 2 ;;
    --fault-step) fault_step=$2; fault_tag="-at$2"; shift 2 ;;
    --max-steps) maxsteps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --publish) publish=1; shift ;;
    --no-bench) bench=0; shift ;;
    --bundles) efdir=$2; shift 2 ;;
    --watch) watch=$2; shift 2 ;;
    --observe) observe=1; shift ;;
    *) echo "evaluate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
make --no-print-directory build >/dev/null
mkdir -p "$out"

# current FILE: a cell (or rollout) already on disk was measured under this
# protocol: as many episodes, the same step limit, and a sampler seed of its
# own per episode (results[].policy_seed; cells from before that protocol
# shared one sampler stream across episodes and are run again)
current() {
  [ -f "$1" ] && .venv/bin/python - "$1" "$episodes" "$maxsteps" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s.get("results") or [{}]
ok = (s.get("episodes") == int(sys.argv[2]) and s.get("max_steps") == int(sys.argv[3])
      and all("policy_seed" in x for x in r))
sys.exit(0 if ok else 1)
PY
}

# run NAME EXTRA_ARGS...: one cell; a current cell already on disk is kept
run() {
  local name=$1; shift
  local base=$out/$name
  if current "$base.json"; then
    echo "kept   $name"; return
  fi
  echo "run    $name"
  ./bin/energyflow sim eval --episodes "$episodes" --max-steps "$maxsteps" --rate "$rate" --seed "$seed" \
    --scores "$base.jsonl" --json "$base.json" ${watch:+--watch "$watch"} $([ "$observe" = 1 ] && echo --observe-only) "$@" > "$base.txt" 2> "$base.log" || {
      echo "evaluate.sh: $name failed, see $base.log" >&2; tail -n 5 "$base.log" >&2; exit 1; }
  cat "$base.txt"
}

# lerobot TASK: LeRobot's Diffusion Policy, its own code, no runtime
lerobot() {
  local task=$1 lpy=build/lerobot-venv/bin/python lr=research.baselines.lerobot_baseline
  if [ ! -x "$lpy" ]; then
    echo "skip   lerobot $task: no $lpy (python3 -m venv build/lerobot-venv && build/lerobot-venv/bin/pip install lerobot==0.4.4 h5py metaworld==3.1.1)" >&2
    return
  fi
  if [ ! -f "build/lerobot/$task/model.safetensors" ]; then
    echo "train  lerobot $task"
    # 10000 steps, batch 64, seed 0: about 30 min per task on one thread (our DP: 12000)
    $lpy -m $lr train --data "build/demos/$task.hdf5" --out "build/lerobot/$task" --steps 10000 --seed 0 > "$out/lerobot_${task}_train.log" 2>&1
  fi
  for level in $levels; do
    local name=lerobot_${task}_${level}_K20
    if current "$out/$name.json"; then
      echo "kept   $name"; continue
    fi
    echo "run    $name"
    $lpy -m $lr eval --policy "build/lerobot/$task" --task "$task" --level "$level" --episodes "$episodes" \
      --seed "$seed" --max-steps "$maxsteps" --json "$out/$name.json" > "$out/$name.log" 2>&1
    tail -n 1 "$out/$name.log"
  done
}

for task in $tasks; do
  for policy in $policies; do
    case "$policy" in
      energyflow) bundle=$efdir/metaworld-$task; pks=$ks ;;
      diffusion) bundle=bundles/metaworld-$task-dp; pks=20 ;;
      image) bundle=bundles/metaworld-$task-image; pks=$ks
             [ -f "$bundle/manifest.json" ] || { echo "skip   image $task: no bundle $bundle (POLICY=image scripts/train-defaults.sh $task)" >&2; continue; } ;;
      lerobot) lerobot "$task"; continue ;;
      *) echo "evaluate.sh: unknown policy $policy" >&2; exit 2 ;;
    esac
    if [ ! -f "$bundle/manifest.json" ]; then
      echo "skip   $policy $task: no bundle $bundle (the baselines: scripts/baselines.sh; or train one: scripts/train-defaults.sh)" >&2; continue
    fi
    for level in $levels; do for k in $pks; do
      run "${policy}_${task}_${level}_K${k}" --task "$task" --bundle "$bundle" --level "$level" --steps "$k"
    done; done
  done
  case " $fault_tasks " in *" $task "*)
    k=${ks%% *}
    case " $policies " in *" energyflow "*)
      for fault in $faults; do
        if [ "$task" = hammer ] && [ "$fault" = object ]; then
          echo "skip   energyflow_${task}_0_K${k}_object${fault_tag}: hammer's second object slot holds the nail (docs/sim.md)" >&2
          continue
        fi
        run "energyflow_${task}_0_K${k}_${fault}${fault_tag}" --task "$task" --bundle "$efdir/metaworld-$task" --level 0 \
          --steps "$k" --fault "$fault" --fault-step "$fault_step"
      done ;;
    esac
    case " $policies " in *" image "*)
      if [ -f "bundles/metaworld-$task-image/manifest.json" ]; then
        for fault in $image_faults; do
          run "image_${task}_0_K${k}_${fault}${fault_tag}" --task "$task" --bundle "bundles/metaworld-$task-image" --level 0 \
            --steps "$k" --fault "$fault" --fault-step "$fault_step"
        done
      fi ;;
    esac ;;
  esac
done

# Direct rollouts (no runtime) at level 0 on every task, same seeds and step
# limit as the runtime cells: the policy alone vs what the runtime adds
# (eval_report.py pairs them with the runtime cells). EnergyFlow at each K of
# --rollouts, Diffusion Policy at 20 (its manifest's DDIM steps).
rollout() {
  local f=$1 bundle=$2 task=$3; shift 3
  if current "$f"; then echo "kept   $(basename "$f" .json)"; return; fi
  echo "run    $(basename "$f" .json)"
  .venv/bin/python -m energyflow.rollout "$bundle" --task "$task" --level 0 --episodes "$episodes" \
    --seed "$seed" --max-steps "$maxsteps" --json "$f" "$@" > "${f%.json}.log" 2>&1 || {
      echo "evaluate.sh: $(basename "$f") failed, see ${f%.json}.log" >&2; tail -n 5 "${f%.json}.log" >&2; exit 1; }
  tail -n 1 "${f%.json}.log"
}
if [ -n "$rollouts" ]; then
  for task in $tasks; do
    case " $policies " in *" energyflow "*)
      [ ! -f "$efdir/metaworld-$task/manifest.json" ] || for k in $rollouts; do
        rollout "$out/rollout_energyflow_${task}_0_K$k.json" "$efdir/metaworld-$task" "$task" --steps "$k"
      done ;;
    esac
    case " $policies " in *" diffusion "*)
      [ ! -f "bundles/metaworld-$task-dp/manifest.json" ] ||
        rollout "$out/rollout_diffusion_${task}_0_K20.json" "bundles/metaworld-$task-dp" "$task" ;;
    esac
  done
fi

# The closed-loop calibration of the energy stop (docs/safety.md), as a dry run
# on the first task's EnergyFlow bundle: fits the bands, leaves the bundle.
if [ "$calibrate" = 1 ]; then
  task=${tasks%% *}; f=$out/calibrate_energyflow_${task}.json
  if [ -f "$efdir/metaworld-$task/manifest.json" ]; then
    echo "run    calibrate_energyflow_${task} (dry run)"
    ./bin/energyflow sim calibrate --dry-run --bundle "$efdir/metaworld-$task" --task "$task" --episodes 4 --alpha 0.5 \
      --max-steps "$cal_maxsteps" --rate "$rate" --json "$f" > "${f%.json}.txt" 2> "${f%.json}.log" || {
        echo "evaluate.sh: sim calibrate failed, see ${f%.json}.log" >&2; tail -n 5 "${f%.json}.log" >&2; exit 1; }
    cat "${f%.json}.txt"
  fi
fi

# Inference latency per policy (RQ6, Table 7 analog): whole samples, batch 1,
# one ONNX Runtime thread, on the first task's bundles.
bench_n=100; [ "$episodes" -le 2 ] && bench_n=5
task=${tasks%% *}
for policy in $policies; do
  case "$policy" in
    energyflow) bundle=$efdir/metaworld-$task; pks=$ks ;;
    diffusion) bundle=bundles/metaworld-$task-dp; pks=20 ;;
    image) bundle=bundles/metaworld-$task-image; pks=$ks ;;
    *) continue ;;
  esac
  [ -f "$bundle/manifest.json" ] || continue
  for k in $pks; do
    [ "$bench" = 1 ] || continue
    ./bin/energyflow bench --bundle "$bundle" --steps "$k" --n "$bench_n" --json > "$out/latency_${policy}_${task}_K${k}.json" 2>/dev/null
  done
done

# What the monitored energy is made of (research/notes/evaluation-history.md, "What the energy
# measures here"): prior term vs scaled residual, on held-out demo windows.
if [ "$episodes" -gt 2 ]; then
  for task in $fault_tasks; do
    f=$out/anatomy_$task.json
    [ -f "$f" ] || [ ! -f "build/demos/$task.hdf5" ] || [ ! -f "bundles/metaworld-$task/manifest.json" ] ||
      .venv/bin/python -m research.ood.energy_anatomy "bundles/metaworld-$task" "build/demos/$task.hdf5" > "$f"
  done
fi

# Where each level-0 episode's scene put its objects (report: success by where
# the scene is); a file from another --seed or --episodes is rewritten.
case " $levels " in *" 0 "*)
  for task in $tasks; do
    f=$out/positions_${task}_0.json
    if [ -f "$f" ] && [ "$(.venv/bin/python -c 'import json,sys; e=json.load(open(sys.argv[1]))["episodes"]; print(len(e), e[0]["seed"])' "$f")" = "$episodes $seed" ]; then
      continue
    fi
    .venv/bin/python -m sim.positions --task "$task" --level 0 --seed "$seed" --episodes "$episodes" --json "$f" \
      2> "$out/positions_${task}_0.log" || { echo "evaluate.sh: sim.positions failed, see $out/positions_${task}_0.log" >&2; exit 1; }
  done ;;
esac

.venv/bin/python scripts/eval_report.py --dir "$out" --out "$out/report.md" --img "$out/img" --rate "$rate" > /dev/null
echo "report: $out/report.md"
if [ "$publish" = 1 ]; then
  # build/eval → research/notes/evaluation-results.md + research/notes/img/;
  # build/eval50 → research/notes/evaluation-results-50.md + research/notes/img/eval50/
  notes=research/notes
  name=${out##*/}; suffix=${name#eval}; img=img
  [ -n "$suffix" ] && { suffix=-$suffix; img=img/$name; }
  mkdir -p "$notes/$img"
  rm -f "$notes/$img"/eval-*.png # plots of cells no longer in the grid go too
  cp "$out"/img/*.png "$notes/$img/"
  sed "s#$out/img/#$img/#g" "$out/report.md" > "$notes/evaluation-results$suffix.md"
  echo "published: $notes/evaluation-results$suffix.md, $notes/$img/"
fi
