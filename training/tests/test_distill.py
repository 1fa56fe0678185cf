"""Distilling the energy from a Diffusion Policy (energyflow.distill): the teacher's noise grid,
the scene shifts, what a teacher must match, and a distilled run end to end."""
import json

import numpy as np
import pytest
import torch

from energyflow import cli
from energyflow.config import Schedule
from energyflow.data import write_hdf5
from energyflow.diffusion import ddpm_alphas_cumprod
from energyflow.distill import Teacher, TeacherError, scene_shift, start_states
from energyflow.losses import sigma_t
from energyflow.train import load_checkpoint_policy

from test_train_cli import TINY_FLAGS, toy_demos

torch.set_num_threads(1)

COMMON = ["--batch-size", "8", "--val-every", "0", "--ckpt-every", "0", "--warmup-steps", "1", "--no-progress",
          "--val-fraction", "0.34", "--threads", "1", "--seed", "0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A toy data file, a diffusion teacher and an energyflow run trained on it (3 steps each)."""
    d = tmp_path_factory.mktemp("distill")
    data = d / "toy.hdf5"
    write_hdf5(data, toy_demos(), env="toy-env")
    teacher = d / "dp"
    assert cli.main(["train", "--data", str(data), "--out", str(teacher), "--steps", "3", "--policy", "diffusion",
                     "--no-export"] + COMMON + TINY_FLAGS) == 0
    return data, teacher / "latest.pt", d


def test_snap_puts_every_sigma_on_the_teachers_grid(runs):
    data, ckpt, _ = runs
    pol, meta = load_checkpoint_policy(ckpt)
    sched = Schedule()
    t = torch.linspace(0, sched.T, 101)
    teacher = Teacher.load(ckpt, _student_cfg(pol.cfg), meta)
    t2, k = teacher.snap(t, sched)
    ab = ddpm_alphas_cumprod()
    grid = np.sqrt((1 - ab) / ab)
    sig = sigma_t(t.double(), sched).numpy()
    np.testing.assert_allclose(sigma_t(t2.double(), sched).numpy(), grid[k.numpy()], rtol=1e-5)
    # nearest in ln sigma: no other level is closer
    d_best = np.abs(np.log(sig) - np.log(grid[k.numpy()]))
    d_all = np.abs(np.log(sig)[:, None] - np.log(grid)[None, :]).min(axis=1)
    np.testing.assert_allclose(d_best, d_all)


def _student_cfg(tcfg):
    import dataclasses

    return dataclasses.replace(tcfg, policy="energyflow")


@pytest.mark.parametrize("kappa,fraction,shifted", [(0.0, 0.5, False), (1.5, 0.0, False), (1.5, 1.0, True)])
def test_scene_shift(kappa, fraction, shifted):
    starts = np.array([[0.0, 1.0, 5.0], [2.0, 1.0, 5.0], [-2.0, 1.0, 5.0]], np.float32)
    rng = np.random.default_rng(0)
    out = scene_shift(starts, 64, 2, kappa, fraction, rng).reshape(64, 2, 3)
    if not shifted:
        assert not out.any()
        return
    assert out.any()
    np.testing.assert_array_equal(out[:, 0], out[:, 1])         # the same move on every history frame
    assert not out[:, :, 1:].any()                              # dims the scenes do not vary in stay put
    assert np.abs(out[:, :, 0]).max() <= kappa * 4.0 + 1e-6      # at most kappa times the spread of the starts


def test_start_states_are_first_frames():
    state = np.arange(10, dtype=np.float32).reshape(10, 1)
    np.testing.assert_array_equal(start_states(state, [3, 4, 3])[:, 0], [0, 3, 7])


def test_teacher_refusals(runs, tmp_path):
    data, ckpt, d = runs
    pol, meta = load_checkpoint_policy(ckpt)
    cfg = _student_cfg(pol.cfg)
    with pytest.raises(TeacherError, match="no such checkpoint"):
        Teacher.load(tmp_path / "nope.pt", cfg, meta)
    bad = dict(meta, state_norm={"mean": [9.0] * cfg.state_dim, "std": [1.0] * cfg.state_dim})
    with pytest.raises(TeacherError, match="state_norm differs"):
        Teacher.load(ckpt, cfg, bad)
    import dataclasses

    with pytest.raises(TeacherError, match="pred_horizon is"):
        Teacher.load(ckpt, dataclasses.replace(cfg, pred_horizon=cfg.pred_horizon * 2), meta)
    # an energyflow checkpoint is not a teacher
    ef = d / "ef-plain"
    assert cli.main(["train", "--data", str(data), "--out", str(ef), "--steps", "2", "--no-export"]
                    + COMMON + TINY_FLAGS) == 0
    with pytest.raises(TeacherError, match="must be a diffusion one"):
        Teacher.load(ef / "latest.pt", cfg, meta)


def test_distilled_run_records_its_teacher(runs):
    data, ckpt, d = runs
    out = d / "ef"
    assert cli.main(["train", "--data", str(data), "--out", str(out), "--steps", "3", "--teacher", str(ckpt),
                     "--teacher-shift", "1.5"] + COMMON + TINY_FLAGS) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert np.isfinite(summary["train_loss"])
    man = json.loads((out / "bundle" / "manifest.json").read_text())
    rec = man["model"]["training"]["teacher"]
    assert rec["checkpoint"] == "dp/latest.pt" and rec["scene_shift"]["kappa"] == 1.5


def test_teacher_target_is_its_noise_estimate(runs):
    """With the teacher's own eps_hat as target, the loss is exactly |sigma S + eps_hat|^2 (EDM-weighted)."""
    from energyflow.losses import dsm_loss
    from energyflow.model import energy_model

    _, ckpt, _ = runs
    pol, meta = load_checkpoint_policy(ckpt)
    cfg = _student_cfg(pol.cfg)
    teacher = Teacher.load(ckpt, cfg, meta)
    torch.manual_seed(0)
    student = energy_model(cfg)
    B = 4
    a0 = torch.randn(B, cfg.pred_horizon, cfg.action_dim)
    cond = torch.randn(B, cfg.cond_dim)
    t, k = teacher.snap(torch.rand(B) * cfg.schedule.T, cfg.schedule)
    eps = torch.randn_like(a0)
    sig = sigma_t(t, cfg.schedule).reshape(B, 1, 1)
    target = teacher.eps(a0 + sig * eps, cond, k)
    got = dsm_loss(student, a0, cond, cfg.schedule, t=t, eps=eps, weighting="sigma2", target=target)
    a_t = (a0 + sig * eps).requires_grad_(True)
    (g,) = torch.autograd.grad(student(a_t, cond, t).sum(), a_t)
    want = (sig * -g + target).pow(2).mean()
    assert abs(float(got.detach()) - float(want)) < 1e-5 * max(1.0, float(want))
    assert not torch.allclose(target, eps)


def test_teacher_flag_refuses_a_diffusion_student(runs):
    data, ckpt, d = runs
    with pytest.raises(ValueError, match="distils an energyflow policy"):
        cli.main(["train", "--data", str(data), "--out", str(d / "dp2"), "--steps", "1", "--policy", "diffusion",
                  "--teacher", str(ckpt), "--no-export"] + COMMON + TINY_FLAGS)


def test_bad_shift_flags():
    from energyflow.config import TrainConfig

    with pytest.raises(ValueError, match="teacher_shift must be"):
        TrainConfig(teacher_shift=-1)
    with pytest.raises(ValueError, match="teacher_shift_fraction"):
        TrainConfig(teacher_shift_fraction=2)


def _recorded(root, name, outcomes, seed0=500):
    """A ``sim eval --record DIR --json DIR/summary.json`` directory of toy episodes, the
    summary saying which succeeded."""
    from energyflow.data import Demo

    d = root / name
    d.mkdir()
    results = []
    for i, ok in enumerate(outcomes):
        seed = seed0 + i
        (demo,) = toy_demos(n=1, L=20, seed=seed)
        (d / f"toy_{seed}").mkdir()
        write_hdf5(d / f"toy_{seed}" / "episode-1.hdf5", [Demo("demo_0", demo.actions, demo.obs)], env="toy-env")
        results.append({"episode": i, "seed": seed, "success": ok})
    (d / "summary.json").write_text(json.dumps({"task": "toy", "results": results}))
    return d


def test_distilled_run_trains_on_rollouts_too(runs):
    """--rollouts adds the successful recorded episodes to the training windows; the normalisers
    stay the demos' (the teacher, trained on the demos, still matches) and so does the
    validation split; no successful episode is a one-line error."""
    data, ckpt, d = runs
    rec = _recorded(d, "rec", [True, False, True])
    plain, more = d / "ef-demos", d / "ef-rollouts"
    assert cli.main(["train", "--data", str(data), "--out", str(plain), "--steps", "2", "--teacher", str(ckpt),
                     "--no-export"] + COMMON + TINY_FLAGS) == 0
    assert cli.main(["train", "--data", str(data), "--out", str(more), "--steps", "2", "--teacher", str(ckpt),
                     "--rollouts", str(rec)] + COMMON + TINY_FLAGS) == 0
    a = json.loads((plain / "summary.json").read_text())["windows"]
    b = json.loads((more / "summary.json").read_text())["windows"]
    assert b["val"] == a["val"]
    # two successful 20-step episodes: as many windows again as two 20-step demos give
    per_demo = a["train"] / 4        # 6 toy demos, 0.34 held out: 4 train
    assert b["train"] == a["train"] + 2 * per_demo
    _, meta_a = load_checkpoint_policy(plain / "latest.pt")
    _, meta_b = load_checkpoint_policy(more / "latest.pt")
    assert meta_b["action_norm"] == meta_a["action_norm"] and meta_b["state_norm"] == meta_a["state_norm"]
    assert meta_b["rollouts"]["successes"] == 2 and meta_b["rollouts"]["episodes"] == 3
    none = _recorded(d, "none", [False, False], seed0=700)
    with pytest.raises(ValueError, match="no successful episode"):
        cli.main(["train", "--data", str(data), "--out", str(d / "ef-none"), "--steps", "1", "--rollouts", str(none)]
                 + COMMON + TINY_FLAGS)


def test_rollout_failures_are_labelled_by_the_teacher(runs):
    """--rollout-failures adds the episodes that failed as well (DAgger-style, the teacher labelling
    the states the policy reached); without a teacher, or without --rollouts, it is refused."""
    data, ckpt, d = runs
    rec = _recorded(d, "rec-f", [True, False, False], seed0=800)
    base, one, all_ = d / "ef-base", d / "ef-ok", d / "ef-all"
    assert cli.main(["train", "--data", str(data), "--out", str(base), "--steps", "1", "--teacher", str(ckpt),
                     "--no-export"] + COMMON + TINY_FLAGS) == 0
    assert cli.main(["train", "--data", str(data), "--out", str(one), "--steps", "1", "--teacher", str(ckpt),
                     "--no-export", "--rollouts", str(rec)] + COMMON + TINY_FLAGS) == 0
    assert cli.main(["train", "--data", str(data), "--out", str(all_), "--steps", "1", "--teacher", str(ckpt),
                     "--no-export", "--rollouts", str(rec), "--rollout-failures"] + COMMON + TINY_FLAGS) == 0
    n0 = json.loads((base / "summary.json").read_text())["windows"]["train"]
    a = json.loads((one / "summary.json").read_text())["windows"]
    b = json.loads((all_ / "summary.json").read_text())["windows"]
    assert b["val"] == a["val"]
    # every toy episode has 20 steps: the two failed ones give twice the successful one's windows
    assert b["train"] - n0 == 3 * (a["train"] - n0) > 0
    _, meta = load_checkpoint_policy(all_ / "latest.pt")
    assert meta["rollouts"]["successes"] == 1 and meta["rollouts"]["failures"] == 2
    assert meta["rollouts"]["with_failures"] is True
    with pytest.raises(ValueError, match="only with --teacher"):
        cli.main(["train", "--data", str(data), "--out", str(d / "ef-nt"), "--steps", "1", "--rollouts", str(rec),
                  "--rollout-failures"] + COMMON + TINY_FLAGS)
    with pytest.raises(ValueError, match="needs --rollouts"):
        cli.main(["train", "--data", str(data), "--out", str(d / "ef-nr"), "--steps", "1", "--teacher", str(ckpt),
                  "--rollout-failures"] + COMMON + TINY_FLAGS)
