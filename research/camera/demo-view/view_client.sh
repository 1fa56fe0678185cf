#!/usr/bin/env bash
# The Hammer camera demo, scenes 130 on, three minutes, the stop observing, no
# browser, but a client (curl) pulling the simulator's display view (/view) the
# whole time, so the bridge renders it every step as when a browser watches
# (research/camera/demo-view/README.md, stop 70). Writes build/hc-viewcurl-130
# (view_bytes.txt: what the view client received).
#
#   research/camera/demo-view/view_client.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=build/hc-viewcurl-130
mkdir -p $d
./bin/energyflow sim --bundle bundles/metaworld-hammer-camera --seed 130 --duration 180s --observe-only --scores $d/demo.jsonl > $d/sim.out 2> $d/sim.err &
p=$!
v=""
for _ in $(seq 120); do
  v=$(sed -n 's|^live view video: \(http://[^ ]*/view\).*|\1|p' $d/sim.out | head -1); [ -n "$v" ] && break; sleep 0.5
done
[ -n "$v" ] || { echo "view_client.sh: the demo printed no view URL (see $d/sim.err)" >&2; kill $p; exit 1; }
echo "view $v"
# until the demo ends and closes the stream (or 185 s); counts what came
(curl -s -N --max-time 185 "$v" || true) | wc -c > $d/view_bytes.txt &
wait
echo "the view client received $(cat $d/view_bytes.txt) bytes"
.venv/bin/python -m research.camera.critical $d
