#!/usr/bin/env bash
# Does the watching browser's priority cause the late ticks at its start-up?
# (issue 48, stop 70). Runs scripts/watch_demo.sh on the Hammer camera bundle
# (20 Hz, its certified rate) for MINUTES at a time, PAIRS times each way,
# alternating: with the browser as root, free to raise its own processes to
# niceness -8 (ENERGYFLOW_WATCH_ROOT_BROWSER=1, how every watched run before
# stop 70 ran), and as a user's browser (the script's default since). Each run
# starts a fresh demo and a fresh browser, so each holds one browser start-up.
# Copies each summary to OUT/{root,user}-I.json and prints the table.
#
#   research/camera/demo-view/browser_priority.sh [--pairs 5] [--minutes 1] [--out DIR]
#
# Run it alone on the machine: other load is what it measures.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
pairs=5; minutes=1; out=research/camera/demo-view/browser-priority
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "browser_priority.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
for i in $(seq "$pairs"); do
  order="root user"; [ $((i % 2)) = 0 ] && order="user root"
  for how in $order; do
    w=build/browser-priority/$how-$i
    flag=0; [ "$how" = root ] && flag=1
    ENERGYFLOW_WATCH_ROOT_BROWSER=$flag scripts/watch_demo.sh --task hammer --minutes "$minutes" --out "$w" \
      -- --bundle bundles/metaworld-hammer-camera --seed $((100 + 10 * i))
    cp "$w/summary.json" "$out/$how-$i.json"
  done
done
.venv/bin/python -m research.watch_demo.table "$out"/*.json
