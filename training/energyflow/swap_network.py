"""A fine-tune's network in a shipped bundle's place, everything else kept.

A fine-tune from a shipped bundle (``energyflow train --init-bundle``) exports a plain bundle:
float32, the model's own ``action_horizon``, no state term, no closed-loop thresholds. This
writes the shipped bundle's folder with only the network swapped: the fine-tune's
``energy_grad.onnx`` in float16 (:func:`energyflow.compact.compact_bundle`, as shipped), and
everything else (the state term, which depends on the demonstrations only, the thresholds,
``action_horizon``, the sampler settings) kept, so the new bundle differs from the old by the
weights alone.

    python -m energyflow.swap_network --run-bundle RUN/bundle --like bundles/metaworld-bin-picking \
        --out NEW [--name NAME]

The kept closed-loop thresholds were fitted on the old network's driving, and the held-out
energy statistics (``calibration.scores``, ``calibration.png``) on its samples: before the new
bundle ships, calibrate it again on its own (``energyflow calibrate`` for the statistics, which
keeps the closed-loop blocks; ``energyflow sim calibrate`` for the thresholds; docs/safety.md). The two
networks must have the same model config; the new manifest's hashes are rewritten and it
verifies as a bundle.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

from .bundle import BundleError, model_config_from_manifest, read_manifest, write_manifest
from .compact import compact_bundle

#: manifest fields that describe the network, taken from the fine-tune's bundle
NETWORK_FIELDS = ("created", "source_commit", "reference_actions")


@contextmanager
def compacted_network(run_bundle: str | Path, like: str | Path, out: str | Path) -> Iterator[Tuple[Path, Dict[str, Any]]]:
    """``run_bundle`` in float16 in a temporary folder, with its manifest, after checking that its
    model config is ``like``'s and that ``out`` does not exist yet (the folder goes on exit)."""
    run_man, like_man = read_manifest(run_bundle), read_manifest(like)
    a, b = model_config_from_manifest(run_man), model_config_from_manifest(like_man)
    a.action_horizon = b.action_horizon  # the model's training window; what runs is the manifest's, kept
    if a != b:
        raise BundleError(f"{run_bundle}: its model config is not that of {like}")
    if Path(out).exists():
        raise BundleError(f"{out}: exists; choose a new folder")
    with tempfile.TemporaryDirectory() as tmp:
        half = Path(tmp) / "b"
        shutil.copytree(run_bundle, half)
        compact_bundle(half)
        yield half, read_manifest(half)


def swap_network(run_bundle: str | Path, like: str | Path, out: str | Path, name: Optional[str] = None) -> Path:
    """Write ``out``: ``like`` with ``run_bundle``'s network (float16). Refuses a different model config."""
    like_man = read_manifest(like)
    out = Path(out)
    with compacted_network(run_bundle, like, out) as (half, half_man):
        shutil.copytree(like, out)
        shutil.copy2(half / "energy_grad.onnx", out / "energy_grad.onnx")
    man = dict(like_man)
    for k in NETWORK_FIELDS:
        man[k] = half_man[k]
    man["name"] = name or out.name
    man["weights"] = half_man["weights"]
    man["model"] = dict(like_man["model"], export_check=half_man["model"]["export_check"])
    write_manifest(out, man)
    read_manifest(out)  # hashes verify
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-bundle", required=True, help="the fine-tune's exported bundle (RUN/bundle)")
    ap.add_argument("--like", required=True, help="the shipped bundle whose folder it takes")
    ap.add_argument("--out", required=True, help="the new bundle's folder (must not exist)")
    ap.add_argument("--name", help="the new bundle's name (default: the folder's)")
    args = ap.parse_args(argv)
    try:
        out = swap_network(args.run_bundle, args.like, args.out, args.name)
    except (BundleError, OSError) as e:
        raise SystemExit(f"energyflow.swap_network: {e}") from e
    print(out)


if __name__ == "__main__":
    main()
