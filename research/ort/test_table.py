"""research/ort/table.py: the settings table from bench.sh's output."""
from __future__ import annotations

from pathlib import Path

import pytest

from research.ort import table

OUT = """# bundle: metaworld-x
# host: 2 CPUs, Some CPU, load average 0.1 0.2 0.3 at the start
# round 1
BenchmarkGradCallSettings/opt=all/pass=binding/threads=1-2    30   3000000 ns/op   0 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=disabled/pass=binding/threads=1-2    30   6000000 ns/op   2.5e-07 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=all/pass=run-alloc/threads=1-2    30   3000000 ns/op   0 maxdiff   96 B/op   25 allocs/op
# round 2
BenchmarkGradCallSettings/opt=all/pass=binding/threads=1-2    30   1000000 ns/op   0 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=disabled/pass=binding/threads=1-2    30   1500000 ns/op   1e-07 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=all/pass=run-alloc/threads=1-2    30   1000000 ns/op   0 maxdiff   96 B/op   25 allocs/op
# round 3
BenchmarkGradCallSettings/opt=all/pass=binding/threads=1-2    30   2000000 ns/op   0 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=disabled/pass=binding/threads=1-2    30   3000000 ns/op   0 maxdiff   0 B/op   0 allocs/op
BenchmarkGradCallSettings/opt=all/pass=run-alloc/threads=1-2    30   2000000 ns/op   0 maxdiff   96 B/op   25 allocs/op
"""


def test_medians_paired_ratios_and_largest_difference(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text(OUT)
    rows = table.table([f])
    assert rows[2] == "| all (shipped) | IoBinding, preallocated | 1 | 2.00 (×1.00) | 0 | 0.0e+00 |"
    # times 6, 1.5, 3 ms: median 3; ratios to the same round's shipped 2, 1.5, 1.5: median 1.5
    assert rows[3] == "| disabled | IoBinding, preallocated | 1 | 3.00 (×1.50) | 0 | 2.5e-07 |"
    assert rows[4] == "| all | Run, outputs allocated per call | 1 | 2.00 (×1.00) | 25 | 0.0e+00 |"
    assert len(rows) == 7  # settings not measured are left out
    assert rows[-1] == "metaworld-x: 2 CPUs, Some CPU, load average 0.1 0.2 0.3 at the start; 3 rounds"


def test_refuses_output_without_the_shipped_setting(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("\n".join(line for line in OUT.splitlines() if "opt=all/pass=binding" not in line))
    with pytest.raises(SystemExit, match="no row for the shipped setting"):
        table.table([f])


def test_a_loaded_run_is_labelled_with_its_busy_loops(tmp_path: Path) -> None:
    idle, loaded = tmp_path / "x.txt", tmp_path / "x-busy1.txt"
    idle.write_text(OUT)
    loaded.write_text(OUT.replace("# round 1", "# busy loops beside it: 1\n# round 1"))
    rows = table.table([idle, loaded])
    assert "| metaworld-x: ms (× shipped) | metaworld-x, 1 busy loop: ms (× shipped) |" in rows[0]
    assert rows[-1].startswith("metaworld-x, 1 busy loop: 2 CPUs")
