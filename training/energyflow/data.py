"""robomimic-style HDF5 demonstrations: validation, normalisation, windows.

Layout (also written by the runtime's recorder)::

    data/                      attrs: env (str), total (int, optional)
      demo_0/                  attrs: num_samples (int, optional)
        actions                float [L, D_a]
        obs/<key>              float [L, ...] (state) or uint8 [L, H, W, 3] (camera)

Windows (``T_o`` observations, ``T_p`` actions) follow Diffusion Policy and
are indexed by the *current* step ``i``: observations ``i-T_o+1 .. i``
(oldest first) and actions ``i-T_o+1 .. i-T_o+T_p``, so the action chunk
starts at the oldest observation and ``actions[T_o-1]`` is the action for the
newest one; the runtime executes ``actions[T_o-1 : T_o-1+T_a]``. At the
episode edges indices are clamped, as Diffusion Policy pads: the first
observation (and action) is repeated before the start and the last action
after the end. Current steps run over ``0 .. L-T_a`` so every executed chunk
is real data.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np


class DataError(ValueError):
    """A demonstration file is malformed; the message names the demo and key."""


_DEMO_RE = re.compile(r"^demo_(\d+)$")


@dataclass
class Demo:
    name: str
    actions: np.ndarray                  # [L, D_a] float32
    obs: Dict[str, np.ndarray]           # key -> [L, ...]

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])


@dataclass
class DatasetInfo:
    path: str
    env: str
    demos: List[str]
    action_dim: int
    obs_shapes: Dict[str, Tuple[int, ...]]
    total: int


def _demo_sort_key(name: str):
    m = _DEMO_RE.match(name)
    return (0, int(m.group(1))) if m else (1, name)


def _check_array(where: str, arr: np.ndarray, kind: str) -> None:
    if kind == "image":
        if arr.dtype != np.uint8:
            raise DataError(f"{where}: image observations must be uint8, got {arr.dtype}")
        if arr.ndim != 4 or arr.shape[-1] != 3:
            raise DataError(f"{where}: image observations must be [L,H,W,3], got shape {arr.shape}")
        return
    if not np.issubdtype(arr.dtype, np.floating):
        raise DataError(f"{where}: expected a float array, got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise DataError(f"{where}: expected shape [L, ...], got {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        step = int(np.argwhere(bad)[0][0])
        what = "NaN" if np.isnan(arr).any() else "Inf"
        raise DataError(f"{where}: contains {what} (first non-finite value at step {step})")


def load_hdf5(path: str | Path, obs_keys: Sequence[str], image_keys: Sequence[str] = (),
              action_key: str = "actions") -> Tuple[List[Demo], DatasetInfo]:
    """Load and validate every demo. Raises :class:`DataError` naming the demo and key."""
    import h5py  # optional heavy dependency (HDF5 C library): only when demonstrations are read or written

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise DataError(f"{path}: not a readable HDF5 file ({e})") from e
    demos: List[Demo] = []
    with f:
        if "data" not in f:
            raise DataError(f"{path}: missing group 'data'")
        data = f["data"]
        names = sorted([k for k in data.keys() if isinstance(data[k], h5py.Group)], key=_demo_sort_key)
        if not names:
            raise DataError(f"{path}: group 'data' holds no demos")
        env = data.attrs.get("env", "")
        if isinstance(env, bytes):
            env = env.decode()
        shapes: Dict[str, Tuple[int, ...]] = {}
        action_dim = None
        for name in names:
            g = data[name]
            where = f"{path.name}: data/{name}"
            if action_key not in g:
                raise DataError(f"{where}: missing key '{action_key}'")
            act = np.asarray(g[action_key])
            _check_array(f"{where}/{action_key}", act, "float")
            if act.ndim != 2:
                raise DataError(f"{where}/{action_key}: expected [L, D_a], got shape {act.shape}")
            if action_dim is None:
                action_dim = act.shape[1]
            elif act.shape[1] != action_dim:
                raise DataError(f"{where}/{action_key}: action dim {act.shape[1]} differs from {action_dim} in earlier demos")
            L = act.shape[0]
            if L == 0:
                raise DataError(f"{where}/{action_key}: empty demo")
            if "num_samples" in g.attrs and int(g.attrs["num_samples"]) != L:
                raise DataError(f"{where}: attribute num_samples={int(g.attrs['num_samples'])} but '{action_key}' has {L} steps")
            if "obs" not in g:
                raise DataError(f"{where}: missing group 'obs'")
            obs: Dict[str, np.ndarray] = {}
            for key in list(obs_keys) + list(image_keys):
                kind = "image" if key in image_keys else "float"
                if key not in g["obs"]:
                    raise DataError(f"{where}/obs/{key}: missing key (available: {sorted(g['obs'].keys())})")
                arr = np.asarray(g["obs"][key])
                _check_array(f"{where}/obs/{key}", arr, kind)
                if arr.shape[0] != L:
                    raise DataError(f"{where}/obs/{key}: ragged lengths, {arr.shape[0]} steps but '{action_key}' has {L}")
                if key in shapes and arr.shape[1:] != shapes[key]:
                    raise DataError(f"{where}/obs/{key}: shape {arr.shape[1:]} differs from {shapes[key]} in earlier demos")
                shapes[key] = tuple(arr.shape[1:])
                obs[key] = arr if kind == "image" else arr.reshape(L, -1).astype(np.float32)
            demos.append(Demo(name, act.astype(np.float32), obs))
    info = DatasetInfo(str(path), str(env), names, int(action_dim), shapes, sum(d.length for d in demos))
    return demos, info


def load_rollouts(dirs: Sequence[str | Path], obs_keys: Sequence[str],
                  max_success_step: Optional[int] = None,
                  failures: bool = False) -> Tuple[List[Demo], Dict[str, int]]:
    """The successful episodes of ``energyflow sim eval --record DIR --json DIR/summary.json``
    runs (``scripts/rollouts.sh``), as demos: for each DIR, the episodes its
    ``summary.json`` marks successful, read from ``DIR/<task>_<seed>/*.hdf5``
    (the runtime's recordings, this module's layout). Failed, stopped and
    truncated episodes are left out: they are not what the policy does when
    all is well; so are, with ``max_success_step``, episodes that succeeded
    only after that many steps (a policy that wandered for hundreds of steps
    before it pressed the button did not do what it does when all is well
    either). With ``failures`` the episodes that did not succeed are read too
    (counted as ``failures``): for a distilled student, whose targets are its
    teacher's, not the recorded actions, they are states the student reached
    for the teacher to label (``energyflow train --rollout-failures``).
    Returns the demos (named ``<dir>/<task>_<seed>``) and counts
    ``{"episodes", "successes", "late_successes", "failures", "files"}``.
    Raises :class:`DataError` naming the directory or file."""
    demos: List[Demo] = []
    counts = {"episodes": 0, "successes": 0, "late_successes": 0, "failures": 0, "files": 0}
    for d in dirs:
        d = Path(d)
        summary = d / "summary.json"
        try:
            with open(summary) as f:
                s = json.load(f)
        except (OSError, ValueError) as e:
            raise DataError(f"{summary}: cannot read the rollouts' summary ({e}) — record them with "
                            "scripts/rollouts.sh (sim eval --record DIR --json DIR/summary.json)") from e
        task = s.get("task", "")
        for r in s.get("results", []):
            counts["episodes"] += 1
            ok = bool(r.get("success"))
            if not ok and not failures:
                continue
            if ok and max_success_step is not None and (r.get("success_step") or 0) > max_success_step:
                counts["late_successes"] += 1
                continue
            ep = d / f"{task}_{r['seed']}"
            files = sorted(ep.glob("*.hdf5"))
            if not files:
                kind = "a successful" if ok else "an"
                raise DataError(f"{ep}: {kind} episode of {summary} has no recording (*.hdf5)")
            counts["successes" if ok else "failures"] += 1
            for fp in files:
                got, _ = load_hdf5(fp, obs_keys)
                for g in got:
                    demos.append(Demo(name=f"{d.name}/{ep.name}/{g.name}", actions=g.actions, obs=g.obs))
                counts["files"] += 1
    return demos, counts


def load_labels(paths: Sequence[str | Path]) -> Tuple[np.ndarray, np.ndarray]:
    """Labelled windows from ``.npz`` files (``states`` [N, T_o, D_s] and ``chunks`` [N, T_p, D_a],
    raw units, as :meth:`WindowDataset.add_windows` takes them; research/delay/forward_labels.py
    writes such files), joined in order. Raises :class:`DataError` naming the file."""
    states: List[np.ndarray] = []
    chunks: List[np.ndarray] = []
    for p in paths:
        try:
            with np.load(p) as f:
                s, a = np.asarray(f["states"], np.float32), np.asarray(f["chunks"], np.float32)
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"{p}: not a labels file with 'states' and 'chunks' ({e}) — an .npz of "
                            "states [N, T_o, D_s] and chunks [N, T_p, D_a]") from e
        if s.ndim != 3 or a.ndim != 3 or s.shape[0] != a.shape[0] or s.shape[0] == 0:
            raise DataError(f"{p}: states {s.shape} and chunks {a.shape}: want [N, T_o, D_s] and [N, T_p, D_a], N > 0")
        _check_array(f"{p}: states", s, "state")
        _check_array(f"{p}: chunks", a, "action")
        if states and (s.shape[1:] != states[0].shape[1:] or a.shape[1:] != chunks[0].shape[1:]):
            raise DataError(f"{p}: windows {s.shape[1:]} and {a.shape[1:]} differ from {paths[0]}'s "
                            f"{states[0].shape[1:]} and {chunks[0].shape[1:]}")
        states.append(s)
        chunks.append(a)
    if not states:
        raise DataError("labels: no file given")
    return np.concatenate(states), np.concatenate(chunks)


def split_demos(demos: Sequence[Demo], val_fraction: float, seed: int = 0) -> Tuple[List[Demo], List[Demo]]:
    """Train/validation split *by demo* (at least one training demo; validation may be empty)."""
    n = len(demos)
    n_val = int(round(n * val_fraction))
    if n_val >= n:
        n_val = n - 1
    perm = np.random.default_rng(seed).permutation(n)
    val_idx = set(perm[:n_val].tolist())
    train = [d for i, d in enumerate(demos) if i not in val_idx]
    val = [d for i, d in enumerate(demos) if i in val_idx]
    return train, val


@dataclass
class Normalizer:
    """Per-dimension standardisation ``(x - mean) / std``."""

    mean: np.ndarray
    std: np.ndarray

    @staticmethod
    def fit(x: np.ndarray, min_std: float = 1e-4) -> "Normalizer":
        x = np.asarray(x, np.float64).reshape(x.shape[0], -1)
        mean = x.mean(0)
        std = x.std(0)
        std = np.where(std < min_std, 1.0, std)   # constant dims: leave unscaled
        return Normalizer(mean.astype(np.float32), std.astype(np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32)

    def inverse(self, x: np.ndarray) -> np.ndarray:
        return (x * self.std + self.mean).astype(np.float32)


def same_values(a: Optional[Sequence[float]], b: Optional[Sequence[float]]) -> bool:
    """Whether two recorded normaliser vectors (a run's ``meta``, a manifest's, a checkpoint's) are
    the same: both absent, or equal to float32 rounding."""
    if a is None or b is None:
        return a is None and b is None
    return np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-6, atol=1e-9)


def window_indices(lengths: Sequence[int], T_o: int, T_p: int, T_a: int) -> Tuple[np.ndarray, np.ndarray]:
    """Global frame indices for every window: obs [N,T_o] and actions [N,T_p] (clamped at edges)."""
    obs_idx, act_idx = [], []
    offset = 0
    for L in lengths:
        last = max(0, L - T_a)
        cur = np.arange(0, last + 1)
        o = cur[:, None] + np.arange(-(T_o - 1), 1)[None, :]
        a = cur[:, None] - (T_o - 1) + np.arange(T_p)[None, :]
        obs_idx.append(np.clip(o, 0, L - 1) + offset)
        act_idx.append(np.clip(a, 0, L - 1) + offset)
        offset += L
    return np.concatenate(obs_idx), np.concatenate(act_idx)


@dataclass
class WindowDataset:
    """All windows of a set of demos, held in memory; ``batch(idx)`` gathers standardized arrays."""

    demos: Sequence[Demo]
    state_key: Optional[str]
    image_keys: Sequence[str]
    T_o: int
    T_p: int
    T_a: int
    action_norm: Normalizer
    state_norm: Optional[Normalizer]
    actions: np.ndarray = field(init=False)
    state: Optional[np.ndarray] = field(init=False)
    images: Dict[str, np.ndarray] = field(init=False)
    obs_idx: np.ndarray = field(init=False)
    act_idx: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if not self.demos:
            raise DataError("no demonstrations to build windows from")
        self.actions = self.action_norm(np.concatenate([d.actions for d in self.demos]))
        self.state = None
        if self.state_key:
            raw = np.concatenate([d.obs[self.state_key] for d in self.demos])
            self.state = self.state_norm(raw) if self.state_norm is not None else raw
        self.images = {k: np.concatenate([d.obs[k] for d in self.demos]) for k in self.image_keys}
        self.obs_idx, self.act_idx = window_indices([d.length for d in self.demos], self.T_o, self.T_p, self.T_a)

    def __len__(self) -> int:
        return int(self.obs_idx.shape[0])

    def add_windows(self, states: np.ndarray, chunks: np.ndarray) -> int:
        """Append one window per labelled chunk (a state dataset's; normalised here): ``states``
        [N, T_o, D_s] raw observations (oldest first), ``chunks`` [N, T_p, D_a] raw actions, laid
        out as a demonstration's window is (``chunks[:, T_o-1]`` is the action for the newest
        observation). Returns the windows the dataset now holds. A label is one window, not an
        episode whose every step would make one."""
        if self.state is None or self.images:
            raise DataError("labelled windows carry the arm's state only; they train state policies, "
                            "not ones with camera inputs")
        n = states.shape[0]
        want_s = (n, self.T_o, self.state.shape[1])
        want_a = (n, self.T_p, self.actions.shape[1])
        if states.shape != want_s or chunks.shape != want_a:
            raise DataError(f"labels: states {states.shape} and chunks {chunks.shape}; the model's windows "
                            f"are {want_s[1:]} and {want_a[1:]} (T_o, D_s and T_p, D_a)")
        s0, a0 = self.state.shape[0], self.actions.shape[0]
        raw = states.reshape(n * self.T_o, -1)
        norm = self.state_norm(raw) if self.state_norm is not None else raw
        self.state = np.concatenate([self.state, norm.astype(self.state.dtype)])
        self.actions = np.concatenate([self.actions,
                                       self.action_norm(chunks.reshape(n * self.T_p, -1)).astype(self.actions.dtype)])
        self.obs_idx = np.concatenate([self.obs_idx, s0 + np.arange(n * self.T_o).reshape(n, self.T_o)])
        self.act_idx = np.concatenate([self.act_idx, a0 + np.arange(n * self.T_p).reshape(n, self.T_p)])
        return len(self)

    def batch(self, idx: np.ndarray) -> Dict[str, np.ndarray]:
        """``actions`` [B,T_p,D_a]; ``state`` [B,T_o,D_s]; image keys [B,T_o,H,W,3] uint8."""
        out = {"actions": self.actions[self.act_idx[idx]]}
        if self.state is not None:
            out["state"] = self.state[self.obs_idx[idx]]
        for k, arr in self.images.items():
            out[k] = arr[self.obs_idx[idx]]
        return out


def write_hdf5(path: str | Path, demos: Sequence[Demo], env: str = "") -> None:
    """Write demos in the robomimic layout (used by tests and the synthetic scripts)."""
    import h5py  # optional heavy dependency (HDF5 C library): only when demonstrations are read or written

    with h5py.File(path, "w") as f:
        g = f.create_group("data")
        g.attrs["env"] = env
        g.attrs["total"] = int(sum(d.length for d in demos))
        for d in demos:
            dg = g.create_group(d.name)
            dg.attrs["num_samples"] = d.length
            dg.create_dataset("actions", data=d.actions)
            og = dg.create_group("obs")
            for k, v in d.obs.items():
                og.create_dataset(k, data=v)
