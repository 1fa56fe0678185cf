"""The state term g(s) (training/README.md, "State term"): every-step data, training, the max-σ z reading, export, CLI, manifest."""
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from energyflow import cli
from energyflow import state_term as st
from energyflow.bundle import read_manifest
from energyflow.config import TINY_SIZE, ModelConfig
from energyflow.data import Demo, Normalizer, split_demos, write_hdf5
from energyflow.export import ALLOWED_OPS, OPSET, ExportCheckError, graph_ops, write_bundle
from energyflow.model import EnergyUNet

torch.set_num_threads(1)

D_S = 4


def curve_demos(n=12, L=40, seed=0):
    """States on a 1-D curve in 4-D (a quarter turn at a random phase, height growing) + small noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        th = rng.uniform(0, 1) + np.linspace(0, 1.5, L)
        s = np.stack([np.cos(th), np.sin(th), 0.5 * th, 0.2 * np.ones(L)], 1) + rng.normal(0, 0.02, (L, D_S))
        a = np.tanh(s[:, :2]).astype(np.float32)
        out.append(Demo(f"demo_{i}", a, {"state": s.astype(np.float32)}))
    return out


def state_manifest(demos, T_o=2):
    """The cond layout of a state bundle (what state_term reads from a manifest)."""
    norm = Normalizer.fit(np.concatenate([d.obs["state"] for d in demos]))
    return {"obs": [{"name": "state", "kind": "state", "shape": [D_S],
                     "norm": {"mean": norm.mean.tolist(), "std": norm.std.tolist()}}],
            "conditioning": {"layout": "history_flat", "items": [{"obs": "state", "width": D_S}]},
            "obs_horizon": T_o, "cond_dim": T_o * D_S}


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("stdata") / "curve.hdf5"
    write_hdf5(p, curve_demos(), env="toy-env")
    return p


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory) -> Path:
    demos = curve_demos()
    norm = Normalizer.fit(np.concatenate([d.obs["state"] for d in demos]))
    torch.manual_seed(0)
    m = EnergyUNet(ModelConfig(action_dim=2, state_dim=D_S, **TINY_SIZE))
    out = tmp_path_factory.mktemp("stb") / "bundle"
    write_bundle(out, m, "st-test", [0.0, 0.0], [1.0, 1.0], norm.mean, norm.std)
    return out


# ---------------------------------------------------------------------------
def test_step_conds_cover_every_step_like_the_runtime():
    demos = [Demo("a", np.zeros((5, 2), np.float32), {"state": np.arange(20, dtype=np.float32).reshape(5, 4)}),
             Demo("b", np.zeros((3, 2), np.float32), {"state": 100 + np.arange(12, dtype=np.float32).reshape(3, 4)})]
    man = state_manifest(demos)
    mean = np.asarray(man["obs"][0]["norm"]["mean"], np.float32)
    std = np.asarray(man["obs"][0]["norm"]["std"], np.float32)
    cond, ep = st.step_conds(demos, man)
    assert cond.shape == (8, 8) and cond.dtype == np.float32      # one row per demo step, last steps included
    np.testing.assert_array_equal(ep, [0, 0, 0, 0, 0, 1, 1, 1])

    def c(*states):
        return np.concatenate([(np.asarray(s, np.float32) - mean) / std for s in states])

    s_a, s_b = demos[0].obs["state"], demos[1].obs["state"]
    np.testing.assert_allclose(cond[0], c(s_a[0], s_a[0]), rtol=1e-6)   # episode start: first frame repeated
    np.testing.assert_allclose(cond[4], c(s_a[3], s_a[4]), rtol=1e-6)   # the demo's last step
    np.testing.assert_allclose(cond[5], c(s_b[0], s_b[0]), rtol=1e-6)
    np.testing.assert_allclose(cond[7], c(s_b[1], s_b[2]), rtol=1e-6)


def test_step_conds_refuse_image_features():
    demos = curve_demos(2, 5)
    man = state_manifest(demos)
    man["obs"].append({"name": "camera", "kind": "image", "shape": [3, 8, 8], "features": 4})
    man["conditioning"]["items"].append({"obs": "camera", "width": 4})
    with pytest.raises(st.StateTermError, match="image features"):
        st.step_conds(demos, man)


def test_sigma_grid_is_log_spaced():
    s = st.sigma_grid(8, 0.05, 3.0)
    assert s.dtype == np.float32 and len(s) == 8
    assert s[0] == pytest.approx(0.05) and s[-1] == pytest.approx(3.0)
    np.testing.assert_allclose(np.diff(np.log(s)), np.log(60) / 7, rtol=1e-5)


def test_net_is_the_gaussian_energy_at_init_and_the_loss_is_dsm():
    torch.manual_seed(0)
    net = st.StateEnergyNet(6, (16, 16))
    x, sig = torch.randn(5, 6), torch.tensor([0.05, 0.3, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(net(x, sig).detach(), 0.5 * (x * x).sum(-1) / (sig ** 2 + 1), rtol=1e-6)
    # the Gaussian energy is the exact score of N(0, I) data: sigma*grad = sigma*x~/(sigma^2+1)
    eps = torch.randn(5, 6)
    loss = st.dsm_loss(net, x, sig, eps)
    x_t = x + sig[:, None] * eps
    want = ((sig[:, None] * x_t / (sig[:, None] ** 2 + 1) - eps) ** 2).mean(-1)
    np.testing.assert_allclose(loss.detach(), want, rtol=1e-5)


def test_export_matches_torch_with_allowed_ops(tmp_path):
    torch.manual_seed(1)
    net = st.StateEnergyNet(8, (16, 16))
    torch.nn.init.normal_(net.out.weight, std=0.5)
    held = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    reading = st.fit_reading(net.eval(), st.sigma_grid(8), held)
    p = tmp_path / st.GRAPH_FILE
    err = st.export_state_energy(reading, p)
    assert err["state_energy"] <= 1e-5
    model = onnx.load(str(p))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == OPSET
    ops = set(graph_ops(p))
    assert ops <= ALLOWED_OPS and not ops & st.SHAPE_OPS, ops
    sess = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["cond"] and [o.name for o in sess.get_outputs()] == ["state_energy"]
    for B in (1, 5):
        c = np.random.default_rng(B).standard_normal((B, 8)).astype(np.float32) * 2
        (y,) = sess.run(None, {"cond": c})
        assert y.shape == (B,) and y.dtype == np.float32
        with torch.no_grad():
            z = reading.z(torch.from_numpy(c)).numpy()
        np.testing.assert_allclose(y, z.max(1), rtol=1e-5, atol=1e-5)   # the reading is max over sigma of z
    with pytest.raises(ExportCheckError):
        st.export_state_energy(reading, tmp_path / "bad.onnx", tol=0.0)
    assert not (tmp_path / "bad.onnx").exists()
    # with the transition and RND components: the max of the sigma levels' z and theirs
    tr = st.TransitionScore(*st.fit_transition(held, 2))
    rnd, rec = st.train_rnd(held, steps=20)
    assert rec["steps"] == 20 and np.isfinite(rec["loss"])
    reading_t = st.fit_reading(net.eval(), st.sigma_grid(8), held, {"rnd": rnd, "transition": tr})
    assert reading_t.components == ["g", "transition", "rnd"]                # the graph's order
    p2 = tmp_path / "t.onnx"
    assert st.export_state_energy(reading_t, p2)["state_energy"] <= 1e-5
    ops = set(graph_ops(p2))
    assert ops <= ALLOWED_OPS and not ops & st.SHAPE_OPS, ops
    c = np.random.default_rng(9).standard_normal((6, 8)).astype(np.float32)
    (y,) = ort.InferenceSession(str(p2), providers=["CPUExecutionProvider"]).run(None, {"cond": c})
    with torch.no_grad():
        t = tr(torch.from_numpy(c)).numpy()
        e = rnd(torch.from_numpy(c)).numpy()
        z = reading_t.z(torch.from_numpy(c)).numpy()
    r = (c @ tr.m.numpy() - tr.c.numpy())
    np.testing.assert_allclose(t, np.abs(r).max(1), rtol=1e-5)
    (mt, st_), (mr, sr) = reading_t.extra_stats.tolist()
    np.testing.assert_allclose(y, np.maximum(z.max(1), np.maximum((t - mt) / st_, (e - mr) / sr)), rtol=1e-5, atol=1e-5)
    with pytest.raises(st.StateTermError, match="unknown components"):
        st.fit_reading(net.eval(), st.sigma_grid(8), held, {"knn": tr})


def test_far_state_reads_above_held_out_q999_after_short_training():
    demos = curve_demos()
    man = state_manifest(demos)
    cfg = st.StateTermConfig(hidden=(64, 64), steps=400, lr=3e-3, rnd_steps=200)
    reading, rec, cal, scores = st.fit_state_term(man, demos, cfg, val_fraction=0.25, split_seed=0)
    assert rec["samples"] == 9 * 40 and rec["held_out_samples"] == 3 * 40     # every step of every demo
    assert rec["val_loss_per_sigma"][-1] < 0.5                              # learned something at every level
    q = cal["quantiles"]["99.9"]
    assert cal["n"] == 120 and cal["max"] >= q
    _, held = split_demos(demos, 0.25, 0)
    va, _ = st.step_conds(held, man)
    far = va[:20].copy()
    far[:, [0, 2, 4, 6]] += 10.0                                            # 10 sd off on two state dims, both frames
    assert (st.read(reading, far) > q).all()
    zero = np.tile(-np.asarray(man["obs"][0]["norm"]["mean"]) / np.asarray(man["obs"][0]["norm"]["std"]), 2)
    assert st.read(reading, zero[None].astype(np.float32))[0] > q       # the raw all-zeros state


def test_fit_transition_recovers_a_linear_step():
    rng = np.random.default_rng(0)
    prev = rng.standard_normal((4000, 3))
    a = np.array([[0.9, 0.1, 0.0], [0.0, 0.8, 0.0], [0.0, 0.0, 1.0]])
    new = prev @ a.T + np.array([0.1, -0.2, 0.0]) + rng.normal(0, [0.01, 0.02, 0.0], (4000, 3))
    new[:, 2] = 0.5                                                            # constant in the data
    m, b, sd = st.fit_transition(np.concatenate([prev, new], 1), frames=2, ridge=1e-6, sd_floor=1e-3)
    np.testing.assert_allclose(-m[:3, :2].T, a[:2], atol=2e-3)              # W over the earlier frame
    np.testing.assert_allclose(m[3:], np.eye(3))                             # identity over the newest
    np.testing.assert_allclose(b[:2], [0.1, -0.2], atol=2e-3)
    np.testing.assert_allclose(sd, [0.01, 0.02, 1e-3], rtol=0.05)           # the floor for the constant one
    with pytest.raises(st.StateTermError, match="T_o >= 2"):
        st.fit_transition(prev, frames=1)


def test_transition_term_sees_a_jump_between_in_distribution_frames():
    demos = curve_demos()
    man = state_manifest(demos)
    cfg = st.StateTermConfig(hidden=(32, 32), steps=150, lr=3e-3, rnd_steps=0)
    reading, rec, cal, _ = st.fit_state_term(man, demos, cfg, val_fraction=0.25, split_seed=0)
    assert reading.components == ["g", "transition"] and rec["transition"]["frames"] == 2
    g_only, _, cal_g, _ = st.fit_state_term(man, demos, st.StateTermConfig(hidden=(32, 32), steps=150, lr=3e-3,
                                                                           transition=False, rnd_steps=0), 0.25, 0)
    assert g_only.components == ["g"]
    _, held = split_demos(demos, 0.25, 0)
    va, _ = st.step_conds(held, man)
    rows = va[np.arange(5, len(va), 7)]
    jump = rows.copy()
    jump[:, D_S:] = va[np.arange(5, len(va), 7) - 5, D_S:]    # the newest frame from 5 steps earlier: each frame
    assert (st.read(reading, jump) > cal["quantiles"]["99.9"]).all()      # is a demo state, the pair is not
    assert (st.read(g_only, jump) > cal_g["quantiles"]["99.9"]).mean() < 0.5   # g alone mostly misses it
    # the exported graph computes the same reading with the allowed operators
    # (checked by export_state_energy against torch)
    assert set(st.TransitionScore(*st.fit_transition(va, 2)).state_dict()) == {"m", "c"}


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
ST_FLAGS = ["--steps", "60", "--hidden", "16", "16", "--val-fraction", "0.25", "--rnd-steps", "30", "--quiet"]


def test_cli_writes_graph_and_manifest_block(tiny_bundle, data_file, tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(tiny_bundle, b)
    before = json.loads((b / "manifest.json").read_text())
    assert cli.main(["state-term", "--bundle", str(b), "--data", str(data_file), *ST_FLAGS]) == 0
    man = read_manifest(b, verify=True)                                   # hashes verify
    assert "state_energy.onnx" in man["files"]
    assert {k: v for k, v in man.items() if k not in ("state_energy", "files")} == \
        {k: v for k, v in before.items() if k != "files"}                 # the rest is unchanged
    blk = man["state_energy"]
    assert (blk["graph"], blk["input"], blk["output"], blk["reading"]) == \
        ("state_energy.onnx", "cond", "state_energy", "max_z")
    assert blk["components"] == ["g", "transition", "rnd"]                   # T_o = 2: with the transition
    assert blk["transition"]["frames"] == 2 and blk["transition"]["std"] > 0
    assert blk["rnd"]["steps"] == 30 and blk["rnd"]["std"] > 0
    assert len(blk["sigmas"]) == len(blk["mean"]) == len(blk["std"]) == 8
    assert blk["train"]["steps"] == 60 and blk["train"]["demos"] == 9 and blk["train"]["samples"] == 360
    cal = blk["calibration"]
    assert set(cal["quantiles"]) == {"50", "90", "99", "99.9"} and cal["n"] == 120
    # the graph in the bundle reproduces the calibration on the held-out steps
    demos = curve_demos()
    _, held = split_demos(demos, 0.25, 0)
    va, _ = st.step_conds(held, man)
    sess = ort.InferenceSession(str(b / "state_energy.onnx"), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"cond": va})
    assert np.quantile(y.astype(np.float64), 0.999) == pytest.approx(cal["quantiles"]["99.9"], rel=1e-5, abs=1e-5)
    # a second run replaces the block, and inspect lists the graph and still verifies the hashes
    assert cli.main(["state-term", "--bundle", str(b), "--data", str(data_file), *ST_FLAGS, "--seed", "1"]) == 0
    assert read_manifest(b)["state_energy"]["train"]["seed"] == 1
    # --no-transition --rnd-steps 0: g alone
    assert cli.main(["state-term", "--bundle", str(b), "--data", str(data_file), *ST_FLAGS, "--no-transition",
                     "--rnd-steps", "0"]) == 0
    blk = read_manifest(b, verify=True)["state_energy"]
    assert blk["reading"] == "max_sigma_z" and not {"transition", "rnd", "components"} & set(blk)
    capsys.readouterr()
    assert cli.main(["inspect", "--bundle", str(b)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hashes_ok"] and out["state_energy"]["file"] == "state_energy.onnx"
    assert set(out["state_energy"]["ops"]) <= ALLOWED_OPS


def _one_line_error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("state-term: ") and "\n" not in err, err
    return err


def test_cli_bad_input_fails_with_one_line(tiny_bundle, data_file, tmp_path, capsys):
    # a directory without a manifest
    (tmp_path / "empty").mkdir()
    err = _one_line_error(capsys, ["state-term", "--bundle", str(tmp_path / "empty"), "--data", str(data_file)])
    assert "no manifest.json" in err and "empty" in err
    # data whose state width differs from the bundle's
    narrow = tmp_path / "narrow.hdf5"
    write_hdf5(narrow, [Demo(f"demo_{i}", np.zeros((6, 2), np.float32), {"state": np.ones((6, 3), np.float32)})
                        for i in range(4)])
    b = tmp_path / "b"
    shutil.copytree(tiny_bundle, b)
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(narrow)])
    assert "width 3" in err and "wants 4" in err and "'state'" in err
    # an image bundle
    man = json.loads((b / "manifest.json").read_text())
    man["obs"].append({"name": "camera", "kind": "image", "shape": [3, 8, 8], "graph": "vision", "features": 4})
    (b / "manifest.json").write_text(json.dumps(man))
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(data_file)])
    assert "camera" in err and "state bundles only" in err
    # nothing was written on failure
    assert not (b / "state_energy.onnx").exists() and "state_energy" not in json.loads((b / "manifest.json").read_text())
    # no held-out demos
    shutil.rmtree(b)
    shutil.copytree(tiny_bundle, b)
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(data_file), "--val-fraction", "0"])
    assert "held-out" in err


# ---------------------------------------------------------------------------
# parity fixtures with a state term (engines/testdata/parity-state)
# ---------------------------------------------------------------------------
def test_fixtures_with_a_state_term(tmp_path, capsys):
    assert cli.main(["fixtures", "--out", str(tmp_path / "fx"), "--state-term", "--cases", "2", "--train-steps", "2",
                     "--steps", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["torch_vs_ort_max_rel_state_energy_diff"] < 1e-5
    bdir = tmp_path / "fx" / "bundle"
    man = read_manifest(bdir)
    se = man["state_energy"]
    assert se["graph"] == st.GRAPH_FILE and se["reading"] == st.READING and st.GRAPH_FILE in man["files"]
    assert len(se["sigmas"]) == len(se["mean"]) == len(se["std"]) == 4
    assert set(se["calibration"]["quantiles"]) == {"50", "90", "99", "99.9"}
    assert set(graph_ops(bdir / st.GRAPH_FILE)) <= ALLOWED_OPS
    cases = json.loads((tmp_path / "fx" / "cases.json").read_text())["cases"]
    sess = ort.InferenceSession(str(bdir / st.GRAPH_FILE), providers=["CPUExecutionProvider"])
    for c in cases:
        (y,) = sess.run(["state_energy"], {"cond": np.asarray([c["cond"]], np.float32)})
        assert c["state_energy"] == float(y[0])
    # the policy graph's cases are there as without the state term
    assert {"actions", "energy", "centered_reward"} <= set(cases[0])
    # diffusion fixtures take no state term
    assert cli.main(["fixtures", "--out", str(tmp_path / "d"), "--policy", "diffusion", "--state-term"]) == 2


# ---------------------------------------------------------------------------
# the policy's own rollouts (scripts/rollouts.sh directories)
def _rollout_dir(root: Path, name: str, outcomes, seed0: int = 500, success_step: int = 25) -> Path:
    """A sim eval --record/--json directory: one recording per episode, the summary saying which succeeded
    (at success_step)."""
    d = root / name
    d.mkdir()
    results = []
    for i, ok in enumerate(outcomes):
        seed = seed0 + i
        ep = d / f"toy_{seed}"
        ep.mkdir()
        (demo,) = curve_demos(n=1, L=30, seed=seed)
        write_hdf5(ep / "episode-1.hdf5", [demo], env="toy-env")
        results.append({"episode": i, "seed": seed, "success": ok, "success_step": success_step if ok else None})
    (d / "summary.json").write_text(json.dumps({"task": "toy", "results": results}))
    return d


def test_cli_rollouts_join_the_demonstrations(tiny_bundle, data_file, tmp_path, capsys):
    d0 = _rollout_dir(tmp_path, "d0", [True, True, False, True])
    d2 = _rollout_dir(tmp_path, "d2", [True, False, True, True], seed0=600)
    b = tmp_path / "b"
    shutil.copytree(tiny_bundle, b)
    assert cli.main(["state-term", "--bundle", str(b), "--data", str(data_file), *ST_FLAGS,
                     "--rollouts", str(d0), str(d2)]) == 0
    tr = read_manifest(b, verify=True)["state_energy"]["train"]
    # 6 of 8 succeeded: split 0.25 by episode as the demos are (9 + 3 demos)
    assert (tr["demos"], tr["held_out_demos"]) == (9, 3)
    assert (tr["rollouts"], tr["held_out_rollouts"]) == (4, 2) and tr["rollout_episodes"] == 8
    assert tr["samples"] == 9 * 40 + 4 * 30 and tr["held_out_samples"] == 3 * 40 + 2 * 30
    assert tr["rollout_sources"] == [str(d0), str(d2)]
    assert tr["rollout_late_successes"] == {"left_out": 0, "after_step": 80}   # 2 × the longest demo (40)
    # a success after 2 × the longest demonstration is left out: the policy wandered first
    late = _rollout_dir(tmp_path, "late", [True, True], seed0=900, success_step=81)
    assert cli.main(["state-term", "--bundle", str(b), "--data", str(data_file), *ST_FLAGS,
                     "--rollouts", str(d0), str(late)]) == 0
    tr = read_manifest(b)["state_energy"]["train"]
    assert tr["rollouts"] + tr["held_out_rollouts"] == 3 and tr["rollout_late_successes"]["left_out"] == 2
    capsys.readouterr()
    # no successful rollout, a missing summary, a successful episode without its recording: one line each
    none = _rollout_dir(tmp_path, "none", [False, False], seed0=700)
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(data_file), "--rollouts", str(none)])
    assert "no successful rollouts" in err and "2 episodes" in err
    (tmp_path / "bare").mkdir()
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(data_file),
                                   "--rollouts", str(tmp_path / "bare")])
    assert "summary.json" in err and "scripts/rollouts.sh" in err
    lost = _rollout_dir(tmp_path, "lost", [True], seed0=800)
    shutil.rmtree(lost / "toy_800")
    err = _one_line_error(capsys, ["state-term", "--bundle", str(b), "--data", str(data_file), "--rollouts", str(lost)])
    assert "toy_800" in err and "no recording" in err
