#!/usr/bin/env bash
# Issue 51's load target: Assembly driven at 10 Hz beside four busy loops at the runtime's own
# priority (plans about two periods late), level 0, the stop observing; the trips are counted
# by replaying the traces against the shipped 10 Hz threshold (README.md here).
#
#   research/rtc/load-hours/run.sh OUT HOURS SEED [sim eval flags, e.g. --delay 1]
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:?usage: run.sh OUT HOURS SEED [sim eval flags]}; hours=${2:?}; seed=${3:?}; shift 3
pids=()
for _ in 1 2 3 4; do python3 -c 'while True: pass' & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
research/stop/level0_hours.sh --out "$out" --hours "$hours" --seed "$seed" --tasks assembly --chunk 10 --rate 10 ${1:+-- "$@"}
