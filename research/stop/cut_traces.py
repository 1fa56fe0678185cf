"""Pack level-0 driving for tracking in git: the chunks' summaries and their
traces cut to the fields the stop's replay reads.

``research/stop/level0_hours.sh`` writes, per chunk, a summary (JSON) and a
trace of every tick (JSONL) with every score. ``false_trips --check`` and
``stop_rules`` read only a few fields of the trace; this keeps those, so an
hour of driving fits in a few MB:

    python -m research.stop.cut_traces --out research/rtc/load-hours/traces.tar.xz build/load-hours/assembly

The archive holds the directories' paths relative to ``build/`` (unpack with
``tar -xJf ARCHIVE -C build``). It is xz when ``--out`` ends in ``.tar.xz`` (as
the tracked packs are, for a lighter checkout) and gzip when it ends in
``.tar.gz``.
"""
from __future__ import annotations

import argparse
import io
import json
import tarfile
from pathlib import Path
from typing import Iterable, Sequence

#: the trace fields the replay reads
KEEP = ("episode", "seed", "tick", "state", "state_energy", "tracking", "tracking_sum", "camera_unseen")


def cut_line(line: str) -> str:
    """One trace line with only the KEEP fields (absent ones stay absent)."""
    row = json.loads(line)
    return json.dumps({k: row[k] for k in KEEP if k in row}, separators=(",", ":"))


def cut_trace(text: str) -> str:
    return "".join(cut_line(ln) + "\n" for ln in text.splitlines() if ln.strip())


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_mode(out: Path) -> str:
    """The tarfile mode for ``out``: xz for ``.tar.xz``, else gzip (``.tar.gz``, as before)."""
    return "w:xz" if out.name.endswith(".tar.xz") else "w:gz"


def pack(dirs: Iterable[Path], out: Path, base: Path) -> int:
    """Write the archive (xz or gzip by ``out``'s suffix); returns the number of files packed."""
    n = 0
    with tarfile.open(out, write_mode(out)) as tar:
        for d in dirs:
            for p in sorted(d.iterdir()):
                name = str(p.relative_to(base))
                if p.suffix == ".json":
                    _add(tar, name, p.read_bytes())
                elif p.suffix == ".jsonl":
                    _add(tar, name, cut_trace(p.read_text()).encode())
                else:
                    continue
                n += 1
    return n


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path, help="level0_hours.sh output directories under build/")
    ap.add_argument("--out", type=Path, required=True, help="the .tar.xz to write (.tar.gz: gzip)")
    ap.add_argument("--base", type=Path, default=Path("build"), help="paths in the archive are relative to this")
    a = ap.parse_args(argv)
    n = pack(a.dirs, a.out, a.base)
    print(f"{a.out}: {n} files")


if __name__ == "__main__":
    main()
