"""Real-time chunking cells (``sim eval --chunking M --delay D --json``, tracked in
research/rtc/results/) as one Markdown table: success with Wilson 95 %
intervals, the issue's join measure (median over episodes of each episode's
largest change of the commanded velocity at a chunk boundary, against the
median change inside a chunk), the plan switch at a boundary (the new chunk's
first action against what the replaced chunk had planned for that tick), how
plans start (cold, or warm from the committed plan: ``--warm-sigma``; with
``--planners N``, how many may be in flight at once; ``--predict-state``,
from the predicted state: both at commit dd6cd31, not kept), the
plans' latency and the stops.

    .venv/bin/python -m research.rtc.table research/rtc/results/*.json*

A summary may be kept gzipped (``.json.gz``), as the later cells are, to keep the checkout light.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from energyflow.stats import wilson


def _f(x: Optional[float], fmt: str = "{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


def chunking(s: dict) -> str:
    m = s.get("chunking", "off")
    if s.get("handover"):  # stop 69's hand-over (--handover N, commit 25322f0, not kept)
        return f"hand-over {s['handover']}"
    if m == "off":
        return "off"
    out = f"{m} {s.get('chunking_strength', 1):g}"
    soft = s.get("chunking_soft", -1)
    if s.get("chunking_hard_only"):
        soft = 0
    return out + ("" if soft == -1 else f", soft {soft}")


def start(s: dict) -> str:
    """How plans start (:func:`cold_or_warm`), and the share of plans sampled on the bundle's late
    network where it planned any (``late_net_plans``, loop.late_policy)."""
    out = cold_or_warm(s)
    rs = s.get("results") or []
    late, plans = sum(r.get("late_net_plans", 0) for r in rs), sum(r.get("inferences", 0) for r in rs)
    if late and plans:
        out += f"; late network {100 * late / plans:.0f} %"
    return out


def cold_or_warm(s: dict) -> str:
    """Cold or warm (--warm-sigma, --warm-steps), with the options tried and not kept
    marked: --warm-max-age (commit df618e6; the share of plans that started warm), --planners N and
    --predict-state (commit dd6cd31)."""
    sig = s.get("warm_sigma")
    if not sig:
        n = s.get("planners") or 1
        out = "cold" if n == 1 else f"cold, {n} in flight"
        return out + (", from the predicted state" if s.get("predict_state") else "")
    steps = s.get("warm_steps") or "K/2"
    out = f"warm σ {sig:g}, {steps} steps"
    age = s.get("warm_max_age")
    if age:
        out += f", ≤ {age} periods old"
        rs = s.get("results") or []
        replans = sum(r.get("replans", 0) for r in rs)
        if replans:
            out += f" ({100 * sum(r.get('warm_plans', 0) for r in rs) / replans:.0f} % warm)"
    return out


def policy(s: dict) -> str:
    """The task, marked where the cell ran another bundle than the task's shipped one: a Diffusion
    Policy baseline (a bundle named ``…-dp``, as ``POLICY=diffusion scripts/train-defaults.sh``
    names it), else the bundle's folder name (a candidate)."""
    name = Path(str(s.get("bundle", ""))).name
    if name in ("", f"metaworld-{s['task']}"):
        return s["task"]
    return f"{s['task']} ({'Diffusion Policy' if name.endswith('-dp') else name})"


def row(s: dict) -> str:
    lo, hi = wilson(s["successes"], s["episodes"])
    stops = ", ".join(f"{k} {v}" for k, v in sorted(s.get("trips", {}).items())) or "none"
    ratio = _f(s.get("join_ratio"), "×{:.1f}")
    return (f"| {policy(s)} | {s['rate_hz']:g} Hz, K={s['steps_k'] or '–'} | {s.get('delay_periods', 0):g} | {chunking(s)} "
            f"| {start(s)} "
            f"| {s['successes']}/{s['episodes']} [{lo * 100:.0f}–{hi * 100:.0f} %] "
            f"| {_f(s.get('join_max_median'))} / {_f(s.get('join_inside_median'))} ({ratio}) "
            f"| {_f(s.get('switch_max_median'))} / {_f(s.get('switch_median_median'))} "
            f"| {_f(s.get('inference_p50_ms'), '{:.0f}')} / {_f(s.get('inference_p90_periods'), '{:.2f}')} | {stops} |")


def read(path: Path) -> dict:
    """A cell's summary, plain or gzipped (``.gz``)."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def table(paths: Sequence[Path]) -> List[str]:
    out = ["| task | rate, K | delay (periods) | real-time chunking | plans start | success [Wilson 95 %] "
           "| largest boundary jump / inside step (ratio) | plan switch: largest / median "
           "| plan p50 (ms) / p90 (periods) | stops |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [read(Path(p)) for p in paths]
    rows.sort(key=lambda s: (policy(s), s["rate_hz"], s.get("delay_periods", 0), chunking(s) != "off", chunking(s),
                             start(s)))
    out += [row(s) for s in rows]
    return out


if __name__ == "__main__":
    print("\n".join(table([Path(a) for a in sys.argv[1:]])))
