#!/usr/bin/env bash
# Screenshots of the live demo for the docs: runs `energyflow sim` (the
# simulated Meta-World ButtonPress robot through the runtime, docs/sim.md)
# with a fixed seed at 10 Hz (--rate; the demo's default), opens its live view (docs/telemetry.md) in
# headless Chromium with the token the demo prints, lets the robot work at
# level 0 for PHASE seconds and saves docs/img/demo-level0.png, then switches
# the scene to an out-of-distribution level at once through the bridge's
# POST /episode/level {"level":"L","now":true}, waits PHASE seconds and saves
# docs/img/demo-levelL.png. Prints, per phase, the watched score and its
# threshold as the page shows them at the screenshot (and their median/max
# over the phase), the state term, the safety state and any trip, for a
# caption. About a minute; the demo and the browser share the cores.
#
#   scripts/demo_screenshot.sh [--seed S] [--level S|M|L] [--phase SECONDS] [--out DIR]
#                              [--rate HZ] [--reset-if-stopped]
#
# Defaults: --seed 0 --level L --phase 10 --out docs/img --rate 10.
# --reset-if-stopped: when the energy stop has already tripped before the
# level-0 phase, press the page's RESET once the policy scores, as the demo's
# operator would (the output says so); without it the screenshots show what
# the demo shows. Needs node, /usr/bin/chromium (EF_CHROMIUM overrides) and
# playwright-core in telemetry/browsertest/node_modules (scripts/deps.sh).
# The demo's own output goes to build/demo-screenshot/sim.{out,err}, the
# browser's to build/demo-screenshot/browser.{out,err} (browser.out also
# holds one "PHASE {json}" line per phase). Exits non-zero with a one-line
# error when a step fails (no browser, the demo not up within 60 s, no video
# frames or scores); the demo's process group is stopped on exit in every
# case.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seed=0; level=L; phase=10; out=docs/img; rate=10; reset=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=$2; shift 2 ;;
    --level) level=$2; shift 2 ;;
    --phase) phase=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --reset-if-stopped) reset=1; shift ;;
    *) echo "demo_screenshot.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$level" in S|M|L) ;; *) echo "demo_screenshot.sh: --level $level: want S, M or L" >&2; exit 2 ;; esac
die() { echo "demo_screenshot.sh: $*" >&2; exit 1; }

chromium=${EF_CHROMIUM:-/usr/bin/chromium}
command -v node >/dev/null || die "node not found (the browser is driven by telemetry/browsertest/screenshot.mjs)"
[ -x "$chromium" ] || die "no browser: $chromium not found (set EF_CHROMIUM)"
[ -d telemetry/browsertest/node_modules/playwright-core ] || die "telemetry/browsertest/node_modules/playwright-core missing (run scripts/deps.sh)"

make --no-print-directory build
logs=build/demo-screenshot
mkdir -p "$logs" "$out"

# The demo in its own process group (setsid), so the trap can stop all of it;
# --duration is a safety net should the trap never run.
demo=""
cleanup() {
  [ -n "$demo" ] || return 0
  if kill -0 "$demo" 2>/dev/null; then
    kill -TERM -- "-$demo" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$demo" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$demo" 2>/dev/null || true
  fi
  wait "$demo" 2>/dev/null || true
}
trap cleanup EXIT
setsid ./bin/energyflow sim --task button-press --seed "$seed" --level 0 --rate "$rate" \
  --listen 127.0.0.1:0 --duration "$((4 * phase + 70))s" >"$logs/sim.out" 2>"$logs/sim.err" &
demo=$!

# What the demo prints (sim/harness/demo/demo.go, cmd/energyflow/cmd_run.go):
#   simulated robot: Meta-World …; Modbus HOST:PORT, camera http://HOST:PORT/stream
#   live view: http://HOST:PORT/#token=TOKEN
url=""
for _ in $(seq 120); do
  url=$(sed -n 's|^live view: \(http://[^ ]*\)$|\1|p' "$logs/sim.out" | head -n 1)
  [ -n "$url" ] && break
  kill -0 "$demo" 2>/dev/null || die "the demo exited before its live view was up: $(tail -n 1 "$logs/sim.err")"
  sleep 0.5
done
[ -n "$url" ] || die "the demo did not print its live view within 60 s (see $logs/sim.err)"
case "$url" in *'#token='*) ;; *) die "the live view URL carries no token: $url" ;; esac
bridge=$(sed -n 's|^simulated robot: .*camera \(http://[^ ]*\)/stream$|\1|p' "$logs/sim.out" | head -n 1)
[ -n "$bridge" ] || die "the demo printed no bridge address (simulated robot: … camera http://…/stream)"
echo "demo: pid $demo, live view ${url%%#*}, bridge $bridge, ButtonPress seed $seed at $rate Hz"

# The token goes to the browser through the environment, not the command line.
EF_URL=${url%%#*} EF_VIEW_TOKEN=${url#*#token=} EF_BRIDGE=$bridge EF_LEVEL=$level \
EF_OUT=$out EF_PHASE_MS=$((phase * 1000)) EF_CHROMIUM=$chromium EF_RESET_IF_STOPPED=$reset \
  node telemetry/browsertest/screenshot.mjs >"$logs/browser.out" 2>"$logs/browser.err" \
  || die "$(grep -m1 '^FAIL: ' "$logs/browser.err" || tail -n 1 "$logs/browser.err") (see $logs/browser.err)"
# One line per phase for the caption; the same as JSON ("PHASE {…}") in browser.out.
grep -v '^PHASE \|^RESULT ' "$logs/browser.out"
kill -0 "$demo" 2>/dev/null || die "the demo exited during the screenshots: $(tail -n 1 "$logs/sim.err")"
echo "screenshots: $out/demo-level0.png $out/demo-level$level.png"
