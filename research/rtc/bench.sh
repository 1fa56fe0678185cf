#!/usr/bin/env bash
# Issue 51's speed table in one run (docs/engines.md, "Warm starts" and "The planner"): the
# runtime's planner (--planner: the K Euler steps alone) against the full sample (the energy
# at γ and the 16 reference energies too), and Diffusion Policy's DDIM sample on the same
# trunk (a random-init diffusion bundle of the shipped bundles' size: its timing does not
# depend on the weights), 1 ORT thread, 40 samples each, JSON per row in OUT. The whole list
# runs ROUNDS times (default 3) one after the other, so that the shared machine's drifting
# speed falls on every row alike; the table takes each row's median over the rounds.
#   research/rtc/bench.sh OUT [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: research/rtc/bench.sh OUT [ROUNDS]}; mkdir -p "$out"
rounds=${2:-3}
ef=${EF:-./bin/energyflow}
dp=build/dp-random/state39
if [ ! -f "$dp/manifest.json" ]; then
  PYTHONPATH=training .venv/bin/python -m energyflow export --random-init --policy diffusion --down-dims 32 64 128 \
      --state-dim 39 --action-dim 4 --pred-horizon 16 --obs-horizon 2 --action-horizon 8 \
      --name metaworld-random-dp --out "$dp" > /dev/null
fi
b() { local name=$1; shift; "$ef" bench --n 40 --json "$@" > "$out/$name.r$r.json"; }
for r in $(seq 1 "$rounds"); do
  b dp-ddim20 --bundle "$dp" --steps 20
  for k in 20 10 5; do
    b button-press-K$k-full --bundle bundles/metaworld-button-press --steps $k
    b button-press-K$k-planner --bundle bundles/metaworld-button-press --steps $k --planner
  done
  b drawer-open-K20-planner --bundle bundles/metaworld-drawer-open --steps 20 --planner
  b drawer-open-K5-planner --bundle bundles/metaworld-drawer-open --steps 5 --planner
  b assembly-K10-full --bundle bundles/metaworld-assembly --steps 10
  b assembly-K10-planner --bundle bundles/metaworld-assembly --steps 10 --planner
  b assembly-K5-planner --bundle bundles/metaworld-assembly --steps 5 --planner
done
