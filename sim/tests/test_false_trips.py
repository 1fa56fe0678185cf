"""scripts/false_trips.py: the per-hour interval it prints beside the shipped stop's false trips."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
spec = importlib.util.spec_from_file_location("false_trips", ROOT / "scripts" / "false_trips.py")
ft = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ft)


@pytest.mark.parametrize("k,hours,lo,hi", [
    (0, 1.0, 0.0, 3.689),      # no trip in an hour: the rate may still be up to 3.7 per hour
    (0, 2.0, 0.0, 1.844),      # the upper bound falls as 1/hours
    (1, 1.0, 0.0253, 5.572),   # Garwood's exact interval for one event
    (27, 1.096, 16.2, 35.8),   # the shipped stop over set B (docs/evaluation.md)
    (2000, 10.0, 191.3, 209.0),  # many trips: no underflow (e^-mu alone is 0 for mu > 745)
])
def test_poisson_interval(k, hours, lo, hi):
    got = ft.poisson_interval(k, hours)
    assert got == pytest.approx((lo, hi), abs=0.05)


@pytest.mark.parametrize("p50s,ms,light,heavy", [
    ([90.0, 130.0, 170.0], 130.0, ["c0", "c1"], ["c2"]),  # at the limit counts as light
    ([90.0, 95.0], 50.0, [], ["c0", "c1"]),
    ([], 100.0, [], []),
])
def test_by_load(tmp_path, p50s, ms, light, heavy):
    cells = []
    for i, p in enumerate(p50s):
        (tmp_path / f"c{i}.json").write_text('{"inference_p50_ms": %r, "results": []}' % p)
        cells.append(tmp_path / f"c{i}")
    lo, hi = ft.by_load(cells, ms)
    assert [c.name for c in lo] == light
    assert [c.name for c in hi] == heavy
