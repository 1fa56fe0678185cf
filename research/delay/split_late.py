"""A bundle with a late network, split into its two networks as plain bundles.

A second round of forward labels (research/delay/README.md, "A second round: labels on the late
network's own driving") fine-tunes the shipped late network, not the main one, and then puts the
result back beside the unchanged main network. ``energyflow train --init-bundle`` rebuilds the
network of a bundle's ``energy_grad`` graph, and ``energyflow.late_network --like`` refuses a bundle
that has a late network already, so this writes both halves as ordinary bundles:

- ``--main-out``: the bundle without its late network (``late_policy`` and the late graph left
  out), the ``--like`` of ``energyflow.late_network``;
- ``--late-out``: the same folder with the late network as its ``energy_grad``, the
  ``--init-bundle`` of the fine-tune. Its state term and thresholds are the main network's, as the
  runtime scores a late plan: it is a start for training, not a bundle to run.

    .venv/bin/python -m research.delay.split_late bundles/metaworld-bin-picking --main-out MAIN --late-out LATE
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from energyflow.bundle import BundleError, read_manifest, write_manifest


def split(bundle: str | Path, main_out: str | Path, late_out: str | Path) -> None:
    """Write ``main_out`` and ``late_out`` (both new folders) from ``bundle``, which must have a late
    network."""
    bundle = Path(bundle)
    man = read_manifest(bundle)
    late = man.get("late_policy")
    if late is None:
        raise BundleError(f"{bundle}: has no late network (no late_policy in its manifest)")
    late_file = man["graphs"][late["graph"]]["file"]
    for out in (main_out, late_out):
        if Path(out).exists():
            raise BundleError(f"{out}: exists; give a new folder")
    plain: Dict[str, Any] = {k: v for k, v in man.items() if k != "late_policy"}
    plain["graphs"] = {k: v for k, v in man["graphs"].items() if k != late["graph"]}
    for out, name, energy_grad in ((Path(main_out), f"{man['name']}-main", None),
                                   (Path(late_out), f"{man['name']}-late", bundle / late_file)):
        shutil.copytree(bundle, out, ignore=shutil.ignore_patterns(late_file))
        if energy_grad is not None:
            shutil.copy2(energy_grad, out / man["graphs"]["energy_grad"]["file"])
        write_manifest(out, dict(plain, name=name))


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", help="a bundle with a late network")
    ap.add_argument("--main-out", required=True, help="new folder: the bundle without its late network")
    ap.add_argument("--late-out", required=True, help="new folder: the late network as the bundle's network")
    args = ap.parse_args(argv)
    try:
        split(args.bundle, args.main_out, args.late_out)
    except (BundleError, OSError) as e:
        ap.error(str(e))
    print(f"{args.main_out}: the main network alone; {args.late_out}: the late network as main")


if __name__ == "__main__":
    main()
