"""research.gpu.table over the tracked H200 results."""
from pathlib import Path

import json

from research.gpu.table import table

RESULTS = Path(__file__).parent / "results"


def test_table_joins_compiled_rows_and_reports_kernels() -> None:
    docs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    lines = table(docs)
    row = next(l for l in lines if l.startswith("| metaworld-button-press | 10 | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[4]) < float(cells[3])      # the CUDA graph beats eager launches
    assert cells[7] == "1014 / 267"               # kernels per ∇E: converted graph / compiled
    assert any("reference energies" in l for l in lines)


def test_missing_measures_print_a_dash() -> None:
    doc = {"gpu": "x", "rows": [{"bundle": "b", "steps": 10, "batch": 1, "eager": {"p50_ms": 3.0}}]}
    row = table([doc])[-1]
    assert "| b | 10 | 1 | 3.0 | – |" in row
