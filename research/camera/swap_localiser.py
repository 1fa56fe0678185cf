"""A camera bundle with another camera bundle's localiser (vision graph), to tell a policy's
share of a result from its localiser's.

The camera Diffusion Policy baselines were trained with their own localiser (the same
recipe and seeds as the EnergyFlow bundle's, retrained: not bit-identical), so a gap between
the two at a level may come from either stage. Swapping the vision graphs runs each policy
on the other's localiser; the manifest's `localiser` block and file hashes follow the graph.

    python -m research.camera.swap_localiser --bundle B --vision-from V --out DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Optional, Sequence

from energyflow.bundle import file_hashes


class SwapError(Exception):
    """The two bundles' localisers are not interchangeable."""


def swap(bundle: Path, vision_from: Path, out: Path) -> dict:
    """Copy BUNDLE to OUT with VISION_FROM's vision graph; returns the new manifest."""
    m = json.loads((bundle / "manifest.json").read_text())
    v = json.loads((vision_from / "manifest.json").read_text())
    for key in ("localiser", "graphs"):
        if key not in m or key not in v:
            raise SwapError(f"{bundle if key not in m else vision_from}: no {key!r} in its manifest: not a camera bundle")
    if "vision" not in m["graphs"] or "vision" not in v["graphs"]:
        raise SwapError("both bundles need a vision graph")
    a, b = m["graphs"]["vision"], v["graphs"]["vision"]
    if (a.get("inputs"), a.get("outputs")) != (b.get("inputs"), b.get("outputs")):
        raise SwapError(f"vision graphs differ in inputs or outputs: {a.get('inputs')} -> {a.get('outputs')} "
                        f"against {b.get('inputs')} -> {b.get('outputs')}")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(bundle, out)
    shutil.copyfile(vision_from / b["file"], out / a["file"])
    m["localiser"] = {**v["localiser"], "swapped_from": str(vision_from)}
    m["files"] = file_hashes(out)
    (out / "manifest.json").write_text(json.dumps(m, indent=1, ensure_ascii=False) + "\n")
    return m


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m research.camera.swap_localiser", description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, required=True, help="the camera bundle whose policy runs")
    p.add_argument("--vision-from", type=Path, required=True, help="the camera bundle whose localiser it gets")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    try:
        swap(a.bundle, a.vision_from, a.out)
    except (SwapError, OSError) as e:
        p.exit(2, f"swap_localiser: {e}\n")
    print(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
