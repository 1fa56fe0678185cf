import numpy as np
import pytest

from sim import ood
from sim.world import TASKS, World


def _inside(v, lo, hi):
    return all(a <= x <= b for x, a, b in zip(v, lo, hi))


@pytest.mark.parametrize("task", list(TASKS))
def test_level0_is_metaworld_range(task):
    w = World(task, camera_size=None)
    rs = w.env._random_reset_space
    lv = ood.OOD[task].levels["0"]
    np.testing.assert_allclose(lv.low, rs.low, atol=1e-9)
    np.testing.assert_allclose(lv.high, rs.high, atol=1e-9)
    w.close()


@pytest.mark.parametrize("task", list(TASKS))
def test_levels_sample_inside_their_box_outside_the_previous(task):
    rng = np.random.default_rng(0)
    spec = ood.OOD[task]
    for name in ood.LEVELS:
        lv = spec.levels[name]
        for _ in range(200):
            s = ood.sample(task, name, rng)
            v = s.rand_vec.copy()
            for b in lv.bodies:  # undo the carried bin offset to check the drawn vector
                for i, idx in enumerate(b.carry):
                    v[idx] -= s.bodies[b.body][0][i]
            assert _inside(v, lv.low, lv.high), (task, name, v)
            for e in lv.exclude:
                assert not _inside(v[list(e.dims)], e.low, e.high), (task, name, v)
            for b in lv.bodies:
                off = s.bodies[b.body][0]
                assert _inside(off, b.low, b.high)
                if b.exclude:
                    assert not _inside(off, *b.exclude)
            if spec.min_obj_goal_xy:
                assert np.linalg.norm(v[0:2] - v[3:5]) >= spec.min_obj_goal_xy
    # perturbations grow with the level: mean distance of the object from the level-0 centre
    c = (np.asarray(spec.levels["0"].low) + np.asarray(spec.levels["0"].high)) / 2
    d = {n: np.mean([np.linalg.norm(ood.sample(task, n, rng).rand_vec[:2] - c[:2]) for _ in range(100)])
         for n in ("0", "S", "M")}
    assert d["0"] < d["S"] < d["M"]


def test_world_levels_move_goal_and_are_seeded():
    w = World("hammer", camera_size=None)
    g0 = w.reset(level="0", seed=1)[36:39].copy()
    gl = w.reset(level="L", seed=1)[36:39].copy()
    off = w.info()["bodies"]["box"]
    np.testing.assert_allclose(gl[:2] - g0[:2], off, atol=1e-6)  # the nail (goal) moved with the box
    assert w.reset(level="0", seed=1)[36:39] == pytest.approx(g0)  # body restored
    a = w.reset(level="M", seed=7).copy()
    b = w.reset(level="M", seed=7).copy()
    np.testing.assert_array_equal(a, b)
    w.reset("bin-picking", level="L", seed=3)
    info = w.info()
    assert set(info["bodies"]) == {"bin_start", "bin_goal"}
    goal = w.obs[36:39]
    np.testing.assert_allclose(goal[:2], np.array([0.12, 0.7]) + info["bodies"]["bin_goal"], atol=1e-3)
    w.close()


def test_table_markdown_lists_all():
    t = ood.table_markdown()
    for task in TASKS:
        for lv in ood.LEVELS:
            assert f"| {task} | {lv} |" in t
