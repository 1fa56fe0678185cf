"""FIPER's action-chunk entropy as ``research/ood/ood_compare.py`` computes it (``action_chunk_entropy``)."""
import numpy as np
import pytest

from research.ood import ood_compare as oc

ace = oc.action_chunk_entropy

CELL = np.array([0.1, 0.1, 0.1])


def centers(idx: np.ndarray) -> np.ndarray:
    """Points at the centres of grid cells ``idx`` ``[B, 3]`` (integer cell coordinates)."""
    return (np.asarray(idx, np.float64) + 0.5) * CELL


def chunks(points: np.ndarray, T: int = 16, extra_dims: int = 1) -> np.ndarray:
    """A batch ``[B, T, 3 + extra_dims]`` whose every step holds ``points`` ``[B, 3]``; the extra (gripper)
    dimensions are random and must not count."""
    rng = np.random.default_rng(0)
    B = len(points)
    x = np.repeat(np.asarray(points, np.float64)[:, None], T, axis=1)
    return np.concatenate([x, rng.uniform(-1, 1, (B, T, extra_dims))], axis=2)


def test_identical_samples_give_zero() -> None:
    x = chunks(np.tile([[0.31, -0.42, 0.05]], (16, 1)))
    assert ace(x, CELL) == 0.0


@pytest.mark.parametrize("B", [2, 8, 16])
def test_distinct_far_apart_cells_give_log2_b(B: int) -> None:
    idx = np.stack([np.arange(B) * 10, -np.arange(B) * 7, np.zeros(B)], axis=1)
    assert ace(chunks(centers(idx)), CELL) == pytest.approx(np.log2(B))


def test_spread_batch_higher_than_tight() -> None:
    rng = np.random.default_rng(1)
    base = np.array([0.05, 0.05, 0.05])  # a cell centre
    tight = base + rng.normal(0, 0.005, (16, 3))
    spread = base + rng.normal(0, 0.3, (16, 3))
    h_tight, h_spread = ace(chunks(tight), CELL), ace(chunks(spread), CELL)
    assert h_spread > h_tight
    assert h_spread <= np.log2(16) + 1e-12


def test_bimodal_batch_gives_one_bit() -> None:
    rng = np.random.default_rng(2)
    a = centers([[3, 4, -2]]) + rng.normal(0, 0.003, (8, 3))
    b = centers([[-5, 1, 6]]) + rng.normal(0, 0.003, (8, 3))
    assert ace(chunks(np.concatenate([a, b])), CELL) == pytest.approx(1.0, abs=1e-9)


def test_mean_over_chunk_steps() -> None:
    """Steps with 0 and 1 bit average to 0.5; only the first 3 dimensions are binned."""
    x = np.zeros((4, 2, 4))
    x[:, 1, 0] = centers([[0, 0, 0], [0, 0, 0], [9, 0, 0], [9, 0, 0]])[:, 0]
    x[:, :, 3] = np.arange(4)[:, None] * 10.0  # gripper spread over 4 cells: ignored
    assert ace(x, CELL) == pytest.approx(0.5)


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        ace(np.zeros((4, 16)), CELL)
    with pytest.raises(ValueError):
        ace(np.zeros((4, 16, 4)), np.array([0.1, 0.0, 0.1]))


# --- the episode statistics through the gate's window (``episode_stats``) ---


@pytest.mark.parametrize("x, n, m, first, want", [
    ([0, 9, 0, 0, 0, 0], 2, 5, 6, 0.0),        # one spike: 2 of 5 never sees it
    ([0, 9, 0, 7, 0, 0], 2, 5, 6, 7.0),        # two within 5 steps: the smaller one
    ([0, 9, 0, 0, 0, 0, 7], 2, 5, 7, 0.0),     # 5 steps apart: never two in one window
    ([0, 9, 0, 7, 0, 0], 2, 5, 3, 0.0),        # the second after the first `first` steps
    ([3, 1, 2], 1, 1, 3, 3.0),                 # 1 of 1 is the max
    ([5], 2, 5, 1, float("-inf")),             # fewer than n steps
])
def test_window_max(x, n, m, first, want) -> None:
    assert oc.window_max(np.array(x, np.float64), n, m, first) == want


def test_episode_stats_fiper_windows_each_indicator_then_both() -> None:
    # RND over its threshold on steps 1 and 3, ACE on steps 2 and 4: never both on one step,
    # but each twice within 5 steps, so through 2 of 5 both indicators are over at step 4
    per = {"rnd": [np.array([0, 4, 0, 4, 0.0])], "ace": [np.array([0, 0, 6, 0, 6.0])]}
    thr = {"rnd": 2.0, "ace": 3.0}
    per["fiper"] = [np.minimum(oc.ratio(per["rnd"][0], 2.0), oc.ratio(per["ace"][0], 3.0))]
    plain = oc.episode_stats(per, thr, ["rnd", "ace", "fiper"], first=5)
    assert plain == {"rnd": [4.0], "ace": [6.0], "fiper": [0.0]}
    win = oc.episode_stats(per, thr, ["rnd", "ace", "fiper"], first=5, window=(2, 5))
    assert win["rnd"] == [4.0] and win["ace"] == [6.0]
    assert win["fiper"] == [2.0]  # min(4/2, 6/3) once both have two steps over in the window
    short = oc.episode_stats(per, thr, ["fiper"], first=4, window=(2, 5))
    assert short["fiper"] == [0.0]  # ACE has one step over in the first 4
