#!/usr/bin/env bash
# A camera bundle at levels 0/S/M/L through the runtime (issue 50's S/M/L target: the camera
# EnergyFlow bundle against a Diffusion Policy on the same localiser and data), into
# research/camera/results/, where `python -m research.camera.table` prints them.
#
#   research/camera/levels.sh [--dp | --bundle DIR] [--observe] [--levels "0 S M L"] [--episodes N] [--rate HZ] [--steps K] TASK
#
# Bundle: bundles/metaworld-TASK-camera, or with --dp its Diffusion Policy baseline
# bundles/metaworld-TASK-camera-dp (POLICY=camera-dp scripts/train-defaults.sh TASK; the
# branch `baselines` holds the trained ones: scripts/baselines.sh); with --bundle DIR, that
# bundle, its results named after DIR's name less metaworld-TASK (a bundle from
# research.camera.swap_localiser: build/swap/metaworld-TASK-camera-dploc gives
# TASK-camera-dploc-*.json). Level 0 runs 50 episodes
# (seeds 1000-1049), S/M/L 20 (seeds 1000-1019), as the ButtonPress rows of
# docs/evaluation.md (--episodes N: N at S/M/L, seeds 1000 on, named -S-N.json and so on);
# 20 Hz and the 500-step limit. --observe: the stop observes only (the
# policy alone; a Diffusion Policy bundle has no state term to stop on). --steps K: K sampler
# steps instead of the bundle's (plans land sooner), named -kK. Results:
# TASK-camera[-dp][-observe][-kK]-{L0,S,M,L}[-N].json.
set -euo pipefail
cd "$(dirname "$0")/../.."
suffix=-camera; name_extra=""; levels="S M L"; rate=20; observe=(); episodes=20; steps=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dp) suffix=-camera-dp; dp=1; shift ;;
    --bundle) bundle_dir=$2; shift 2 ;;
    --observe) observe=(--observe-only); name_extra=-observe; shift ;;
    --levels) levels=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --episodes) episodes=$2; shift 2 ;;
    --steps) steps=(--steps "$2"); name_extra=$name_extra-k$2; shift 2 ;;
    -*) echo "levels.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
task=${1:?usage: levels.sh [--dp | --bundle DIR] [--observe] [--levels \"0 S M L\"] [--episodes N] [--rate HZ] [--steps K] TASK}
bundle=bundles/metaworld-$task$suffix
if [ -n "${bundle_dir:-}" ]; then
  [ -z "${dp:-}" ] || { echo "levels.sh: --dp and --bundle both name the bundle: give one" >&2; exit 2; }
  bundle=${bundle_dir%/}; suffix=$(basename "$bundle"); suffix=${suffix#metaworld-$task}
  [ -n "$suffix" ] && [ "$suffix" != "$(basename "$bundle")" ] \
    || { echo "levels.sh: --bundle $bundle: its name must be metaworld-$task-SOMETHING (the results are named after it)" >&2; exit 2; }
fi
[ -f "$bundle/manifest.json" ] || { echo "levels.sh: no bundle $bundle (the baselines: scripts/baselines.sh)" >&2; exit 2; }
out=research/camera/results
log=$(mktemp); trap 'rm -f "$log"' EXIT
for l in $levels; do
  n=$episodes; tag=$l; [ "$n" = 20 ] || tag=$l-$n
  [ "$l" != 0 ] || { n=50; tag=L0; }
  # a cell's log (a warning per episode) is shown only when the cell fails
  ./bin/energyflow sim eval --bundle "$bundle" --task "$task" --level "$l" --episodes $n --seed 1000 --rate "$rate" \
      "${observe[@]}" "${steps[@]}" --json "$out/$task$suffix$name_extra-$tag.json" > /dev/null 2> "$log" \
    || { echo "levels.sh: level $l of $bundle failed:" >&2; tail -n 5 "$log" >&2; exit 1; }
done
.venv/bin/python -m research.camera.table "$out"/"$task$suffix"*.json
