"""Level-0 hours as one line per chunk, small enough to track.

``research/stop/level0_hours.sh`` leaves, per chunk of episodes, a ``sim
eval --json`` summary beside a trace of every tick. The traces of an hour
at 20 Hz are megabytes; what success, the stops and the plans' timing need
is in the summaries. ``--pack`` keeps one line per chunk:

    python -m research.stop.chunk_lines --pack OUT.jsonl.gz --label L DIR [DIR ...]

``--table`` prints, per label, the episodes, how they ended, success with
its Wilson 95 % interval, the hours the episodes' steps take at the chunk's
rate (a little more than ``false_trips``' running hours, which leave out
each episode's first ticks before the arm runs) and the median of the
chunks' plan p50 and p90:

    python -m research.stop.chunk_lines --table FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from energyflow.stats import wilson


def end_of(result: dict[str, Any]) -> str:
    """How one episode ended: ``success``, ``truncated`` or ``stop:REASON``."""
    end = str(result.get("end", ""))
    if end == "safety_stop":
        return "stop:" + str(result.get("stop_kind") or "unknown")
    return end or "unknown"


def chunk_line(label: str, path: Path) -> dict[str, Any]:
    """One chunk's summary (``sim eval --json``) cut to what ``--table`` reads."""
    d = json.loads(path.read_text())
    results = d.get("results") or []
    return {
        "label": label,
        "chunk": path.stem,
        "rate_hz": d["rate_hz"],
        "episodes": d["episodes"],
        "successes": d["successes"],
        "steps": sum(int(r["steps"]) for r in results),
        "ends": dict(sorted(Counter(end_of(r) for r in results).items())),
        "failed_seeds": {str(r["seed"]): end_of(r) for r in results if not r.get("success")},
        "inference_p50_ms": d.get("inference_p50_ms"),
        "inference_p90_periods": d.get("inference_p90_periods"),
    }


def pack(out: Path, label: str, dirs: Iterable[Path]) -> int:
    """Write one line per finished chunk (its ``.json``) of dirs; the count."""
    lines = [chunk_line(label, p) for d in dirs for p in sorted(Path(d).glob("*.json"))]
    with gzip.open(out, "wt") as f:
        for line in lines:
            f.write(json.dumps(line, sort_keys=True) + "\n")
    return len(lines)


def read(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every chunk line of the packed files, in order."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        with gzip.open(p, "rt") as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per label, in the order labels first appear."""
    out = ["| driving | chunks | episodes | ended | succeeded [Wilson 95 %] | hours (steps ÷ rate) | plans p50 (ms) / p90 (periods), chunks' median |",
           "|---|---|---|---|---|---|---|"]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    for label in labels:
        rs = [r for r in rows if r["label"] == label]
        n = sum(r["episodes"] for r in rs)
        k = sum(r["successes"] for r in rs)
        ends: Counter[str] = Counter()
        for r in rs:
            ends.update(r["ends"])
        hours = sum(r["steps"] / r["rate_hz"] for r in rs) / 3600
        lo, hi = wilson(k, n)
        p50 = statistics.median(r["inference_p50_ms"] for r in rs)
        p90 = statistics.median(r["inference_p90_periods"] for r in rs)
        ended = ", ".join(f"{e} {c}" for e, c in sorted(ends.items()))
        out.append(f"| {label} | {len(rs)} | {n} | {ended} | {k}/{n} [{100 * lo:.1f}–{100 * hi:.1f} %] | "
                   f"{hours:.3f} | {p50:.0f} / {p90:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", type=Path, help="write the chunks of DIRs here (.jsonl.gz)")
    ap.add_argument("--label", help="with --pack: what this driving is called in the table")
    ap.add_argument("--table", action="store_true", help="print the table of the packed FILEs")
    ap.add_argument("paths", nargs="+", type=Path, help="level0_hours.sh folders (--pack) or packed files (--table)")
    a = ap.parse_args(argv)
    if bool(a.pack) == a.table:
        ap.error("give one of --pack OUT or --table")
    if a.pack:
        if not a.label:
            ap.error("--pack needs --label")
        missing = [str(p) for p in a.paths if not p.is_dir()]
        if missing:
            ap.error(f"not a folder: {', '.join(missing)}")
        n = pack(a.pack, a.label, a.paths)
        if n == 0:
            ap.error("no finished chunk (DIR/*.json) in the folders given")
        print(f"{n} chunks -> {a.pack}")
        return 0
    print(table(read(a.paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
