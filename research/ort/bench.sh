#!/usr/bin/env bash
# The ONNX Runtime settings on shipped bundles' ∇E graphs (issue 51, item 4):
# engines' BenchmarkGradCallSettings (graph optimisation level × how tensors
# are passed × 1 or 2 intra-op threads), ROUNDS rounds one after another, one
# output file per bundle with the host it ran on. Run it alone on the machine.
#
#   research/ort/bench.sh OUTDIR BUNDLE...      # e.g. research/ort/results bundles/metaworld-button-press
#   .venv/bin/python -m research.ort.table OUTDIR/*.txt
#
# ROUNDS (default 3) and CALLS per setting and round (default 200); SETTINGS,
# a regular expression over the settings' names (opt=…/pass=…/threads=…),
# runs only those; BUSY=N runs N busy loops beside it, as a loaded host;
# SUFFIX is added to the output file's name.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 OUTDIR BUNDLE..." >&2
    exit 2
fi
out=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-3}
CALLS=${CALLS:-200}
SETTINGS=${SETTINGS:-.}
BUSY=${BUSY:-0}
mkdir -p "$out"
(cd "$root" && go test -c -o build/engines-settings.test ./engines/)
busy=()
trap 'for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for _ in $(seq "$BUSY"); do
    (while :; do :; done) &
    busy+=($!)
done
for bundle in "$@"; do
    [ -f "$bundle/manifest.json" ] || { echo "$0: $bundle: no manifest.json" >&2; exit 2; }
    name=$(basename "$bundle")
    f="$out/$name${SUFFIX:-}.txt"
    {
        echo "# bundle: $name"
        echo "# host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
        echo "# busy loops beside it: $BUSY"
        echo "# command: ROUNDS=$ROUNDS CALLS=$CALLS SETTINGS='$SETTINGS' BUSY=$BUSY research/ort/bench.sh $out $bundle"
    } > "$f"
    abs=$(cd "$bundle" && pwd)
    for r in $(seq "$ROUNDS"); do
        echo "# round $r" >> "$f"
        (cd "$root/engines" && ENERGYFLOW_BENCH_BUNDLE=$abs ENERGYFLOW_ROOT=$root ../build/engines-settings.test \
            -test.run '^$' -test.bench "^BenchmarkGradCallSettings\$/$SETTINGS" -test.benchtime "${CALLS}x" -test.benchmem) \
            | grep '^Benchmark' >> "$f"
    done
    echo "wrote $f"
done
