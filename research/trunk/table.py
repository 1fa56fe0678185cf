"""The trunk sweep's table (issue 51 item 4), from research/trunk/sweep.sh's result files.

One row per trunk: its down dims and parameters (the ∇E graph's initializers), the
planner's sample p50/p90 from `energyflow bench --planner` (1 ORT thread, 40 samples; the
median over the rounds, in which every trunk was timed in turn),
and success at levels 0/S/M/L through the runtime with the stop observing, each with its
Wilson 95 % interval and its difference to the shipped trunk in points.

    python -m research.trunk.table research/trunk/results/*.json
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from energyflow.stats import wilson

LEVELS = ("L0", "S", "M", "L")
#: TASK-TAG-PART.json, PART a level or bench.rN (round N of the timing)
NAME = re.compile(r"^(?P<task>[a-z-]+?)-(?P<tag>shipped|w[0-9-]+)-(?P<part>L0|S|M|L|bench(?:\.r[0-9]+)?)$")


def parameters(bundle: Path) -> Optional[int]:
    """The ∇E graph's parameter count, or None when the bundle is not on this machine."""
    graph = bundle / "energy_grad.onnx"
    if not graph.is_file():
        return None
    import onnx  # the onnx package: only to count a bundle's weights

    m = onnx.load(str(graph))
    return sum(int(np.prod(t.dims)) for t in m.graph.initializer)


def cell(k: int, n: int, ref: Optional[float]) -> str:
    lo, hi = wilson(k, n)
    s = f"{k}/{n} [{100 * lo:.0f}–{100 * hi:.0f}]"
    if ref is not None:
        s += f" ({100 * (k / n - ref):+.0f})"
    return s


def table(paths: Sequence[Path]) -> List[str]:
    """Markdown lines: header, rule, one row per task and trunk (shipped first, then widest)."""
    runs: Dict[tuple, Dict[str, dict]] = {}
    benches: Dict[tuple, List[dict]] = {}
    for p in paths:
        m = NAME.match(p.stem)
        if not m:
            raise ValueError(f"{p}: not a sweep result (TASK-shipped|wA-B-C-L0|S|M|L|bench.rN.json)")
        key = (m["task"], m["tag"])
        runs.setdefault(key, {})
        if m["part"].startswith("bench"):
            benches.setdefault(key, []).append(json.loads(p.read_text()))
        else:
            runs[key][m["part"]] = json.loads(p.read_text())
    head = ("| task | trunk (down dims) | parameters | planner p50 / p90 ms | "
            + " | ".join(f"level {lv[-1] if lv == 'L0' else lv}" for lv in LEVELS) + " |")
    lines = [head, "|" + "---|" * (4 + len(LEVELS))]

    def order(key: tuple) -> tuple:
        task, tag = key
        dims = [int(x) for x in tag[1:].split("-")] if tag != "shipped" else []
        return (task, tag != "shipped", [-d for d in dims])

    for task, tag in sorted(runs, key=order):
        parts = runs[(task, tag)]
        ref_parts = runs.get((task, "shipped"), {})
        rounds = benches.get((task, tag), [])
        some = next(iter(parts.values()), None) or (rounds[0] if rounds else {})
        bundle = Path(some.get("bundle", ""))
        dims = "32/64/128 (shipped)" if tag == "shipped" else tag[1:].replace("-", "/")
        n_par = parameters(bundle) if bundle.name else None
        speed = "–"
        if rounds:
            speed = (f"{np.median([b['p50_ms'] for b in rounds]):.1f} / "
                     f"{np.median([b['p90_ms'] for b in rounds]):.1f}")
        cells = []
        for lv in LEVELS:
            d = parts.get(lv)
            if d is None:
                cells.append("–")
                continue
            ref = ref_parts.get(lv)
            r = ref["successes"] / ref["episodes"] if ref and tag != "shipped" else None
            cells.append(cell(int(d["successes"]), int(d["episodes"]), r))
        lines.append(f"| {task} | {dims} | {f'{n_par / 1e6:.2f} M' if n_par else '–'} | {speed} | "
                     + " | ".join(cells) + " |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    print("\n".join(table(args.files)))


if __name__ == "__main__":
    main()
