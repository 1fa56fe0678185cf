"""research.delay.split_late on the shipped BinPicking bundle (it carries a late network)."""
from __future__ import annotations

from pathlib import Path

import pytest

from energyflow.bundle import read_manifest, sha256_file
from energyflow.late_network import add_late_network
from research.delay.split_late import main, split

BUNDLE = Path(__file__).resolve().parents[2] / "bundles" / "metaworld-bin-picking"


def test_the_halves_put_back_together_are_the_shipped_bundle(tmp_path) -> None:
    split(BUNDLE, tmp_path / "main", tmp_path / "late")
    shipped = read_manifest(BUNDLE)
    late_file = shipped["graphs"][shipped["late_policy"]["graph"]]["file"]
    for half, graph in (("main", "energy_grad.onnx"), ("late", late_file)):
        man = read_manifest(tmp_path / half)  # verifies every file's hash
        assert "late_policy" not in man
        assert set(man["graphs"]) == set(shipped["graphs"]) - {shipped["late_policy"]["graph"]}
        assert not (tmp_path / half / late_file).exists()
        assert sha256_file(tmp_path / half / "energy_grad.onnx") == sha256_file(BUNDLE / graph)
    again = add_late_network(tmp_path / "late", tmp_path / "main", tmp_path / "again",
                             from_periods=shipped["late_policy"]["from_periods"])
    for f in ("energy_grad.onnx", late_file, "state_energy.onnx"):
        assert sha256_file(again / f) == sha256_file(BUNDLE / f)


@pytest.mark.parametrize("case, message", [
    ("no-late", "has no late network"),
    ("exists", "exists; give a new folder"),
])
def test_refuses_in_one_line(case, message, tmp_path, capsys) -> None:
    split(BUNDLE, tmp_path / "main", tmp_path / "late0")
    bundle, out = (tmp_path / "main", tmp_path / "m2") if case == "no-late" else (BUNDLE, tmp_path / "main")
    with pytest.raises(SystemExit) as e:
        main([str(bundle), "--main-out", str(out), "--late-out", str(tmp_path / "l2")])
    assert e.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "l2").exists()
