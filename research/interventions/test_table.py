"""research.interventions.table: one row per rollout run, named by its file."""
import gzip
import json

from research.interventions.table import table


def test_row_names_policy_and_failures(tmp_path):
    run = {"episodes": 3, "successes": 2, "max_late": 2,
           "results": [{"seed": 1000, "success": True}, {"seed": 1001, "success": False}, {"seed": 1002, "success": True}]}
    p = tmp_path / "takeovers-1000.json.gz"
    p.write_bytes(gzip.compress(json.dumps(run).encode()))
    head, rule, got = table([p])
    assert head.startswith("| policy |") and rule.startswith("|---")
    assert got == "| takeovers | seeds 1000–1002, plans 0–2 steps late | 2/3 [21–94 %] | 1001 |"


def test_row_names_the_least_lateness(tmp_path):
    """A screen run with ``--min-late`` says so (its files record ``min_late``)."""
    run = {"episodes": 1, "successes": 1, "max_late": 5, "min_late": 3, "results": [{"seed": 1000, "success": True}]}
    p = tmp_path / "shipped-late1000.json.gz"
    p.write_bytes(gzip.compress(json.dumps(run).encode()))
    assert table([p])[2] == "| shipped | seeds 1000–1000, plans 3–5 steps late | 1/1 [21–100 %] | none |"
