"""The GPU sample timings (research/gpu/results/*.json, written by
``research.gpu.sample_cuda``) as one Markdown table: per bundle, K and batch,
the median ms of one whole sample (K ∇E evaluations + the final energy) with
eager launches, replayed as one CUDA graph (fp32, fp16 autocast), and
compiled by torch.compile then replayed; the kernels one ∇E evaluation
launches; and the largest difference from the CPU reference sample.

    .venv/bin/python -m research.gpu.table research/gpu/results/*.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence


def _ms(r: dict, key: str) -> Optional[float]:
    v = r.get(key)
    return v["p50_ms"] if isinstance(v, dict) else None


def _f(x: Optional[float], fmt: str = "{:.1f}") -> str:
    return "–" if x is None else fmt.format(x)


def table(docs: Sequence[dict]) -> List[str]:
    """Rows keyed by (bundle, K, batch); a compiled file's row joins its plain one."""
    rows: Dict[tuple, dict] = {}
    gpu = sorted({d["gpu"] for d in docs})
    for d in docs:
        for r in d["rows"]:
            if "steps" not in r:
                continue
            rows.setdefault((r["bundle"], r["steps"], r["batch"]), {}).update(r)
    out = [f"GPU: {', '.join(gpu)}; median ms per sample (K ∇E evaluations + the final energy)", "",
           "| bundle | K | batch | eager | CUDA graph fp32 | CUDA graph fp16 | compiled + graph | kernels per ∇E "
           "(graph / compiled) | largest action difference from the CPU reference (fp32 / fp16) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for (b, k, n), r in sorted(rows.items()):
        kern = "–" if "kernels_onnx_graph" not in r else f"{r['kernels_onnx_graph']} / {r['kernels_compiled']}"
        diff = (f"{_f(r.get('graph_fp32_max_abs_diff'), '{:.1e}')} / "
                f"{_f(r.get('graph_fp16_max_abs_diff'), '{:.1e}')}")
        out.append(f"| {b} | {k} | {n} | {_f(_ms(r, 'eager'))} | {_f(_ms(r, 'graph_fp32'))} | "
                   f"{_f(_ms(r, 'graph_fp16'))} | {_f(_ms(r, 'compiled_graph_fp32'))} | {kern} | {diff} |")
    for d in docs:
        for r in d["rows"]:
            if "rescore_refs" in r:
                out += ["", f"{r['bundle']}: the {r['rescore_refs']} reference energies (batch "
                        f"{r['rescore_refs']}) as one CUDA graph: {_f(_ms(r, 'graph_fp32'), '{:.2f}')} ms"]
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    files = list(argv if argv is not None else sys.argv[1:])
    if not files:
        raise SystemExit("usage: python -m research.gpu.table FILE.json …")
    print("\n".join(table([json.loads(Path(f).read_text()) for f in files])))


if __name__ == "__main__":
    main()
