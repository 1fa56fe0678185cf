#!/usr/bin/env bash
# The demo as a person watches it: runs `energyflow sim --task TASK` at
# level 0 (10 Hz, its defaults) with its live view open in headless
# Chromium on the same machine for MINUTES (telemetry/browsertest/watch.mjs),
# optionally beside BUSY busy loops at normal priority, then counts from the
# demo's log the episodes that ended, how many succeeded, and every stop,
# with Wilson 95 % intervals. With --level-check it then uses the page's
# Episode panel as an operator would: a new episode at level L (the stop must
# trip), then one at level 0 (the arm must move again within 5 s).
#
#   scripts/watch_demo.sh [--task T] [--minutes M] [--busy N] [--level-check]
#                         [--out DIR] [-- extra energyflow sim flags]
#
# Defaults: --task button-press --minutes 30 --busy 0, --out build/watch/TASK.
# ButtonPress runs `make demo`'s bundle (the Makefile's DEMO_BUNDLE, from the
# camera) unless a --bundle follows `--`; the other tasks their state bundles.
# The browser runs as a user's browser does: run as root, this script drops
# CAP_SYS_NICE for it (setpriv), since Chromium run as root raises its browser
# and GPU processes to niceness -8, next to the demo's -10, which a browser
# a person runs without privileges cannot; ENERGYFLOW_WATCH_ROOT_BROWSER=1
# keeps the privilege (runs before stop 70 had it).
# Writes DIR/sim.{out,err}, DIR/browser.{out,err}, DIR/metrics.txt (the
# runtime's /metrics at the end), DIR/summary.json (every level-0 episode
# that ended, with its scene seed and time, and every stop; the runtime's
# per-stage latencies over its last 512 of each, from /api/stats at the end of
# the watch: docs/telemetry.md, "Stage latency"; and the ticks that missed
# their deadline, energyflow_tick_overruns_total) and prints the summary.
# Exits 1 with a one-line error when a step fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
task=button-press; minutes=30; busy=0; check=0; out=""; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --task) task=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --busy) busy=$2; shift 2 ;;
    --level-check) check=1; shift ;;
    --out) out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "watch_demo.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-build/watch/$task}
if [ "$task" = button-press ] && [[ " ${extra[*]} " != *" --bundle "* ]]; then
  extra=(--bundle "$(make --no-print-directory -s -C "$root" print-demo-bundle)" "${extra[@]}")
fi
die() { echo "watch_demo.sh: $*" >&2; exit 1; }
[ -d telemetry/browsertest/node_modules/playwright-core ] || die "playwright-core missing (run scripts/deps.sh)"
bin=${ENERGYFLOW_BIN:-./bin/energyflow}
[ -x "$bin" ] || make --no-print-directory build >/dev/null
mkdir -p "$out"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq "$busy"); do
  setsid bash -c 'while :; do :; done' & pids+=($!)
done
watch_s=$((minutes * 60))
setsid "$bin" sim --task "$task" --listen 127.0.0.1:0 --duration "$((watch_s + 120))s" "${extra[@]}" \
  >"$out/sim.out" 2>"$out/sim.err" &
demo=$!; pids+=("$demo")
url=""
for _ in $(seq 120); do
  url=$(sed -n 's|^live view: \(http://[^ ]*\)$|\1|p' "$out/sim.out" | head -n 1)
  [ -n "$url" ] && break
  kill -0 "$demo" 2>/dev/null || die "the demo exited: $(tail -n 1 "$out/sim.err")"
  sleep 0.5
done
[ -n "$url" ] || die "the demo printed no live view URL within 60 s"
started=$(date -u +%Y-%m-%dT%H:%M:%S)
browser=(node); root_browser=0
if [ "$(id -u)" = 0 ]; then
  if [ "${ENERGYFLOW_WATCH_ROOT_BROWSER:-0}" = 1 ]; then
    root_browser=1
  else
    command -v setpriv >/dev/null || die "setpriv missing (util-linux): needed to run the browser without root's CAP_SYS_NICE"
    browser=(setpriv --bounding-set -sys_nice --inh-caps -sys_nice node)
  fi
fi
EF_URL=${url%%#*} EF_TOKEN=${url#*#token=} EF_WATCH_MS=$((watch_s * 1000)) EF_LEVEL_CHECK=$check \
EF_SCREENSHOT="$out/end.png" "${browser[@]}" telemetry/browsertest/watch.mjs >"$out/browser.out" 2>"$out/browser.err" \
  || die "$(grep -m1 '^FAIL: ' "$out/browser.err" || tail -n 1 "$out/browser.err") (see $out/browser.err)"
curl -sf -H "Authorization: Bearer ${url#*#token=}" "$(b=${url%%#*}; echo "${b%/}")/api/stats" >"$out/stats.json" || echo '{}' >"$out/stats.json"
curl -sf -H "Authorization: Bearer ${url#*#token=}" "$(b=${url%%#*}; echo "${b%/}")/metrics" >"$out/metrics.txt" || : >"$out/metrics.txt"
kill -INT "$demo" 2>/dev/null || true
wait "$demo" 2>/dev/null || true
.venv/bin/python - "$out" "$task" "$minutes" "$busy" "$started" "$root_browser" <<'PY'
import json, re, sys

from energyflow.stats import wilson

out, task, minutes, busy, started, root_browser = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6] == "1"
browser = json.loads(next(l[7:] for l in open(f"{out}/browser.out") if l.startswith("RESULT ")))
check_at = browser.get("check_started_at")
kv = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
ended, stops, refused = [], [], 0
watch_end = None
for line in open(f"{out}/sim.err"):
    f = {k: v.strip('"') for k, v in kv.findall(line)}
    if f.get("msg") == "demo: episode ended" and f.get("level") == "0":
        ended.append({"time": f["time"], "seed": int(f["seed"]), "success": f["success"] == "true", "steps": int(f["steps"])})
    elif f.get("msg") == "safety: stop" and f.get("reason") != "operator":
        stops.append({"time": f["time"], "tick": int(f["tick"]), "reason": f["reason"], "message": f.get("message", "")})
episodes = [e["success"] for e in ended]
watched = [s for s in stops if not check_at or s["time"] < check_at]
n, k = len(episodes), sum(episodes)
stages = json.load(open(f"{out}/stats.json")).get("stages", [])
metric = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(energyflow_tick_overruns_total|energyflow_tick_duration_seconds_count) (\S+)$",
                                                            open(f"{out}/metrics.txt").read(), re.M)}
ticks = {"ticks": int(metric["energyflow_tick_duration_seconds_count"]), "overruns": int(metric["energyflow_tick_overruns_total"])} if len(metric) == 2 else None
bundle = next((l.split()[1].rstrip(",") for l in open(f"{out}/sim.out") if l.startswith("policy: ")), None)
summary = {"task": task, "bundle": bundle, "minutes": minutes, "busy_loops": busy, "viewer": browser, "stages": stages, "ticks": ticks, "browser_may_raise_priority": root_browser,
           "episodes_level0": n, "successes": k, "success_rate": round(k / n, 3) if n else None, "success_ci95": [round(v, 3) for v in wilson(k, n)],
           "stops_while_watched": len(watched), "stops": stops, "episodes": ended}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(f"{task} ({bundle}): {minutes:g} min watched ({browser['frames_decoded']} frames, {browser['fps']:.1f} fps), {busy} busy loops: "
      f"{k}/{n} level-0 episodes succeeded {summary['success_ci95']}, {len(watched)} stops while watched at level 0")
if ticks:
    print(f"  ticks {ticks['ticks']}, {ticks['overruns']} past their deadline (energyflow_tick_overruns_total)")
if stages:
    print("  stages (ms p50/p90): " + " · ".join(f"{s['stage']} {s['p50_ms']:.3g}/{s['p90_ms']:.3g}" for s in stages))
for s in stops:
    when = "level check" if s not in watched else "watched"
    print(f"  stop ({when}) at tick {s['tick']} ({s['time']}): {s['reason']}: {s['message'][:140]}")
for key in ("level_L", "level_0_again"):
    if key in browser:
        print(f"  {key}: {json.dumps(browser[key])}")
PY
