"""The simulated world: one Meta-World v3 task, OOD-level resets, fast offscreen camera.

No networking here; :mod:`sim.bridge` puts this behind Modbus and HTTP.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "osmesa")
# llvmpipe (Mesa's software rasterizer behind OSMesa/EGL without a GPU): render in the calling
# thread; at 96x96 worker threads only add synchronisation, and they suffer most on a busy box.
os.environ.setdefault("LP_NUM_THREADS", "0")

import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from . import ood  # noqa: E402

warnings.filterwarnings("ignore", message="Constant\\(s\\) may be too high")

# task name -> (Meta-World env name, scripted expert policy class name)
TASKS: dict[str, tuple[str, str]] = {
    "button-press": ("button-press-v3", "SawyerButtonPressV3Policy"),
    "drawer-open": ("drawer-open-v3", "SawyerDrawerOpenV3Policy"),
    "assembly": ("assembly-v3", "SawyerAssemblyV3Policy"),
    "bin-picking": ("bin-picking-v3", "SawyerBinPickingV3Policy"),
    "hammer": ("hammer-v3", "SawyerHammerV3Policy"),
}

OBS_DIM = 39
ACTION_DIM = 4
DEFAULT_CAMERA = "corner2"
# Meta-World v3's corner cameras render upside down with mujoco.Renderer: rotate them by 180 degrees.
ROTATE_180 = {"corner", "corner2"}


def normalize_task(task: str) -> str:
    t = str(task).strip().lower()
    if t.endswith("-v3"):
        t = t[:-3]
    if t not in TASKS:
        raise ValueError(f"unknown task {task!r}; want one of {', '.join(TASKS)}")
    return t


def expert_policy(task: str):
    """Meta-World's scripted expert for a task (takes the 39-dim observation)."""
    from metaworld import policies

    return getattr(policies, TASKS[normalize_task(task)][1])()


def _make_env(task: str):
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    env = ALL_V3_ENVIRONMENTS[TASKS[task][0]]()
    # Goal observable (as Meta-World's MT benchmarks): obs[36:39] = goal position.
    env._partially_observable = False
    try:
        del env.sawyer_observation_space  # cached property, recomputed for the new observability
    except AttributeError:
        pass
    env._set_task_called = True
    env._freeze_rand_vec = True  # we hand it the rand vec of each episode ourselves
    return env


FAST_MESH_CELL = 0.01  # m: vertex-clustering cell of the rendered meshes in "fast" quality


def decimate_visual_meshes(model, cell: float) -> tuple[int, int]:
    """Vertex-clustering decimation of the meshes drawn in geom group 1 (Meta-World's visuals).

    Only the triangles the renderer uploads change (mesh_face / mesh_facenormal /
    mesh_facenum); vertices, convex hulls and everything physics reads stay as
    compiled, so simulation is bit-identical (tested). Call before creating
    the renderer. Returns (faces before, faces after).
    """
    mids = sorted({int(model.geom_dataid[i]) for i in range(model.ngeom)
                   if model.geom_type[i] == mujoco.mjtGeom.mjGEOM_MESH and model.geom_group[i] == 1})
    before = after = 0
    for mid in mids:
        va, vn = model.mesh_vertadr[mid], model.mesh_vertnum[mid]
        fa, fn = model.mesh_faceadr[mid], model.mesh_facenum[mid]
        verts = model.mesh_vert[va:va + vn]
        faces = model.mesh_face[fa:fa + fn].copy()
        fnorm = model.mesh_facenormal[fa:fa + fn].copy()
        ftex = model.mesh_facetexcoord[fa:fa + fn].copy() if model.mesh_facetexcoord.shape[0] else None
        key = np.floor(verts / cell).astype(np.int64)
        _, rep_idx, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        rep = rep_idx[np.asarray(inv).ravel()]
        f2 = rep[faces]
        keep = (f2[:, 0] != f2[:, 1]) & (f2[:, 1] != f2[:, 2]) & (f2[:, 0] != f2[:, 2])
        idx = np.nonzero(keep)[0]
        _, uniq = np.unique(np.sort(f2[idx], axis=1), axis=0, return_index=True)
        idx = idx[np.sort(uniq)]
        k = len(idx)
        if k == 0:
            continue
        model.mesh_face[fa:fa + k] = f2[idx]
        model.mesh_facenormal[fa:fa + k] = fnorm[idx]
        if ftex is not None:
            model.mesh_facetexcoord[fa:fa + k] = ftex[idx]
        model.mesh_facenum[mid] = k
        before += int(fn)
        after += k
    return before, after


# Injected faults (docs/sim.md, docs/evaluation.md): things the
# demonstrations never contained, switched on at a given environment step.
#   push:   the arm is shoved PUSH_DISTANCE m in a seeded horizontal direction
#           (the mocap target jumps, the weld drags the hand after it), once.
#   object: a second object appears in the state vector's empty object slot
#           (obs[11:18], pose of "object 2", zero in the demonstrations of every
#           task but hammer, whose slot holds the nail), 6 cm beside the hand
#           where it was at the onset, as a perception stack would report a
#           new thing on the table; and the camera sees it there: a blue box
#           (OBJECT_HALF_SIZE) drawn into every frame from the onset, so a
#           policy that reads only its camera meets it too. The physics is
#           unchanged (nothing collides with it). On hammer the slot holds the
#           nail, so only the camera sees the box: the fault for its camera
#           bundles (sim eval refuses it with a state bundle on hammer).
#   occlusion: the camera is blocked: a dark square over the middle half of
#           every rendered frame (a quarter of the image), as a hand or a
#           cable in front of the lens would. State and physics are unchanged:
#           the fault for image policies.
#   blackout: the camera delivers black frames from the onset (a dead sensor,
#           a lens cap, a cable that lost its video but not its link).
#   freeze: the camera keeps delivering the frame of the onset, with fresh
#           timestamps, as a stuck capture pipeline does: the watchdog's
#           frame age sees nothing wrong.
#   camera_shift: the camera's mount is knocked at the onset: the camera
#           moves CAMERA_SHIFT m sideways and turns CAMERA_TILT_DEG degrees,
#           for the rest of the episode.
#   watch_shift: the watch camera's mount is knocked (the bridge's
#           --watch-camera, render(camera=...)), as camera_shift knocks the
#           policy's: the policy's own view is unchanged.
#   zero_state: the arm's state reads all zeros, as a failed encoder or a
#           dead bus would report: from the onset on, the arm's own entries of
#           every observation returned (hand xyz and gripper, obs[0:4], and
#           their previous-frame copy, obs[18:22]) are 0. Only the reading:
#           the physics is unchanged.
FAULTS = ("push", "object", "occlusion", "zero_state", "blackout", "freeze", "camera_shift", "watch_shift")
#: faults of the camera alone: they need a camera and leave state and physics alone
CAMERA_FAULTS = ("occlusion", "blackout", "freeze", "camera_shift", "watch_shift")
OCCLUSION_GREY = 30
CAMERA_SHIFT = 0.05
CAMERA_TILT_DEG = 5.0
PUSH_DISTANCE = 0.08
#: the object fault's box, half-sizes in metres (a 5 cm cube) and its colour
OBJECT_HALF_SIZE = (0.025, 0.025, 0.025)
OBJECT_RGBA = (0.1, 0.25, 0.9, 1.0)
#: tasks whose "object 2" slot holds one of their own objects (hammer: the nail)
SLOT_TAKEN = ("hammer",)
OBJ2 = slice(11, 18)
OBJ2_PREV = slice(29, 36)
ARM_STATE = slice(0, 4)
ARM_STATE_PREV = slice(18, 22)


@dataclass(frozen=True)
class Fault:
    """An injected fault: kind (one of FAULTS) from environment step ``step``."""

    kind: str
    step: int

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"fault kind {self.kind!r}: want one of {', '.join(FAULTS)}")
        if self.step < 0:
            raise ValueError(f"fault step {self.step}: must be >= 0")


@dataclass
class StepResult:
    obs: np.ndarray
    reward: float
    success: bool
    truncated: bool
    unstable: bool


class World:
    """A Meta-World task with OOD-level, seeded resets and an offscreen camera.

    camera_size: (width, height) or None for no rendering.
    """

    def __init__(self, task: str = "button-press", camera_size: tuple[int, int] | None = (96, 96),
                 camera_name: str = DEFAULT_CAMERA, max_steps: int | None = None, render_quality: str = "fast"):
        if render_quality not in ("fast", "full"):
            raise ValueError("render_quality must be fast or full")
        self.render_quality = render_quality
        self.camera_size = camera_size
        self.camera_name = camera_name
        self.max_steps_override = max_steps
        self._envs: dict[str, object] = {}
        self._defaults: dict[tuple[str, str], np.ndarray] = {}
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}  # by (width, height)
        self._renderer_task: str | None = None
        self._fast_tasks: set[str] = set()  # models already prepared for fast rendering
        self.task = normalize_task(task)
        self.level = "0"
        self.seed = 0
        self.episode = 0
        self.step_count = 0
        self.success = False
        self.success_step: int | None = None
        self.ret = 0.0
        self.truncated = False
        self.unstable = False
        self.obs = np.zeros(OBS_DIM)
        self.sample: ood.Sample | None = None
        self.fault: Fault | None = None
        self._fault_vec = np.zeros(3)
        self._obj2: np.ndarray | None = None
        self.last_render_s = 0.0
        self.last_step_s = 0.0

    # --- env management -------------------------------------------------------
    @property
    def env(self):
        return self._get_env(self.task)

    def _get_env(self, task: str):
        if task not in self._envs:
            env = _make_env(task)
            self._envs[task] = env
            for lv in ood.OOD[task].levels.values():
                for b in lv.bodies:
                    self._defaults[(task, b.body)] = env.model.body(b.body).pos.copy()
        return self._envs[task]

    @property
    def max_steps(self) -> int:
        return int(self.max_steps_override or self.env.max_path_length)

    def close(self):
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
        for env in self._envs.values():
            try:
                env.close()
            except Exception:  # noqa: BLE001
                pass
        self._envs.clear()

    # --- episodes ---------------------------------------------------------------
    def reset(self, task: str | None = None, level: str | None = None, seed: int | None = None,
              fault: Fault | None = None) -> np.ndarray:
        """Start an episode. ``fault`` (or None) is injected during this episode only."""
        if task is not None:
            self.task = normalize_task(task)
        if level is not None:
            self.level = ood.normalize_level(level)
        if seed is not None:
            self.seed = int(seed)
        env = self.env
        rng = np.random.default_rng([self.seed, ood.LEVELS.index(self.level), sum(map(ord, self.task))])
        smp = ood.sample(self.task, self.level, rng)
        self.sample = smp
        # restore moved bodies, then apply this episode's pre-reset offsets
        for (t, body), pos in self._defaults.items():
            if t == self.task:
                env.model.body(body).pos[:] = pos
        for body, (off, after) in smp.bodies.items():
            if not after:
                env.model.body(body).pos[:2] = self._defaults[(self.task, body)][:2] + off
        env._last_rand_vec = smp.rand_vec.copy()
        env.max_path_length = self.max_steps
        env.seed(self.seed)
        obs, _ = env.reset()
        post = {b: off for b, (off, after) in smp.bodies.items() if after}
        if post:
            for body, off in post.items():
                env.model.body(body).pos[:2] = self._defaults[(self.task, body)][:2] + off
            mujoco.mj_forward(env.model, env.data)
            if self.task == "hammer":
                env._target_pos = env._get_site_pos("goal")
                env.nail_init_pos = env._get_site_pos("nailHead")
            obs = env._get_obs()
            obs[18:36] = obs[0:18]
            env._prev_obs = obs[0:18].copy()
        self.obs = np.array(obs, dtype=np.float64)
        self.fault = fault
        self._obj2 = None
        self._frozen: dict[tuple[int, int], np.ndarray] = {}
        self._restore_camera()
        ang = np.random.default_rng([self.seed, 7919]).uniform(0, 2 * np.pi)
        self._fault_vec = PUSH_DISTANCE * np.array([np.cos(ang), np.sin(ang), 0.0])
        self.episode += 1
        self.step_count = 0
        self.success = False
        self.success_step = None
        self.ret = 0.0
        self.truncated = False
        self.unstable = False
        self._zero_arm_state()  # a fault from step 0 reads zeros from the start
        return self.obs

    def step(self, action) -> StepResult:
        a = np.asarray(action, dtype=np.float64).reshape(ACTION_DIM)
        a = np.where(np.isfinite(a), a, 0.0)
        a = np.clip(a, -1.0, 1.0).astype(np.float32)
        if self.truncated:
            return StepResult(self.obs, 0.0, self.success, True, self.unstable)
        t0 = time.perf_counter()
        env = self.env
        f = self.fault
        if f is not None and f.kind == "push" and self.step_count == f.step:
            env.data.mocap_pos[0] = np.clip(env.data.mocap_pos[0] + self._fault_vec, env.mocap_low, env.mocap_high)
        obs, reward, _term, trunc, info = env.step(a)
        self.last_step_s = time.perf_counter() - t0
        self.obs = np.array(obs, dtype=np.float64)  # a copy: faults write into it, not into the env's
        if f is not None and f.kind == "object" and self.step_count + 1 >= f.step:
            self._inject_object()
        self.step_count += 1
        self._zero_arm_state()
        self.ret += float(reward)
        if info.get("success") and not self.success:
            self.success = True
            self.success_step = self.step_count
        self.truncated = bool(trunc) or self.step_count >= self.max_steps
        self.unstable = bool(getattr(env, "_did_see_sim_exception", False))
        return StepResult(self.obs, float(reward), self.success, self.truncated, self.unstable)

    def _inject_object(self) -> None:
        """Write the distractor's pose into obs[11:18] (and the previous frame's slot after the onset step).

        On a task whose second object slot is taken (hammer's nail) the slot keeps its object and
        only the camera sees the distractor (render draws it at self._obj2).
        """
        if self._obj2 is None:
            pos = self.obs[0:3] + np.array([0.06, 0.0, 0.0])
            pos[2] = max(pos[2] - 0.05, 0.02)
            self._obj2 = np.concatenate([pos, [1.0, 0.0, 0.0, 0.0]])
            first = True
        else:
            first = False
        if self.task in SLOT_TAKEN:
            return
        self.obs[OBJ2] = self._obj2
        if not first:
            self.obs[OBJ2_PREV] = self._obj2

    def _zero_arm_state(self) -> None:
        """Under the zero_state fault, from its step on: the arm's entries of self.obs read 0."""
        f = self.fault
        if f is not None and f.kind == "zero_state" and self.step_count >= f.step:
            self.obs[ARM_STATE] = 0.0
            self.obs[ARM_STATE_PREV] = 0.0

    def target(self) -> np.ndarray:
        """The hand's controller target: the mocap body the hand is welded to (a copy)."""
        return np.array(self.env.data.mocap_pos[0], dtype=np.float64)

    def physics(self) -> dict:
        """What the simulator knows and a real arm's registers do not, for a trace (the bridge's
        ``--trace``): the hand's true position, its controller's target (the mocap body the hand is
        welded to), the first object's position as observed, and the contacts now, each named
        ``a|b`` (a geom's name, else its body's), sorted, without repeats."""
        m, d = self.env.model, self.env.data

        def name(g: int) -> str:
            return m.geom(g).name or m.body(int(m.geom_bodyid[g])).name

        pairs = {f"{name(int(c.geom1))}|{name(int(c.geom2))}" for c in d.contact[:d.ncon]}
        return {"hand": [float(x) for x in d.body("hand").xpos], "target": [float(x) for x in self.target()],
                "object": [float(x) for x in self.obs[4:7]], "contacts": sorted(pairs)}

    def hold(self) -> None:
        """Stop the arm where it is: the mocap target jumps to the hand (a controller's stop)."""
        env = self.env
        env.data.mocap_pos[0] = env.data.body("hand").xpos

    # --- camera -----------------------------------------------------------------
    def _get_renderer(self, size: tuple[int, int]) -> mujoco.Renderer:
        if self._renderer_task != self.task:
            for r in self._renderers.values():
                r.close()
            self._renderers.clear()
            self._renderer_task = self.task
        r = self._renderers.get(size)
        if r is not None:
            return r
        w, h = size
        m = self.env.model
        # Cheap offscreen rendering: no MSAA, no shadow map, a framebuffer of the image size
        # (read when the renderer is made: each size gets its own).
        m.vis.quality.offsamples = 0
        m.vis.quality.shadowsize = 0
        m.vis.global_.offwidth = max(w, 1)
        m.vis.global_.offheight = max(h, 1)
        if self.render_quality == "fast" and self.task not in self._fast_tasks:
            self._fast_tasks.add(self.task)
            # The Sawyer's head display (5.5k triangles) is out of the task's way: not drawn.
            for i in range(m.ngeom):
                if m.body(m.geom_bodyid[i]).name == "head":
                    m.geom_group[i] = 5  # a group the default scene option does not draw
            decimate_visual_meshes(m, FAST_MESH_CELL)
        r = self._renderers[size] = mujoco.Renderer(m, height=h, width=w)
        return r

    def prepare(self, size: tuple[int, int]) -> None:
        """Make the renderer for a view of the policy's camera at size, and render it once, if
        this task does not have it yet. The first render at a size (a new framebuffer, Mesa's
        llvmpipe compiling its shaders) can take most of a second on a slow 2-core host, against
        about 20 ms a frame after (python -m sim.bench); a display view made when a viewer
        connects held the next Modbus reply back by that much, and the runtime's loop_late
        watchdog stopped the arm. Without a camera it does nothing."""
        if self.camera_size and not self.has_renderer(size):
            self.render(tuple(size))

    def has_renderer(self, size: tuple[int, int]) -> bool:
        """Whether this task's renderer for size is made (prepare, or a render at size)."""
        return self._renderer_task == self.task and tuple(size) in self._renderers

    def render(self, size: tuple[int, int] | None = None, camera: str | None = None) -> np.ndarray | None:
        """RGB uint8 (H, W, 3) of the current state, or None without a camera.

        size: (width, height) to render at instead of camera_size: the same camera and
        scene at another resolution (a display view). last_render_s times camera_size only.
        camera: another of the scene's cameras (a watch camera, the bridge's --watch-camera):
        the object fault's box is drawn into its view too, as it is part of the scene; the
        faults of the camera itself (occlusion, blackout, freeze, camera_shift) stay the
        policy camera's; watch_shift knocks this one.
        """
        if not self.camera_size:
            return None
        t0 = time.perf_counter()
        if camera is not None and camera != self.camera_name:
            return self._render_other(size or self.camera_size, camera)
        f = self.fault
        on = f is not None and self.step_count >= f.step
        key = tuple(size or self.camera_size)
        if on and f.kind == "freeze" and key in self._frozen:
            return self._frozen[key]
        if on and f.kind == "camera_shift":
            self._shift_camera(self.camera_name)
        r = self._get_renderer(size or self.camera_size)
        r.update_scene(self.env.data, camera=self.camera_name)
        if on and f.kind == "object" and self._obj2 is not None:
            self._draw_object(r.scene)
        self._light(r.scene)
        img = r.render()
        if self.camera_name in ROTATE_180:
            img = np.ascontiguousarray(img[::-1, ::-1])
        if on and f.kind == "occlusion":
            img = np.array(img, copy=True)
            h, w = img.shape[:2]
            img[h // 4:h - h // 4, w // 4:w - w // 4] = OCCLUSION_GREY
        elif on and f.kind == "blackout":
            img = np.zeros_like(img)
        elif on and f.kind == "freeze":
            self._frozen[key] = img = np.array(img, copy=True)
        if size is None or size == self.camera_size:
            self.last_render_s = time.perf_counter() - t0
        return img

    def _render_other(self, size: tuple[int, int], camera: str) -> np.ndarray:
        """render() through another of the scene's cameras: the scene as it is, the object
        fault's box included, with none of the policy camera's own faults; watch_shift
        knocks this camera."""
        if mujoco.mj_name2id(self.env.model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0:
            raise ValueError(f"no camera {camera!r} in the {self.task} scene")
        f = self.fault
        on = f is not None and self.step_count >= f.step
        if on and f.kind == "watch_shift":
            self._shift_camera(camera)
        r = self._get_renderer(size)
        r.update_scene(self.env.data, camera=camera)
        if on and f.kind == "object" and self._obj2 is not None:
            self._draw_object(r.scene)
        self._light(r.scene)
        img = r.render()
        if camera in ROTATE_180:
            img = np.ascontiguousarray(img[::-1, ::-1])
        return img

    def _light(self, sc: mujoco.MjvScene) -> None:
        """The render flags and (fast quality) the one brightened light every view uses."""
        fl = sc.flags
        fl[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        fl[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        fl[mujoco.mjtRndFlag.mjRND_SKYBOX] = 0
        if self.render_quality == "fast":
            # one light instead of three (software rasterizer: lighting is per vertex), brightened
            sc.nlight = 1
            sc.lights[0].ambient[:] = 0.35
            sc.lights[0].diffuse[:] = 0.85

    def _draw_object(self, scene: mujoco.MjvScene) -> None:
        """Draw the object fault's box at its pose (obs[11:14]) into scene: seen, not simulated."""
        if scene.ngeom >= scene.maxgeom:
            raise RuntimeError(f"object fault: the scene holds {scene.maxgeom} geoms already, no room for the object")
        mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_BOX,
                            np.asarray(OBJECT_HALF_SIZE, dtype=np.float64), self._obj2[:3].astype(np.float64),
                            np.eye(3).reshape(9), np.asarray(OBJECT_RGBA, dtype=np.float32))
        scene.ngeom += 1

    def _shift_camera(self, camera: str) -> None:
        """Knock a camera (the camera_shift and watch_shift faults): once per episode, undone
        by the next reset."""
        if getattr(self, "_camera_home", None) is not None:
            return
        m = self.env.model
        cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cid < 0:
            return
        self._camera_home = (cid, m.cam_pos[cid].copy(), m.cam_quat[cid].copy())
        m.cam_pos[cid] = m.cam_pos[cid] + np.array([CAMERA_SHIFT, 0.0, 0.0])
        half = np.deg2rad(CAMERA_TILT_DEG) / 2
        turn = np.array([np.cos(half), 0.0, 0.0, np.sin(half)])  # about the camera's optical axis
        q = np.zeros(4)
        mujoco.mju_mulQuat(q, m.cam_quat[cid], turn)
        m.cam_quat[cid] = q
        mujoco.mj_camlight(m, self.env.data)  # the frame rendered now shows the knock

    def _restore_camera(self) -> None:
        home = getattr(self, "_camera_home", None)
        if home is not None:
            cid, pos, quat = home
            self.env.model.cam_pos[cid] = pos
            self.env.model.cam_quat[cid] = quat
            # the camera's pose in data is derived: without this the reset frame still shows the knock
            mujoco.mj_camlight(self.env.model, self.env.data)
        self._camera_home = None

    # --- state ------------------------------------------------------------------
    def info(self) -> dict:
        s = self.sample
        return {
            "task": self.task,
            "env": TASKS[self.task][0],
            "level": self.level,
            "seed": self.seed,
            "episode": self.episode,
            "step": self.step_count,
            "max_steps": self.max_steps,
            "success": self.success,
            "success_step": self.success_step,
            "return": self.ret,
            "truncated": self.truncated,
            "done": self.truncated or self.success,
            "unstable": self.unstable,
            "rand_vec": [float(x) for x in s.rand_vec] if s else None,
            "injected": {"kind": self.fault.kind, "step": self.fault.step} if self.fault else None,
            "bodies": {k: [float(x) for x in v[0]] for k, v in s.bodies.items()} if s else {},
            "goal": [float(x) for x in self.obs[36:39]],
        }
