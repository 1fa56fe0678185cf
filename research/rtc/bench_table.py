"""Issue 51's speed table from `energyflow bench --json` files written in one run by
research/rtc/bench.sh: per bundle and K, the sample p50/p90 of the full sample (K ∇E
calls, the energy at γ and the reference energies) or of the planner's (the K steps
alone, `--planner`), and the ratio of its p50 to Diffusion Policy's DDIM sample on the
same trunk (the files named dp-*). Files NAME.rN.json are rounds of one row: the row
gives the medians of their p50 and p90, and the ratio of the medians.

    .venv/bin/python -m research.rtc.bench_table research/rtc/bench/*.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
import statistics
from collections import defaultdict
from typing import Dict, List, Sequence


def _median(xs: List[float]) -> float:
    return statistics.median(xs)


def table(paths: Sequence[Path]) -> List[str]:
    rounds: Dict[str, List[dict]] = defaultdict(list)
    for p in paths:
        rounds[Path(p).name.split(".")[0]].append(json.loads(Path(p).read_text()))
    dps = [k for k in rounds if k.startswith("dp-")]
    if len(dps) != 1:
        raise SystemExit(f"bench_table: want one dp-* row among the files, got {dps}")
    dp = rounds.pop(dps[0])
    dp50, dp90 = _median([d["p50_ms"] for d in dp]), _median([d["p90_ms"] for d in dp])
    out = [f"Diffusion Policy, DDIM S={dp[0]['steps']} (same trunk): p50 {dp50:.1f} ms, p90 {dp90:.1f} ms "
           f"(median of {len(dp)} rounds)", "",
           "| bundle | K | what is sampled | p50 (ms) | p90 (ms) | p50 / Diffusion Policy's |",
           "|---|---|---|---|---|---|"]
    rows = sorted(rounds.values(), key=lambda r: (Path(r[0]["bundle"]).name, -r[0]["steps"], bool(r[0].get("planner"))))
    for r in rows:
        d = r[0]
        what = "planner: the K steps" if d.get("planner") else f"full: K steps, energy at γ, {d['references']} references"
        p50, p90 = _median([x["p50_ms"] for x in r]), _median([x["p90_ms"] for x in r])
        out.append(f"| {Path(d['bundle']).name} | {d['steps']} | {what} | {p50:.1f} | {p90:.1f} | {p50 / dp50:.2f} |")
    return out


if __name__ == "__main__":
    print("\n".join(table([Path(a) for a in sys.argv[1:]])))
