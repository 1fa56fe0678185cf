"""A late network in a shipped bundle: a fine-tune for plans that land late, beside the main one.

A network fine-tuned on chunks that are right when they start executing some periods after the
observation they were sampled from (research/delay, "Labels right when executed late": the
demonstrator simulated forward over the delay) drives better than the shipped one when plans land
that late, and worse when they land in time. This writes the shipped bundle's folder with the
fine-tune added as its late network: ``energy_grad_late.onnx`` (float16, as shipped; the same
model config and I/O as ``energy_grad.onnx``), a ``graphs`` entry for it and a ``late_policy``
block (docs/bundle.md). The runtime samples a plan on it while the plans before took
``from_periods`` control periods or more (loop.late_policy); everything it scores (the energies,
the state term, the stop's thresholds) stays the main network's, which is unchanged.

    python -m energyflow.late_network --run-bundle RUN/bundle --like bundles/metaworld-bin-picking \\
        --from-periods 2 --out NEW
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from .bundle import BundleError, read_manifest, write_manifest
from .swap_network import compacted_network

#: the late network's graph name and file (engines.GraphEnergyGradLate)
LATE_GRAPH = "energy_grad_late"
LATE_FILE = "energy_grad_late.onnx"
#: manifest fields the main and the late network must share: what the runtime feeds both with and reads from both
SHARED = ("action_dim", "pred_horizon", "obs_horizon", "action_norm", "obs", "conditioning", "cond_dim", "schedule")


def add_late_network(run_bundle: str | Path, like: str | Path, out: str | Path, from_periods: int,
                     name: Optional[str] = None) -> Path:
    """Write ``out``: ``like`` with ``run_bundle``'s network (float16) as its late network, taking over
    from ``from_periods`` periods of plan latency. Refuses another model config, other normalisers or
    conditioning, a ``like`` that already has a late network, and ``from_periods`` < 1."""
    if from_periods < 1:
        raise BundleError(f"--from-periods {from_periods}: want the plan latency in whole control periods (≥ 1) "
                          "from which plans sample on the late network")
    like_man = read_manifest(like)
    if "late_policy" in like_man or LATE_GRAPH in like_man.get("graphs", {}):
        raise BundleError(f"{like}: already has a late network")
    if like_man.get("policy", "energyflow") != "energyflow":
        raise BundleError(f"{like}: policy {like_man.get('policy')!r}: a late network is for energyflow policies")
    out = Path(out)
    with compacted_network(run_bundle, like, out) as (half, half_man):
        for k in SHARED:
            if half_man.get(k) != like_man.get(k):
                raise BundleError(f"{run_bundle}: its {k!r} is not that of {like}: the runtime feeds both "
                                  "networks the same conditioning and reads both the same way")
        shutil.copytree(like, out)
        shutil.copy2(half / "energy_grad.onnx", out / LATE_FILE)
    man: Dict[str, Any] = dict(like_man)
    man["name"] = name or out.name
    man["graphs"] = dict(like_man["graphs"], **{LATE_GRAPH: dict(like_man["graphs"]["energy_grad"], file=LATE_FILE)})
    man["late_policy"] = {
        "graph": LATE_GRAPH,
        "from_periods": int(from_periods),
        "trained": {"source_commit": half_man.get("source_commit"), "created": half_man.get("created"),
                    "weights": _renamed(half_man.get("weights")), "export_check": half_man["model"].get("export_check")},
    }
    write_manifest(out, man)
    read_manifest(out)  # hashes verify
    return out


def _renamed(weights: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The fine-tune's float16 record, its ``max_rel_diff`` under the late network's file name."""
    if not weights or "max_rel_diff" not in weights:
        return weights
    return dict(weights, max_rel_diff={LATE_FILE: v for v in weights["max_rel_diff"].values()})


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-bundle", required=True, help="the late fine-tune's exported bundle (RUN/bundle)")
    ap.add_argument("--like", required=True, help="the shipped bundle whose folder it takes")
    ap.add_argument("--from-periods", type=int, required=True,
                    help="plan latency (whole control periods) from which plans sample on the late network")
    ap.add_argument("--out", required=True, help="the new bundle's folder (must not exist)")
    ap.add_argument("--name", help="the new bundle's name (default: the folder's)")
    args = ap.parse_args(argv)
    try:
        out = add_late_network(args.run_bundle, args.like, args.out, args.from_periods, args.name)
    except (BundleError, OSError) as e:
        raise SystemExit(f"energyflow.late_network: {e}") from e
    print(out)


if __name__ == "__main__":
    main()
