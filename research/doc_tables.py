"""The table commands the docs print their numbers with, found and run.

docs/ and the research READMEs publish tables with the command that prints
them beside each (``.venv/bin/python -m research.rtc.table research/…/*.json``).
A reader who runs one should get the table back; a result file added later
that a command's glob also matches (another tool's output, say) breaks it
without anyone noticing. This module finds every such command whose inputs
are tracked files, and runs it:

    .venv/bin/python -m research.doc_tables            # run them all, one line each
    .venv/bin/python -m research.doc_tables --list     # only list them

Only reading commands are taken: one that writes (``--out``, ``--json``, …),
reads ``build/`` (files that stay on the machine that made them), or has a
placeholder (``FILE``, ``REC/*.hdf5``, ``$t``, ``…``) is left out, as is a command split over
lines without a backslash. ``$R/`` is replaced by the last ``R=…`` assignment
above the command in the same file.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Sequence

ROOT = Path(__file__).resolve().parent.parent

_COMMAND = re.compile(r"(?:\.venv/bin/)?python3? -m (research\.[\w.]+)([^\n`;|&#]*)")
_ASSIGN = re.compile(r"^(\w+)=(\S+)\s*$", re.M)
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
_WRITES = ("--out", "--json", "--write", "--pack", "--save")


@dataclass(frozen=True)
class Command:
    """One documented command: where it is written, the module and its arguments."""

    source: str  # the Markdown file, relative to the repository root
    module: str
    args: str

    def line(self) -> str:
        return f"python -m {self.module} {self.args}"


def documents(root: Path = ROOT) -> List[Path]:
    """The Markdown files whose commands are checked: docs/, README.md and the research READMEs."""
    out = sorted(root.glob("docs/*.md")) + [root / "README.md"] + sorted(root.glob("research/**/README.md"))
    return [p for p in out if p.is_file()]


def commands(text: str, source: str = "") -> Iterator[Command]:
    """The reading commands of one Markdown text whose arguments name files (see the module doc)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for m in _COMMAND.finditer(joined):
        args = m.group(2).strip()
        for name, value in dict(_ASSIGN.findall(joined[:m.start()])).items():  # the last assignment wins
            args = args.replace(f"${name}/", value.rstrip("/") + "/")
        tokens = args.split()
        args = " ".join(tokens)
        if any(t.startswith(_WRITES) for t in tokens):
            continue
        if "$" in args or "build/" in args or "…" in args or "<" in args:
            continue
        if any(_PLACEHOLDER.fullmatch(part.strip("',")) for t in tokens for part in t.split("/")):
            continue
        if not any("/" in t and not t.startswith("-") for t in tokens):
            continue
        yield Command(source, m.group(1), args)


def all_commands(root: Path = ROOT) -> List[Command]:
    """Every checked command of the repository's documents, each once (the first place it is written)."""
    seen, out = set(), []
    for path in documents(root):
        for c in commands(path.read_text(encoding="utf-8"), str(path.relative_to(root))):
            if (c.module, c.args) not in seen:
                seen.add((c.module, c.args))
                out.append(c)
    return out


def run(c: Command, python: str = sys.executable, root: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one command from the repository root with bash (for its globs and braces)."""
    return subprocess.run(f"{python} -m {c.module} {c.args}", shell=True, executable="/bin/bash", cwd=root,
                          capture_output=True, text=True, timeout=timeout)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list the commands, run none")
    a = ap.parse_args(argv)
    failed = 0
    for c in all_commands():
        if a.list:
            print(f"{c.source}: {c.line()}")
            continue
        r = run(c)
        if r.returncode:
            failed += 1
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"FAIL {c.source}: {c.line()}\n     {last}")
        else:
            print(f"ok   {c.source}: {c.line()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
