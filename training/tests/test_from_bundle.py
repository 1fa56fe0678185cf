"""energyflow.from_bundle: a bundle's weights back in torch, checked against its graph, and
``energyflow train --init-bundle``."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from energyflow import cli
from energyflow.bundle import FORMAT_VERSION, BundleError, read_manifest, write_manifest
from energyflow.compact import compact_bundle
from energyflow.data import write_hdf5
from energyflow.from_bundle import check_norms, policy_from_bundle
from test_train_cli import TINY_FLAGS, toy_demos

torch.set_num_threads(1)

@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny trained run: out/bundle and out/latest.pt (the checkpoint the bundle came from)."""
    root = tmp_path_factory.mktemp("run")
    write_hdf5(root / "toy.hdf5", toy_demos(), env="toy-env")
    assert cli.main(["train", "--data", str(root / "toy.hdf5"), "--out", str(root / "out"), "--steps", "3",
                     "--batch-size", "8", "--warmup-steps", "1", "--val-every", "0", "--no-progress",
                     "--val-fraction", "0.34", "--threads", "1"] + TINY_FLAGS) == 0
    return root


def test_rebuilds_the_exported_weights(run: Path) -> None:
    """float32 and float16 bundles: every weight is the checkpoint's EMA (float16: its rounding)."""
    ema = torch.load(run / "out" / "latest.pt", weights_only=False)["ema"]
    half = run / "half"
    shutil.copytree(run / "out" / "bundle", half)
    compact_bundle(half, min_elements=1)
    for bundle, tol in ((run / "out" / "bundle", 0.0), (half, 1e-3)):
        pol, man = policy_from_bundle(bundle)
        assert man["policy"] == "energyflow"
        got = pol.state_dict()
        assert set(got) == set(ema)
        for k, v in ema.items():
            torch.testing.assert_close(got[k], v.float(), rtol=tol, atol=tol * float(v.abs().max()) + 1e-12, msg=k)


def test_a_wrong_mapping_is_refused(run: Path, tmp_path: Path, monkeypatch) -> None:
    """Each GroupNorm's scale made distinct in the graph: read in the exporter's order the network
    reproduces it; with two scales taken in the wrong order it does not, and the bundle is refused."""
    bundle = tmp_path / "b"
    shutil.copytree(run / "out" / "bundle", bundle)
    path = bundle / "energy_grad.onnx"
    m = onnx.load(str(path))
    for i, init in enumerate(x for x in m.graph.initializer if x.name.startswith("onnx::Mul_")):
        arr = numpy_helper.to_array(init)
        init.CopyFrom(numpy_helper.from_array(np.full_like(arr, 0.5 + 0.25 * i), init.name))
    onnx.save(m, str(path))
    write_manifest(bundle, read_manifest(bundle, verify=False))
    policy_from_bundle(bundle)

    import energyflow.from_bundle as fb
    read = fb._initialisers

    def swapped(p: Path):
        named, anon = read(p)
        anon[0], anon[2] = anon[2], anon[0]  # the first two GroupNorms' scales (both 8 channels)
        return named, anon

    monkeypatch.setattr(fb, "_initialisers", swapped)
    with pytest.raises(BundleError, match="does not reproduce"):
        policy_from_bundle(bundle)


def test_other_bundles_are_refused(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"format_version": FORMAT_VERSION, "policy": "diffusion"})
    with pytest.raises(BundleError, match="not an EnergyFlow bundle"):
        policy_from_bundle(tmp_path)
    with pytest.raises(BundleError, match="no manifest.json"):
        policy_from_bundle(tmp_path / "none")


@pytest.mark.parametrize("change, message", [
    (lambda meta: None, None),
    (lambda meta: meta["action_norm"]["std"].__setitem__(0, 2.0), "action std"),
    (lambda meta: meta["state_norm"]["mean"].__setitem__(1, 0.5), "state mean"),
    (lambda meta: meta.__setitem__("state_norm", None), "state normaliser"),
])
def test_check_norms(run: Path, change, message) -> None:
    man = json.loads((run / "out" / "bundle" / "manifest.json").read_text())
    st = next(o for o in man["obs"] if o["kind"] == "state")
    meta = {"action_norm": json.loads(json.dumps(man["action_norm"])),
            "state_norm": {"mean": list(st["norm"]["mean"]), "std": list(st["norm"]["std"])}}
    change(meta)
    if message is None:
        check_norms(man, meta, "B")
    else:
        with pytest.raises(BundleError, match=message):
            check_norms(man, meta, "B")


def test_train_init_bundle(run: Path, tmp_path: Path) -> None:
    """A run started from the bundle begins at its weights (model flags that agree with it are fine);
    other data, another model or --resume is refused."""
    from energyflow.train import train_main

    bundle = run / "out" / "bundle"
    want = policy_from_bundle(bundle)[0].state_dict()
    s = train_main(str(run / "toy.hdf5"), str(tmp_path / "ft"), {"down_dims": [8, 16]}, {"steps": 0, "batch_size": 8, "val_every": 0,
                   "val_fraction": 0.34, "threads": 1}, init_bundle=str(bundle), progress=False, export_bundle=False)
    assert s["steps"] == 0
    got = torch.load(tmp_path / "ft" / "latest.pt", weights_only=False)
    for k, v in want.items():
        torch.testing.assert_close(got["policy"][k], v, rtol=0, atol=0, msg=k)
        torch.testing.assert_close(got["ema"][k], v, rtol=0, atol=0, msg=k)
    other = tmp_path / "other.hdf5"
    write_hdf5(other, toy_demos(n=5), env="toy-env")
    with pytest.raises(BundleError, match="not the bundle's"):
        train_main(str(other), str(tmp_path / "ft2"), {}, {"steps": 0, "val_fraction": 0.34, "threads": 1},
                   init_bundle=str(bundle), progress=False, export_bundle=False)
    with pytest.raises(ValueError, match="down_dims differ"):
        train_main(str(run / "toy.hdf5"), str(tmp_path / "ft4"), {"down_dims": [8, 24]}, {}, init_bundle=str(bundle))
    with pytest.raises(ValueError, match="not both"):
        train_main(str(run / "toy.hdf5"), str(tmp_path / "ft3"), {}, {}, init_bundle=str(bundle), resume="auto")
