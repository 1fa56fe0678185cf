"""The screens of research/interventions/README.md as one Markdown table: each file an
``energyflow.rollout --json`` run (gzipped), named ``<policy>-<screen>.json.gz``; success with
Wilson 95 % intervals and the seeds that failed.

    .venv/bin/python -m research.interventions.table research/interventions/results/*-scenes.json.gz \\
        research/interventions/results/*-1000.json.gz
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import List, Sequence

from energyflow.stats import wilson


def row(path: Path) -> str:
    """One run's row: the policy and screen from the file's name, success, the failed seeds."""
    r = json.loads(gzip.decompress(path.read_bytes()))
    name = path.name.removesuffix(".json.gz")
    policy, _, screen = name.rpartition("-")
    seeds = [x["seed"] for x in r["results"]]
    lo, hi = wilson(r["successes"], r["episodes"])
    failed = " ".join(str(x["seed"]) for x in r["results"] if not x["success"]) or "none"
    late = f"{r.get('min_late', 0)}–{r.get('max_late', 0)}"
    return (f"| {policy} | seeds {min(seeds)}–{max(seeds)}, plans {late} steps late "
            f"| {r['successes']}/{r['episodes']} [{lo * 100:.0f}–{hi * 100:.0f} %] | {failed} |")


def table(paths: Sequence[Path]) -> List[str]:
    return ["| policy | scenes | success [Wilson 95 %] | failed |", "|---|---|---|---|"] + [row(p) for p in paths]


if __name__ == "__main__":
    print("\n".join(table([Path(a) for a in sys.argv[1:]])))
