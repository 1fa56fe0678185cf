import numpy as np
import pytest

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


def _rollout(w, pol, n):
    obs, out = w.obs, []
    for _ in range(n):
        obs = w.step(pol.get_action(obs)).obs.copy()
        out.append(obs)
    return np.array(out)


def test_faults_change_the_episode_from_their_step_only():
    import pytest

    from sim.world import OBJ2, OBJ2_PREV, Fault

    w = World("button-press", camera_size=None)
    pol = expert_policy("button-press")
    w.reset(seed=3)
    clean = _rollout(w, pol, 20)
    w.reset(seed=3, fault=Fault("object", 10))
    obj = _rollout(w, pol, 20)
    assert w.info()["injected"] == {"kind": "object", "step": 10}
    np.testing.assert_array_equal(obj[:9], clean[:9])        # steps 1..9 untouched
    assert np.all(clean[:, OBJ2] == 0)
    assert np.all(obj[9:, OBJ2][:, 3] == 1.0) and np.abs(obj[9:, OBJ2][:, :3]).sum() > 0
    assert np.all(obj[9, OBJ2_PREV] == 0) and np.all(obj[10:, OBJ2_PREV] == obj[10:, OBJ2])
    np.testing.assert_array_equal(obj[:, 0:3], clean[:, 0:3])  # the physics is unchanged

    w.reset(seed=3, fault=Fault("push", 10))
    push = _rollout(w, pol, 20)
    np.testing.assert_array_equal(push[:10], clean[:10])
    moved = np.linalg.norm(push[12, 0:3] - clean[12, 0:3])
    assert moved > 0.02, moved                               # the hand was shoved
    w.reset(seed=3)
    assert w.fault is None                                   # one episode only
    with pytest.raises(ValueError, match="want one of"):
        Fault("smoke", 1)
    w.close()


def test_occlusion_fault_blocks_the_camera_only():
    from sim.world import OCCLUSION_GREY, Fault

    w = World("button-press", camera_size=(32, 32))
    pol = expert_policy("button-press")
    w.reset(seed=3)
    clean = _rollout(w, pol, 12)
    clean_img = w.render()
    w.reset(seed=3, fault=Fault("occlusion", 10))
    before = None
    for i in range(12):
        if i == 9:
            before = w.render()                              # step 9: not yet occluded
        w.step(pol.get_action(w.obs))
    img = w.render()
    np.testing.assert_array_equal(w.obs, clean[-1])          # state and physics unchanged
    assert (before[8:24, 8:24] != OCCLUSION_GREY).any()
    assert (img[8:24, 8:24] == OCCLUSION_GREY).all()
    np.testing.assert_array_equal(img[:8], clean_img[:8])    # the rest of the frame is the scene
    w.close()


@pytest.mark.parametrize("kind", ["blackout", "freeze", "camera_shift"])
def test_camera_faults_change_the_frames_only(kind):
    from sim.world import Fault

    w = World("button-press", camera_size=(32, 32), camera_name="topview")
    pol = expert_policy("button-press")
    w.reset(seed=3)
    clean_start = w.render()
    clean_frames = []
    for _ in range(12):
        w.step(pol.get_action(w.obs))
        clean_frames.append(w.render())
    clean_obs = w.obs.copy()
    w.reset(seed=3, fault=Fault(kind, 6))
    frames = []
    for _ in range(12):
        w.step(pol.get_action(w.obs))
        frames.append(w.render())
    np.testing.assert_array_equal(w.obs, clean_obs)           # state and physics unchanged
    for i in range(5):                                        # before the onset: the scene
        np.testing.assert_array_equal(frames[i], clean_frames[i])
    after = frames[6:]
    if kind == "blackout":
        assert all((f == 0).all() for f in after)
    elif kind == "freeze":
        assert all((f == frames[5]).all() for f in after)     # the onset's frame, held
        assert not (clean_frames[-1] == clean_frames[5]).all()  # while the arm moved
    else:
        assert all((f != c).any() for f, c in zip(after, clean_frames[6:]))
    w.reset(seed=3)                                           # the next episode is clean,
    np.testing.assert_array_equal(w.render(), clean_start)    # from its reset frame on
    w.step(pol.get_action(w.obs))
    np.testing.assert_array_equal(w.render(), clean_frames[0])
    w.close()


def _frames_and_obs(w: World, pol, n: int) -> tuple[list, list]:
    """n expert steps from the current state: each step's frame and observation."""
    frames, obs = [], []
    for _ in range(n):
        w.step(pol.get_action(w.obs))
        frames.append(w.render())
        obs.append(w.obs.copy())
    return frames, obs


def _object_rollouts(task: str, onset: int, n: int):
    """The top view's world for task, its expert, and n steps of seed 3 without and with the
    object fault from step onset: (w, pol, (clean frames, clean obs), (frames, obs))."""
    from sim.world import Fault

    w = World(task, camera_size=(64, 64), camera_name="topview")
    pol = expert_policy(task)
    w.reset(seed=3)
    clean = _frames_and_obs(w, pol, n)
    w.reset(seed=3, fault=Fault("object", onset))
    return w, pol, clean, _frames_and_obs(w, pol, n)


def test_object_fault_is_seen_by_the_camera_and_not_simulated():
    from sim.world import OBJ2

    w, pol, (clean_frames, clean_obs), (frames, obs) = _object_rollouts("button-press", 6, 12)
    for i in range(5):                                        # before the onset: the scene
        np.testing.assert_array_equal(frames[i], clean_frames[i])
        np.testing.assert_array_equal(obs[i], clean_obs[i])
    np.testing.assert_array_equal(np.array(obs)[:, 0:4], np.array(clean_obs)[:, 0:4])  # not simulated
    assert np.abs(obs[-1][OBJ2][:3]).sum() > 0                # the state slot reports it
    for f, c in zip(frames[5:], clean_frames[5:]):
        changed = (f != c).any(axis=2)
        assert 4 <= changed.sum() < f.shape[0] * f.shape[1] // 4, changed.sum()  # a thing, not the view
        px = f[changed].astype(float)
        assert (px[:, 2] > px[:, 0] + 40).mean() > 0.5, px.mean(axis=0)  # it is blue
    w.reset(seed=3)                                           # gone with the next episode
    w.step(pol.get_action(w.obs))
    np.testing.assert_array_equal(w.render(), clean_frames[0])
    w.close()


def test_object_fault_on_hammer_keeps_the_nail_and_shows_the_box():
    from sim.world import OBJ2

    w, _, (clean_frames, clean_obs), (frames, obs) = _object_rollouts("hammer", 4, 10)
    np.testing.assert_array_equal(np.array(obs), np.array(clean_obs))  # the slot keeps the nail
    assert np.abs(clean_obs[-1][OBJ2][:3]).sum() > 0
    for f, c in zip(frames[3:], clean_frames[3:]):            # the camera sees the box
        changed = (f != c).any(axis=2)
        assert changed.sum() >= 4, changed.sum()
    w.close()


@pytest.mark.parametrize("task,watch", [("hammer", "corner"), ("drawer-open", "corner4")])
def test_watch_camera_sees_the_object_and_none_of_the_camera_faults(task, watch):
    """render(camera=...): another of the scene's cameras. The object fault's box is part of
    the scene and shows in it; the policy camera's own faults do not."""
    from sim.world import Fault

    w = World(task, camera_size=(96, 96), camera_name="topview")
    pol = expert_policy(task)
    w.reset(seed=3)
    clean = []
    for _ in range(8):
        w.step(pol.get_action(w.obs))
        clean.append((w.render(), w.render(camera=watch)))
    assert (clean[-1][0] != clean[-1][1]).any()               # another view
    w.reset(seed=3, fault=Fault("object", 4))
    for i in range(8):
        w.step(pol.get_action(w.obs))
        side = w.render(camera=watch)
        if i < 3:
            np.testing.assert_array_equal(side, clean[i][1])
        else:
            seen = (np.abs(side.astype(int) - clean[i][1]).max(axis=2) > 40).sum()
            assert seen >= 6, (i, seen)
    for kind in ("blackout", "occlusion", "freeze", "camera_shift"):
        w.reset(seed=3, fault=Fault(kind, 0))
        for i in range(3):
            w.step(pol.get_action(w.obs))
            np.testing.assert_array_equal(w.render(camera=watch), clean[i][1], err_msg=kind)
    # watch_shift knocks the watch camera from its onset, and only it; the next reset puts
    # it back
    w.reset(seed=3, fault=Fault("watch_shift", 3))
    for i in range(6):
        w.step(pol.get_action(w.obs))
        policy_view, side = w.render(), w.render(camera=watch)
        np.testing.assert_array_equal(policy_view, clean[i][0])
        if i < 2:
            np.testing.assert_array_equal(side, clean[i][1])
        else:
            moved = (np.abs(side.astype(int) - clean[i][1]).max(axis=2) > 40).mean()
            assert moved > 0.1, (i, moved)
    w.reset(seed=3)
    w.step(pol.get_action(w.obs))
    np.testing.assert_array_equal(w.render(camera=watch), clean[0][1])
    with pytest.raises(ValueError, match="no camera"):
        w.render(camera="nowhere")
    w.close()


def test_zero_state_fault_zeroes_the_arm_reading_only():
    from sim.world import ARM_STATE, ARM_STATE_PREV, Fault

    w = World("button-press", camera_size=None)
    pol = expert_policy("button-press")
    w.reset(seed=3)
    actions, clean = [], []
    for _ in range(20):
        actions.append(pol.get_action(w.obs))
        clean.append(w.step(actions[-1]).obs.copy())
    clean, hand = np.array(clean), w.env.data.body("hand").xpos.copy()
    # The same actions with the fault from step 10: the policy's view would
    # differ, so replaying them isolates what the fault itself changes.
    w.reset(seed=3, fault=Fault("zero_state", 10))
    faulted = np.array([w.step(a).obs.copy() for a in actions])
    assert w.info()["injected"] == {"kind": "zero_state", "step": 10}
    np.testing.assert_array_equal(faulted[:9], clean[:9])      # steps 1..9 untouched
    for s in (ARM_STATE, ARM_STATE_PREV):                     # from step 10 on, the arm reads 0
        assert np.all(clean[9:, s] != 0)
        assert np.all(faulted[9:, s] == 0)
    others = np.ones(faulted.shape[1], bool)
    others[ARM_STATE] = others[ARM_STATE_PREV] = False
    np.testing.assert_array_equal(faulted[:, others], clean[:, others])  # the rest of the reading
    np.testing.assert_array_equal(w.env.data.body("hand").xpos, hand)     # and the physics: unchanged
    assert np.all(w.obs[ARM_STATE] == 0)

    obs = w.reset(seed=3, fault=Fault("zero_state", 0))            # from the reset observation on
    assert np.all(obs[ARM_STATE] == 0) and np.all(obs[ARM_STATE_PREV] == 0)
    obs = w.reset(seed=3)                                          # one episode only
    assert w.fault is None and np.all(obs[ARM_STATE] != 0)
    w.close()


def test_a_display_view_render_leaves_the_policy_frames_alone():
    """The bridge renders a larger display view of the same camera between steps
    (research/camera/demo-view): the policy's frames are the same with or without it."""
    def frames(view: bool) -> np.ndarray:
        w = World("hammer", camera_size=(48, 48), camera_name="topview")
        pol = expert_policy("hammer")
        out = []
        for ep in range(2):
            w.reset(seed=5 + ep)
            out.append(w.render())
            for _ in range(8):
                if view:
                    w.render((160, 160))
                w.step(pol.get_action(w.obs))
                out.append(w.render())
        w.close()
        return np.array(out)

    np.testing.assert_array_equal(frames(True), frames(False))
