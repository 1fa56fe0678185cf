#!/usr/bin/env bash
# Traces for the tracking monitor's sustained rule (docs/safety.md, "Sustained"): every
# tick's tracking difference through the runtime, 10 Hz, lockstep, the stop observing.
#   pushes: the shipped state bundles and the ButtonPress camera bundle, 10 episodes,
#           seeds 50000+, the 8 cm push at step 30 (the fault table's protocol)
#   level 0: the five state bundles, 20 episodes, seeds 51000+
# Writes build/tracking/*.json(l) (OUT=DIR: there instead); pack them as
# research/faults/tracking/traces.tar.xz. PUSHES_ONLY=1 skips the level-0 episodes.
#   research/faults/tracking/collect.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
o=${OUT:-build/tracking}; mkdir -p "$o"
ef=${EF:-./bin/energyflow}
push() { # name, then sim eval flags
  local n=$1; shift
  "$ef" sim eval "$@" --episodes 10 --seed 50000 --rate 10 --fault push --fault-step 30 --max-steps 80 \
      --observe-only --scores "$o/$n-push.jsonl" --json "$o/$n-push.json" > /dev/null 2>> "$o/log"
}
for t in button-press drawer-open assembly bin-picking hammer; do push "$t" --task "$t"; done
push button-press-camera --task button-press --bundle bundles/metaworld-button-press-camera
[ -z "${PUSHES_ONLY:-}" ] || exit 0
for t in drawer-open assembly bin-picking hammer button-press; do
  "$ef" sim eval --task "$t" --episodes 20 --seed 51000 --rate 10 --observe-only \
      --scores "$o/$t-level0.jsonl" --json "$o/$t-level0.json" > /dev/null 2>> "$o/log"
done
