"""The ONNX Runtime settings table (docs/engines.md, "ONNX Runtime settings")
from research/ort/bench.sh's output: per setting and bundle, the median over
rounds of one ∇E call's time and of its ratio to the backend's own setting
in the same round (all graph optimisations, IoBinding over preallocated
tensors, 1 intra-op thread; pairing by round takes out the shared host's
drift between rounds), the allocations per call and the largest difference
of the output from the backend's own.

    .venv/bin/python -m research.ort.table research/ort/results/*.txt          # the settings that differ from the shipped one in one thing
    .venv/bin/python -m research.ort.table --all research/ort/results/*.txt    # every combination
"""
from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

Setting = Tuple[str, str, int]  # graph optimisation, how tensors are passed, intra-op threads
SHIPPED: Setting = ("all", "binding", 1)
_LINE = re.compile(r"^BenchmarkGradCallSettings/opt=(\w+)/pass=([\w-]+)/threads=(\d+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(.*)$")
_OPTS = ["disabled", "basic", "extended", "all"]
_PASSES = ["binding", "run", "run-alloc"]
_PASS_NAME = {"binding": "IoBinding, preallocated", "run": "Run, preallocated", "run-alloc": "Run, outputs allocated per call"}


@dataclass
class Cell:
    ns: Dict[int, float] = field(default_factory=dict)  # round → ns per call
    allocs: float = 0.0
    maxdiff: float = 0.0


@dataclass
class Bench:
    bundle: str
    host: str
    busy: int
    cells: Dict[Setting, Cell]

    def label(self) -> str:
        return self.bundle + (f", {self.busy} busy loop{'s' if self.busy > 1 else ''}" if self.busy else "")

    def ms(self, s: Setting) -> float:
        return statistics.median(self.cells[s].ns.values()) / 1e6

    def ratio(self, s: Setting) -> float:
        """Median over rounds of this setting's time over the shipped setting's in the same round."""
        base = self.cells[SHIPPED].ns
        return statistics.median(v / base[r] for r, v in self.cells[s].ns.items() if r in base)


def parse(text: str, name: str = "") -> Bench:
    """One bench.sh output file: its header (``# bundle:``, ``# host:``), rounds (``# round N``) and lines."""
    bundle, host, busy, rnd = name, "host not recorded", 0, 0
    cells: Dict[Setting, Cell] = {}
    for line in text.splitlines():
        if line.startswith("# bundle:"):
            bundle = line.split(":", 1)[1].strip()
        elif line.startswith("# host:"):
            host = line.split(":", 1)[1].strip()
        elif line.startswith("# busy loops beside it:"):
            busy = int(line.split(":", 1)[1])
        elif line.startswith("# round"):
            rnd = int(line.split()[2])
        m = _LINE.match(line)
        if not m:
            continue
        c = cells.setdefault((m.group(1), m.group(2), int(m.group(3))), Cell())
        c.ns[rnd] = float(m.group(4))
        allocs = re.search(r"([\d.]+) allocs/op", m.group(5))
        diff = re.search(r"([\d.e+-]+) maxdiff", m.group(5))
        c.allocs = float(allocs.group(1)) if allocs else c.allocs
        c.maxdiff = max(c.maxdiff, float(diff.group(1)) if diff else 0.0)
    if SHIPPED not in cells:
        raise SystemExit(f"{name or bundle}: no row for the shipped setting (opt=all, pass=binding, threads=1)")
    return Bench(bundle, host, busy, cells)


def one_change() -> List[Setting]:
    """The shipped setting and every setting that differs from it in one thing."""
    out = [SHIPPED]
    out += [(o, "binding", 1) for o in _OPTS if o != "all"]
    out += [("all", p, 1) for p in _PASSES if p != "binding"]
    return out + [("all", "binding", 2)]


def table(paths: Sequence[Path], every: bool = False) -> List[str]:
    benches = [parse(Path(p).read_text(), Path(p).stem) for p in paths]
    settings = ([(o, p, t) for t in (1, 2) for p in _PASSES for o in _OPTS] if every else one_change())
    head = "| graph optimisation | tensors passed by | intra-op threads | " + " | ".join(
        f"{b.label()}: ms (× shipped)" for b in benches) + " | allocations per call | largest output difference |"
    out = [head, "|" + "---|" * (5 + len(benches))]
    for s in settings:
        have = [b for b in benches if s in b.cells]
        if not have:
            continue
        cells = " | ".join(f"{b.ms(s):.2f} (×{b.ratio(s):.2f})" if s in b.cells else "–" for b in benches)
        mark = " (shipped)" if s == SHIPPED else ""
        out.append(f"| {s[0]}{mark} | {_PASS_NAME[s[1]]} | {s[2]} | {cells} "
                   f"| {max(b.cells[s].allocs for b in have):g} | {max(b.cells[s].maxdiff for b in have):.1e} |")
    out.append("")
    out += [f"{b.label()}: {b.host}; {len(b.cells[SHIPPED].ns)} rounds" for b in benches]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every combination, not only the one-change settings")
    ap.add_argument("files", nargs="+", type=Path)
    a = ap.parse_args(argv)
    print("\n".join(table(a.files, every=a.all)))


if __name__ == "__main__":
    main()
