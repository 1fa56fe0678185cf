"""What the issue's join statistic gives where there is no join: the same largest-of-N, at ticks inside chunks.

    .venv/bin/python -m research.rtc.joins_null TRACES.jsonl[.gz] ...   (sim eval --scores traces)
    .venv/bin/python -m research.rtc.joins_null --pack OUT.jsonl.gz TRACES.jsonl   (keep the fields it reads)

Issue 51's measure of how chunks join is, per episode, the largest change of
the commanded velocity at a chunk boundary (the tick that runs a new chunk's
first action), against the median change between consecutive actions of one
chunk; the median of that ratio over episodes, target 1.5. A largest is set
against a median: an episode with 12 boundaries scores well above 1 even if
its boundaries were no different from any other tick. This reads the
per-tick traces `sim eval --scores` writes (command, chunk, chunk_first) and
puts beside the boundary ratio the same statistic at *pseudo-boundaries*:
for each boundary, the inside tick OFFSET ticks later (default half the
median chunk run), where no chunk changes. If the two ratios are close, the
chunks join as smoothly as a chunk runs, and the 1.5 is out of reach of any
join. The median boundary change over the median inside change is printed
too.
"""
from __future__ import annotations

import argparse
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Dict, Iterable, List, Optional, Sequence, Tuple


@dataclass
class Episode:
    """One episode's velocity changes: at boundaries, inside chunks, and each tick's kind in order."""

    boundary: List[float] = field(default_factory=list)
    inside: List[float] = field(default_factory=list)
    ticks: List[Tuple[str, float]] = field(default_factory=list)  # ("b" | "i", change), in tick order
    runs: List[int] = field(default_factory=list)  # ticks each chunk ran for


def _dist(a: Sequence[float], b: Sequence[float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


def episodes(lines: Iterable[str]) -> Dict[int, Episode]:
    """A trace's episodes (by seed, so that traces may be concatenated): their running ticks
    split as runtime.joinMeter splits them."""
    out: Dict[int, Episode] = {}
    prev: Optional[dict] = None
    run = 0
    for line in lines:
        d = json.loads(line)
        ep = out.setdefault(int(d.get("seed", d["episode"])), Episode())  # seeds tell apart chunks' episodes
        running = d.get("state") == "RUNNING" and d.get("command") is not None
        if not running:
            prev = None
            continue
        if prev is not None and prev.get("seed") == d.get("seed") and prev["episode"] == d["episode"] and d.get("chunk", -1) >= 0:
            c = _dist(d["command"], prev["command"])
            if d.get("chunk_first"):
                ep.boundary.append(c)
                ep.ticks.append(("b", c))
                if run:
                    ep.runs.append(run)
                run = 1
            elif d.get("chunk") == prev.get("chunk"):
                ep.inside.append(c)
                ep.ticks.append(("i", c))
                run += 1
        prev = d
    return out


def pseudo(ep: Episode, offset: int) -> List[float]:
    """The change at the inside tick offset ticks after each boundary (where there is one)."""
    out = []
    for k, (kind, _) in enumerate(ep.ticks):
        if kind == "b" and k + offset < len(ep.ticks) and ep.ticks[k + offset][0] == "i" and \
                all(t == "i" for t, _ in ep.ticks[k + 1:k + offset + 1]):
            out.append(ep.ticks[k + offset][1])
    return out


def summarize(eps: Iterable[Episode], offset: Optional[int] = None) -> dict:
    """As the evaluation's table reads joins (`sim eval`'s join_ratio): the median over episodes
    of each episode's largest boundary change, over the median over episodes of each episode's
    median inside change; beside it the same with the largest pseudo-boundary change, and with
    each episode's median boundary change."""
    eps = [e for e in eps if e.boundary and e.inside]
    if not eps:
        raise SystemExit("joins_null: no episode with both boundaries and inside ticks")
    runs = [r for e in eps for r in e.runs]
    off = offset if offset is not None else max(1, int(median(runs)) // 2 if runs else 1)
    inside = median(median(e.inside) for e in eps)
    ps = [max(p) for p in (pseudo(e, off) for e in eps) if p]
    return {"episodes": len(eps), "offset": off, "chunk_run_median": median(runs) if runs else None,
            "boundaries_median": median(len(e.boundary) for e in eps), "inside_median": inside,
            "largest_boundary_ratio": median(max(e.boundary) for e in eps) / inside,
            "largest_pseudo_ratio": median(ps) / inside if ps else None,
            "median_boundary_ratio": median(median(e.boundary) for e in eps) / inside}


#: the trace fields this reads (--pack keeps only these)
FIELDS = ("episode", "tick", "state", "chunk", "chunk_first", "command")


def _open(f: Path):
    return gzip.open(f, "rt") if f.suffix == ".gz" else open(f)


def pack(src: Path, out: Path) -> None:
    """src's trace with only FIELDS, gzip-compressed: small enough to track."""
    with _open(src) as fi, gzip.open(out, "wt") as fo:
        for line in fi:
            d = json.loads(line)
            fo.write(json.dumps({k: d[k] for k in FIELDS if k in d}, separators=(",", ":")) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+", type=Path, help="sim eval --scores JSONL files")
    p.add_argument("--offset", type=int, default=None, help="ticks after a boundary (default: half the median chunk run)")
    p.add_argument("--pack", type=Path, help="write the one trace given, cut to the fields read and gzipped, here")
    a = p.parse_args(argv)
    if a.pack is not None:
        if len(a.traces) != 1:
            p.error("--pack takes one trace")
        pack(a.traces[0], a.pack)
        return 0
    print("| traces | episodes | chunk run (median ticks) | boundaries / episode (median) | largest boundary / median inside | "
          "largest pseudo-boundary / median inside | median boundary / median inside |")
    print("|---|---|---|---|---|---|---|")
    for f in a.traces:
        with _open(f) as fh:
            s = summarize(episodes(fh).values(), a.offset)
        lp = f"×{s['largest_pseudo_ratio']:.1f}" if s["largest_pseudo_ratio"] is not None else "–"
        print(f"| {f.name.split('.')[0]} | {s['episodes']} | {s['chunk_run_median']} | {s['boundaries_median']} | "
              f"×{s['largest_boundary_ratio']:.1f} | {lp} (offset {s['offset']}) | ×{s['median_boundary_ratio']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
