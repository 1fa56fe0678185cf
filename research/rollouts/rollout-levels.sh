#!/usr/bin/env bash
# The policy alone under distribution shift: direct rollouts (the reference
# sampler straight on Meta-World, no runtime, no stop) of the shipped
# EnergyFlow and Diffusion Policy bundles at levels S, M and L (LEVELS="0 S M L"
# adds level 0), 50 episodes on
# the runtime cells' seeds (1000-1049, 500 steps, a sampler seed per episode),
# then the table of research/notes/evaluation-log.md ("Results", RQ4).
#
#   research/rollouts/rollout-levels.sh [TASK ...]        (default: button-press drawer-open)
#   LEVELS="M" K=50 research/rollouts/rollout-levels.sh drawer-open   (EnergyFlow at another K)
#   TABLE_ONLY=1 research/rollouts/rollout-levels.sh      (the table of what is on disk)
#   EF_BUNDLE=DIR VARIANT=NAME research/rollouts/rollout-levels.sh TASK   (a candidate EnergyFlow
#                                                        bundle instead of the shipped one, its
#                                                        rows named NAME; DP is not rerun)
#
# Results go to build/rollouts/<policy>_<task>_<level>[_K<k>][_<variant>].json and are
# kept (delete one to redo it); each takes 2-5 minutes on one core.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tasks=("$@"); [ ${#tasks[@]} -gt 0 ] || tasks=(button-press drawer-open)
levels=${LEVELS:-S M L}
out=build/rollouts
mkdir -p "$out"
export OMP_NUM_THREADS=1
if [ "${TABLE_ONLY:-0}" != 1 ]; then
  for task in "${tasks[@]}"; do
    for lvl in $levels; do
      for pol in energyflow diffusion; do
        b=bundles/metaworld-$task; kk=(); tag=""
        [ "$pol" = diffusion ] && b=$b-dp
        if [ "$pol" = energyflow ] && [ -n "${K:-}" ]; then kk=(--steps "$K"); tag=_K$K; fi
        [ "$pol" = diffusion ] && { [ -n "${K:-}" ] || [ -n "${EF_BUNDLE:-}" ]; } && continue
        if [ "$pol" = energyflow ] && [ -n "${EF_BUNDLE:-}" ]; then
          [ -n "${VARIANT:-}" ] || { echo "rollout-levels.sh: EF_BUNDLE needs VARIANT=NAME (the rows' name)" >&2; exit 2; }
          b=$EF_BUNDLE; tag=${tag}_$VARIANT
        fi
        f=$out/${pol}_${task}_${lvl}$tag.json
        [ -f "$f" ] || .venv/bin/python -m energyflow.rollout "$b" --task "$task" --level "$lvl" \
          --episodes 50 --seed 1000 --max-steps 500 "${kk[@]}" --json "$f" > "${f%.json}.log" 2>&1
      done
    done
  done
fi
.venv/bin/python - "$out" <<'PY'
import json, re, statistics, sys
from pathlib import Path

from energyflow.stats import wilson  # the rollouts' Wilson interval, as the report's

rows = {}
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    m = re.match(r"^(energyflow|diffusion)_([a-z-]+)_([0SML])(?:_K(\d+))?(?:_([A-Za-z0-9.+-]+))?$", f.stem)
    if not m:
        continue
    eps = json.loads(f.read_text()).get("results") or []
    wins = [e for e in eps if e.get("success")]
    steps = [e.get("success_step") or e["steps"] for e in wins]
    rows[(m[2], m[1], (m[4] or "", m[5] or ""), m[3])] = (len(wins), len(eps), statistics.median(steps) if steps else None)
print("| task | policy | 0 | S | M | L |")
print("|---|---|---|---|---|---|")
for task, pol, k in sorted({(t, p, k) for t, p, k, _ in rows}, key=lambda r: (r[0], r[1] != "energyflow", r[2])):
    name = {"energyflow": "EnergyFlow", "diffusion": "Diffusion Policy (ours)"}[pol]
    name += (f", {k[1]}" if k[1] else "") + (f", K = {k[0]}" if k[0] else "")
    cells = []
    for lvl in "0SML":
        r = rows.get((task, pol, k, lvl))
        if r is None:
            cells.append("–"); continue
        w, n, med = r; lo, hi = wilson(w, n)
        cells.append(f"{w}/{n} [{100 * lo:.0f}–{100 * hi:.0f} %]" + (f", {med:.0f} steps" if med is not None else ""))
    print(f"| {task} | {name} | " + " | ".join(cells) + " |")
PY
