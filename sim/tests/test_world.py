import numpy as np

from sim.world import World, expert_policy


def test_fast_rendering_leaves_physics_bit_identical():
    trajs = {}
    for q in ("full", "fast"):
        w = World("hammer", camera_size=(32, 32), render_quality=q)
        pol = expert_policy("hammer")
        obs = w.reset(seed=5)
        img = w.render()  # fast: meshes decimated before the renderer exists
        assert img.shape == (32, 32, 3) and img.std() > 1
        t = []
        for _ in range(40):
            obs = w.step(pol.get_action(obs)).obs
            t.append(obs.copy())
        trajs[q] = np.array(t)
        w.close()
    np.testing.assert_array_equal(trajs["full"], trajs["fast"])


def test_no_camera_world_and_info():
    w = World("drawer-open", camera_size=None)
    obs = w.reset(level="S", seed=2)
    assert obs.shape == (39,) and w.render() is None
    info = w.info()
    assert info["task"] == "drawer-open" and info["level"] == "S" and info["step"] == 0
    assert info["goal"] == list(obs[36:39])
    w.close()
