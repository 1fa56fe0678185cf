"""energyflow.swap_network and energyflow.late_network: the shipped folder with the fine-tune's network
swapped in, or added as the late network."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from energyflow import cli
from energyflow.bundle import BundleError, read_manifest, write_manifest
from energyflow.data import Demo, write_hdf5
from energyflow.late_network import add_late_network
from energyflow.swap_network import swap_network

TINY = ["--down-dims", "8", "16", "--n-groups", "4", "--time-embed-dim", "8", "--state-hidden", "16",
        "--batch-size", "8", "--warmup-steps", "1", "--val-every", "0", "--no-progress", "--val-fraction", "0.34",
        "--threads", "1"]


def _train(root: Path, out: str, steps: int, extra: list) -> Path:
    rng = np.random.default_rng(0)
    demos = [Demo(f"demo_{i}", np.tanh(rng.standard_normal((20, 2))).astype(np.float32),
                  {"state": rng.standard_normal((20, 3)).astype(np.float32)}) for i in range(6)]
    write_hdf5(root / "toy.hdf5", demos, env="toy-env")
    assert cli.main(["train", "--data", str(root / "toy.hdf5"), "--out", str(root / out), "--steps", str(steps)]
                    + TINY + extra) == 0
    return root / out / "bundle"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> tuple:
    """(a shipped-like bundle: extra file, action_horizon 4; a fine-tune of the same model)."""
    root = tmp_path_factory.mktemp("c")
    shipped = _train(root, "shipped", 2, [])
    (shipped / "state_energy.onnx").write_bytes(b"the state term")
    man = read_manifest(shipped, verify=False)
    man["action_horizon"] = 4
    write_manifest(shipped, man)
    return shipped, _train(root, "tuned", 4, [])


def test_swaps_the_network_and_keeps_the_rest(bundles, tmp_path: Path) -> None:
    shipped, tuned = bundles
    out = swap_network(tuned, shipped, tmp_path / "cand")
    man = read_manifest(out)  # verifies the hashes
    assert man["name"] == "cand" and man["action_horizon"] == 4
    assert man["weights"]["dtype"] == "float16"
    assert (out / "state_energy.onnx").read_bytes() == b"the state term"
    assert (out / "energy_grad.onnx").read_bytes() != (shipped / "energy_grad.onnx").read_bytes()
    assert man["files"]["state_energy.onnx"] == read_manifest(shipped)["files"]["state_energy.onnx"]


def test_refuses_another_model_or_an_existing_folder(bundles, tmp_path: Path) -> None:
    shipped, tuned = bundles
    other = _train(tmp_path, "wide", 1, ["--down-dims", "8", "24"])
    with pytest.raises(BundleError, match="model config"):
        swap_network(other, shipped, tmp_path / "c1")
    (tmp_path / "c2").mkdir()
    with pytest.raises(BundleError, match="exists"):
        swap_network(tuned, shipped, tmp_path / "c2")


def test_adds_a_late_network_and_keeps_the_main_one(bundles, tmp_path: Path) -> None:
    shipped, tuned = bundles
    out = add_late_network(tuned, shipped, tmp_path / "late", from_periods=2)
    man, old = read_manifest(out), read_manifest(shipped)  # verifies the hashes
    assert man["late_policy"]["graph"] == "energy_grad_late" and man["late_policy"]["from_periods"] == 2
    assert man["graphs"]["energy_grad_late"] == dict(old["graphs"]["energy_grad"], file="energy_grad_late.onnx")
    assert man["files"]["energy_grad.onnx"] == old["files"]["energy_grad.onnx"]  # the main network as shipped
    assert (out / "energy_grad_late.onnx").read_bytes() != (shipped / "energy_grad.onnx").read_bytes()
    assert man["late_policy"]["trained"]["weights"]["dtype"] == "float16"
    assert list(man["late_policy"]["trained"]["weights"]["max_rel_diff"]) == ["energy_grad_late.onnx"]
    assert (out / "state_energy.onnx").read_bytes() == b"the state term"


def test_refuses_a_late_network_it_cannot_run(bundles, tmp_path: Path) -> None:
    shipped, tuned = bundles
    with pytest.raises(BundleError, match="from-periods 0"):
        add_late_network(tuned, shipped, tmp_path / "l0", from_periods=0)
    other = _train(tmp_path, "wide", 1, ["--down-dims", "8", "24"])
    with pytest.raises(BundleError, match="model config"):
        add_late_network(other, shipped, tmp_path / "l1", from_periods=2)
    once = add_late_network(tuned, shipped, tmp_path / "l2", from_periods=2)
    with pytest.raises(BundleError, match="already has a late network"):
        add_late_network(tuned, once, tmp_path / "l3", from_periods=2)
    renormed = tmp_path / "renormed"
    shutil.copytree(tuned, renormed)
    man = read_manifest(renormed)
    man["action_norm"] = {"mean": [m + 1 for m in man["action_norm"]["mean"]], "std": man["action_norm"]["std"]}
    write_manifest(renormed, man)
    with pytest.raises(BundleError, match="'action_norm' is not that of"):
        add_late_network(renormed, shipped, tmp_path / "l4", from_periods=2)
