#!/usr/bin/env bash
# Times the Go sampler (ONNX Runtime) and the Python reference sampler (torch
# eager) on the same bundle, in one run, and prints a markdown table with
# their ratio: one ∇E call, and whole samples at K=10 and K=20, batch 1.
#
#   scripts/bench-engines.sh [BUNDLE]      (default build/bundles/papersize,
#                                           made by `make bench-engines-bundle`)
#   N=20 GRAD_N=50 GO_THREADS=1 TORCH_THREADS=2 ROUNDS=2 scripts/bench-engines.sh
#
# Go and torch are measured in alternating rounds so both see the same
# machine load; each cell is the median over rounds of per-round p50s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=${1:-build/bundles/papersize}
n=${N:-20}
grad_n=${GRAD_N:-50}
threads=${GO_THREADS:-1}        # ONNX Runtime intra-op threads (engines.DefaultIntraOpThreads)
torch_threads=${TORCH_THREADS:-2}
rounds=${ROUNDS:-2}
py=.venv/bin/python
out=build/bench
export ENERGYFLOW_ROOT=$root

[ -f "$bundle/manifest.json" ] || { echo "bench-engines: no bundle at $bundle — run make bench-engines-bundle" >&2; exit 1; }
bundle_abs=$(cd "$bundle" && pwd)
[ -x "$py" ] || { echo "bench-engines: no $py — run make deps" >&2; exit 1; }
mkdir -p "$out"
go build -o "$out/energyflow" ./cmd/energyflow
go test -c -o "$out/engines.test" ./engines/

for r in $(seq 1 "$rounds"); do
  echo "bench-engines: round $r/$rounds (go)" >&2
  ENERGYFLOW_BENCH_BUNDLE="$bundle_abs" "$out/engines.test" -test.run '^$' \
    -test.bench "^BenchmarkGradCall/threads=$threads\$" -test.benchtime "${grad_n}x" -test.benchmem > "$out/go-grad-$r.txt"
  for k in 10 20; do
    "$out/energyflow" bench --bundle "$bundle" --steps "$k" --n "$n" --threads "$threads" --no-references --json > "$out/go-k$k-$r.json"
  done
  "$out/energyflow" bench --bundle "$bundle" --steps 20 --n "$n" --threads "$threads" --json > "$out/go-k20_refs-$r.json"
  echo "bench-engines: round $r/$rounds (torch)" >&2
  PYTHONPATH=training OMP_NUM_THREADS=$torch_threads MKL_NUM_THREADS=$torch_threads "$py" scripts/bench-engines-torch.py \
    --bundle "$bundle" --threads "$torch_threads" --n "$n" --grad-n "$grad_n" --steps 10 20 > "$out/torch-$r.json"
done

"$py" - "$out" "$rounds" "$bundle" "$threads" "$torch_threads" <<'PY'
import json, re, statistics, sys, platform, os
out, rounds, bundle, threads, torch_threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
R = range(1, rounds + 1)
med = statistics.median
go_grad = []
for r in R:
    m = re.search(r"BenchmarkGradCall/threads=\d+\S*\s+\d+\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op", open(f"{out}/go-grad-{r}.txt").read())
    go_grad.append((float(m.group(1)) / 1e6, int(m.group(3))))
rows = [("10", "sample K=10: 10 ∇E calls + energy at γ"), ("20", "sample K=20: 20 ∇E calls + energy at γ"),
        ("20_refs", "sample K=20 + centered reward (+1 call of M=16 reference rows)")]
go = {k: [json.load(open(f"{out}/go-k{k}-{r}.json")) for r in R] for k, _ in rows}
tc = [json.load(open(f"{out}/torch-{r}.json")) for r in R]
man = json.load(open(os.path.join(bundle, "manifest.json")))
model = man.get("model", {})
print(f"bundle `{bundle}`: down dims {model.get('down_dims')}, T_p={man['pred_horizon']}, D_a={man['action_dim']}, "
      f"cond_dim={man['cond_dim']}, M={len(man['reference_actions'])}; Go {threads} ORT thread(s), torch {torch_threads} threads; "
      f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
      f"torch {tc[0]['torch']} ({tc[0]['blas']}, weights loaded {tc[0]['weights_loaded']}); Go: {go['10'][0]['backend']}\n")
print("| batch 1 | Go + ONNX Runtime: p50 (min) | torch eager: p50 (min) | Go / torch: p50 (min) | CPU time: Go / torch | Go time outside ORT | Go allocs/op |")
print("|---|---|---|---|---|---|---|")
g = med(x[0] for x in go_grad)
t = med(x["grad_call"]["p50_ms"] for x in tc); tm = min(x["grad_call"]["min_ms"] for x in tc)
print(f"| one ∇E call (Go: mean of go test -bench) | {g:.2f} ms | {t:.2f} ms ({tm:.2f}) | {g/t:.2f}× | — / {med(x['grad_call']['cpu_ms'] for x in tc):.1f} ms | — | {max(x[1] for x in go_grad)} |")
for k, label in rows:
    gp = med(x["p50_ms"] for x in go[k]); gm = min(x["min_ms"] for x in go[k]); gc = med(x["cpu_ms_per_sample"] for x in go[k])
    t = med(x[f"sample_k{k}"]["p50_ms"] for x in tc); tm = min(x[f"sample_k{k}"]["min_ms"] for x in tc); tcpu = med(x[f"sample_k{k}"]["cpu_ms"] for x in tc)
    outside = med(x["outside_backend_percent"] for x in go[k]); allocs = max(x["allocs_per_sample"] for x in go[k])
    print(f"| {label} | {gp:.1f} ms ({gm:.1f}) | {t:.1f} ms ({tm:.1f}) | {gp/t:.2f}× ({gm/tm:.2f}×) | {gc:.0f} / {tcpu:.0f} ms = {gc/tcpu:.2f}× | {outside:.2f} % | {allocs:g} |")
PY
