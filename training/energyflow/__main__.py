"""``python -m energyflow``: see :mod:`energyflow.cli`.

A bad input (a missing file, data that does not fit the bundle, a bad flag
value, a bundle that fails its checks) ends with one line on stderr naming
it and exit status 2; ``ENERGYFLOW_TRACEBACK=1`` shows the traceback instead.
"""
import os
import sys

from .bundle import BundleError
from .cli import main


def run() -> int:
    try:
        return main()
    except (ValueError, BundleError, FileNotFoundError) as e:
        if os.environ.get("ENERGYFLOW_TRACEBACK"):
            raise
        cmd = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        print(f"energyflow {cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
