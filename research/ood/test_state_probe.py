"""``research/ood/state_probe.py``: the constructed scenes it reads the state score on;
``state_floor.py``: the input scale it retrains the state term with."""
import numpy as np
import pytest

from research.ood import state_floor as sf
from research.ood import state_probe as sp


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v rotated by the unit quaternion q (w, x, y, z)."""
    conj = q * np.array([1, -1, -1, -1])
    return sp.quat_mul(sp.quat_mul(q, np.concatenate([[0.0], v])), conj)[1:]


@pytest.mark.parametrize("axis,deg,v,want", [
    (0, 90, [0, 1, 0], [0, 0, 1]),     # about x: y goes to z (a puck on its edge)
    (1, 90, [0, 0, 1], [1, 0, 0]),     # about y: z goes to x
    (2, 90, [1, 0, 0], [0, 1, 0]),     # about z: x goes to y
    (2, 180, [1, 0, 0], [-1, 0, 0]),
    (0, 30, [1, 0, 0], [1, 0, 0]),     # the axis itself does not move
])
def test_rotation(axis, deg, v, want):
    q = sp.rotation(axis, deg)
    assert np.linalg.norm(q) == pytest.approx(1.0)
    assert rotate(q, np.array(v, float)) == pytest.approx(np.array(want, float), abs=1e-12)


def test_quat_mul_composes_rotations():
    q = sp.quat_mul(sp.rotation(2, 30), sp.rotation(2, 60))
    assert q == pytest.approx(sp.rotation(2, 90))
    assert sp.quat_mul(sp.rotation(0, 45), np.array([1.0, 0, 0, 0])) == pytest.approx(sp.rotation(0, 45))


def test_changes_keep_the_scene_at_rest():
    """Each change writes the same values into this frame and the previous frame's copy, the goal untouched;
    only the arm's first zeroed reading is marked as a change of the newest frame alone."""
    o = np.arange(39, dtype=float) / 100 + 0.5
    o[sp.OBJ_QUAT] = o[sp.OBJ_QUAT.start + sp.FRAME:sp.OBJ_QUAT.stop + sp.FRAME] = [1.0, 0, 0, 0]
    newest_only = []
    for label, change, newest in sp.changes():
        c = change(o)
        now, prev = ~np.isclose(c[:sp.FRAME], o[:sp.FRAME]), ~np.isclose(c[sp.FRAME:2 * sp.FRAME], o[sp.FRAME:2 * sp.FRAME])
        assert (now == prev).all(), label  # the same dimensions change in both frames ...
        assert c[:sp.FRAME][now] == pytest.approx(c[sp.FRAME:2 * sp.FRAME][now]), label  # ... to the same values
        assert c[2 * sp.FRAME:] == pytest.approx(o[2 * sp.FRAME:]), label
        if label != "unchanged":
            assert not np.allclose(c, o), label
        if newest:
            newest_only.append(label)
    assert newest_only == ["arm state zeroed, its first reading"]


@pytest.mark.parametrize("std,floor,frames,want", [
    ([0.003, 0.03, 0.3], 0.0, 2, [1, 1, 1, 1, 1, 1]),               # floor 0: the shipped term, unscaled
    ([0.003, 0.03, 0.3], 0.03, 1, [0.1, 1, 1]),                      # finer than the floor: scaled down to it
    ([0.003, 0.03, 0.3], 0.1, 2, [0.03, 0.3, 1, 0.03, 0.3, 1]),      # tiled over the cond's frames
])
def test_state_floor_input_scale(std, floor, frames, want):
    assert sf.input_scale(np.array(std), floor, frames) == pytest.approx(np.array(want, np.float32))


@pytest.mark.parametrize("newest_only,frames,want_changed", [
    (False, 2, [True, True]),    # at rest: every frame the term reads is changed
    (True, 2, [False, True]),    # the change's first reading: only the newest frame
    (True, 3, [False, False, True]),
])
def test_history(newest_only, frames, want_changed):
    o = np.zeros(39)
    h = sp.history(o, lambda x: x + 1, newest_only, frames)
    assert [bool(f[0] == 1) for f in h] == want_changed
