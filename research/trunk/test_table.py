"""The trunk sweep's table reads sweep.sh's result files as written."""
import json

import pytest

from research.trunk.table import table


def summary(k: int, n: int) -> dict:
    return {"task": "assembly", "bundle": "build/trunk/none/bundle", "episodes": n, "successes": k}


def test_rows_shipped_first_with_differences(tmp_path):
    files = []
    for name, body in [("assembly-w16-32-64-L0", summary(45, 50)), ("assembly-shipped-L0", summary(50, 50)),
                       ("assembly-w16-32-64-S", summary(18, 20)), ("assembly-shipped-S", summary(19, 20)),
                       ("assembly-w8-16-32-L0", summary(40, 50)),
                       ("assembly-shipped-bench.r1", {"p50_ms": 19.94, "p90_ms": 27.01}),
                       ("assembly-shipped-bench.r2", {"p50_ms": 30.0, "p90_ms": 40.0}),
                       ("assembly-shipped-bench.r3", {"p50_ms": 10.0, "p90_ms": 20.0})]:
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(body))
        files.append(p)
    head, rule, shipped, w16, w8 = table(files)
    assert head.startswith("| task | trunk (down dims) | parameters | planner p50 / p90 ms | level 0 |")
    assert shipped == "| assembly | 32/64/128 (shipped) | – | 19.9 / 27.0 | 50/50 [93–100] | 19/20 [76–99] | – | – |"
    assert w16.startswith("| assembly | 16/32/64 | – | – | 45/50 [79–96] (-10) | 18/20 [70–97] (-5) | – |")
    assert "| 40/50 [67–89] (-20) |" in w8


def test_unknown_file_refused(tmp_path):
    p = tmp_path / "something.json"
    p.write_text("{}")
    with pytest.raises(ValueError, match="not a sweep result"):
        table([p])
