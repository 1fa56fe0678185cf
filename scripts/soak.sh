#!/usr/bin/env bash
# Soak benchmark of the runtime (issue: control loop): the simulated robot
# demo with the default bundle, 10 minutes at 10 Hz and at 30 Hz (override
# with SOAK_DURATION), no viewer attached. Prints one table per rate and
# writes them to build/soak-<rate>hz.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dur=${SOAK_DURATION:-10m}
make --no-print-directory build
mkdir -p build
for rate in ${SOAK_RATES:-10 30}; do
  ./bin/energyflow sim --rate "$rate" --duration "$dur" --listen 127.0.0.1:0 \
    --soak-report "build/soak-${rate}hz.md" > "build/soak-${rate}hz.log" 2>&1 || true
  cat "build/soak-${rate}hz.md"
  echo
done
