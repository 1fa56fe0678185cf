"""The gate's 2-of-5 rule as the analysis reads it, and the shipped term over the tracked recordings."""
from pathlib import Path

import numpy as np
import pytest

from research.stop_rollouts import stop_on_rollouts as sr

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("scores, want", [
    ([0, 9, 0, 0, 0, 0, 9], [False] * 7),              # two over, 5 apart: never 2 in the last 5
    ([0, 9, 0, 0, 9, 0, 0], [False] * 4 + [True] * 2 + [False]),
    ([9, 9, 0, 0, 0, 0, 0], [False, True, True, True, True, False, False]),
])
def test_trips_is_two_of_the_last_five(scores, want):
    assert sr.trips(np.array(scores, float), 5.0).tolist() == want


def test_shipped_term_on_the_tracked_rollouts(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert sr.main(["--task", "drawer-open", "--bundle", str(ROOT / "bundles/metaworld-drawer-open"),
                    "--rollouts", str(ROOT / "research/stop_rollouts/data/drawer-open"),
                    "--max-success-step", "204", "--json", str(out)]) == 0
    assert "rollouts tripping 2-of-5: d0 0/8, d1 0/8, d2 0/8, d3 0/8" in capsys.readouterr().out
