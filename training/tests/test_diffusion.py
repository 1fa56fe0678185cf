"""Diffusion Policy baseline: schedule, DDIM sampler, training, export, bundle, CLI, fixtures."""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from energyflow import cli
from energyflow.bundle import read_manifest, sha256_file
from energyflow.export import write_bundle
from energyflow.config import ModelConfig, TINY_SIZE, TrainConfig
from energyflow.data import write_hdf5
from energyflow.diffusion import (NoiseUNet, OrtEps, betas_for_alpha_bar, clip_sample_range,
                                  ddim_coefficients, ddim_sample, ddim_timesteps, ddpm_alphas_cumprod, ddpm_loss)
from energyflow.export import ALLOWED_OPS, ExportCheckError, export_eps, graph_ops
from energyflow.model import EnergyUNet
from test_train_cli import TINY_FLAGS, toy_demos

torch.set_num_threads(1)

N = 100


def tiny_noise_model(seed=0, **kw) -> NoiseUNet:
    torch.manual_seed(seed)
    d = dict(action_dim=2, state_dim=4, **TINY_SIZE)
    d.update(kw)
    return NoiseUNet(ModelConfig(**d))


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("dpdata") / "toy.hdf5"
    write_hdf5(p, toy_demos(), env="toy-env")
    return p


@pytest.fixture(scope="module")
def dp_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dpb") / "bundle"
    write_bundle(out, tiny_noise_model(), "dp-test", [0.1, -0.2], [2.0, 0.5], [0.0] * 4, [1.0, 2.0, 0.0, 3.0],
                 clip_sample=1.5)
    return out


# ---------------------------------------------------------------------------
# schedule
# ---------------------------------------------------------------------------
def test_schedule_matches_diffusers_squaredcos_cap_v2():
    betas, ac = betas_for_alpha_bar(N), ddpm_alphas_cumprod(N)
    assert betas.dtype == np.float64 and ac.dtype == np.float64 and ac.shape == (N,)
    # spot values of diffusers' formula, computed separately (plain-Python loop)
    assert betas[0] == pytest.approx(0.0006312815983416931, rel=1e-12)
    assert betas[50] == pytest.approx(0.03154633936072582, rel=1e-12)
    assert betas[98] == pytest.approx(0.7499392803846627, rel=1e-12)
    assert betas[99] == 0.999  # max_beta cap
    assert ac[0] == pytest.approx(0.9993687184016583, rel=1e-13)
    assert ac[19] == pytest.approx(0.8987059205995087, rel=1e-13)
    assert ac[50] == pytest.approx(0.4782646329454781, rel=1e-13)
    assert ac[95] == pytest.approx(0.0038809998422168644, rel=1e-12)
    assert ac[99] == pytest.approx(2.4285722793500615e-07, rel=1e-10)

    # independent closed form: below the cap the product telescopes,
    # alphas_cumprod[k] = alpha_bar((k+1)/N) / alpha_bar(0)
    def alpha_bar(t):
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    closed = np.array([alpha_bar((k + 1) / N) / alpha_bar(0.0) for k in range(N - 1)])
    np.testing.assert_allclose(ac[:-1], closed, rtol=1e-12)
    assert ac[-1] == pytest.approx(ac[-2] * (1 - 0.999), rel=1e-12)


def test_ddim_timesteps_and_coefficients():
    ts = ddim_timesteps(N, 20)
    assert ts.tolist() == list(range(95, -1, -5))
    ts, co = ddim_coefficients(ddpm_alphas_cumprod(), 20)
    assert co.dtype == np.float32 and co.shape == (20, 4)
    ac = ddpm_alphas_cumprod()
    assert co[0, 0] == np.float32(math.sqrt(ac[95])) and co[0, 1] == np.float32(math.sqrt(1 - ac[95]))
    assert co[0, 2] == np.float32(math.sqrt(ac[90])) and co[0, 3] == np.float32(math.sqrt(1 - ac[90]))
    assert co[-1, 2] == 1.0 and co[-1, 3] == 0.0  # set_alpha_to_one at t=0
    with pytest.raises(ValueError):
        ddim_timesteps(N, 0)


def test_clip_sample_range():
    assert clip_sample_range(np.array([0.2, -1.49])) == 1.5
    assert clip_sample_range(np.array([1.5, -0.1])) == 1.5
    assert clip_sample_range(np.array([1.51])) == 2.0
    assert clip_sample_range(np.zeros(3)) == 0.0


# ---------------------------------------------------------------------------
# DDIM with an oracle eps on Gaussian data
# ---------------------------------------------------------------------------
def _gaussian_problem(Tp=8, Da=2):
    mu = np.linspace(-1.0, 1.0, Tp * Da).reshape(Tp, Da)
    s = np.linspace(0.5, 1.0, Tp * Da)[::-1].reshape(Tp, Da)
    ac = ddpm_alphas_cumprod()

    def oracle(x, cond, t):
        """E[eps | x_t] for data ~ N(mu, s^2) per element."""
        ab = ac[int(t[0])]
        assert np.all(t == t[0]) and t.dtype == np.float32
        return ((x - math.sqrt(ab) * mu) * math.sqrt(1 - ab) / (ab * s * s + 1 - ab)).astype(np.float32)

    return mu, s, ac, oracle


def test_ddim_oracle_recovers_gaussian():
    mu, s, ac, oracle = _gaussian_problem()
    B = 8000
    z = np.random.default_rng(0).standard_normal((B,) + mu.shape).astype(np.float32)
    cond = np.zeros((B, 1), np.float32)
    r = ddim_sample(oracle, cond, z, ac, 20, 0.0, action_mean=np.array([10.0, -5.0]), action_std=np.array([2.0, 3.0]))
    x = r.actions_std
    assert x.dtype == np.float32
    # the data law is recovered (20 DDIM steps from N(0, I) at t=95: small, known bias)
    assert np.abs(x.mean(0) - mu).max() < 0.1
    ratio = x.std(0) / s
    assert ratio.min() > 0.9 and ratio.max() < 1.05, ratio
    # and it is exactly what deterministic DDIM does to a Gaussian: each step
    # x_prev - sqrt(ab_p) mu = c (x_t - sqrt(ab_t) mu) with
    # c = (sqrt(ab_p ab_t) s^2 + sqrt((1-ab_p)(1-ab_t))) / (ab_t s^2 + 1 - ab_t)
    m, var = np.zeros_like(mu), np.ones_like(mu)
    for t in range(95, -1, -5):
        abt, abp = ac[t], (ac[t - 5] if t >= 5 else 1.0)
        c = (math.sqrt(abp * abt) * s * s + math.sqrt((1 - abp) * (1 - abt))) / (abt * s * s + 1 - abt)
        m, var = math.sqrt(abp) * mu + c * (m - math.sqrt(abt) * mu), c * c * var
    assert np.abs(x.mean(0) - m).max() < 0.04
    assert np.abs(x.std(0) / np.sqrt(var) - 1).max() < 0.035
    np.testing.assert_allclose(r.actions, x * np.float32([2.0, 3.0]) + np.float32([10.0, -5.0]), rtol=1e-6)
    # a useless eps does not pass the same checks
    bad = ddim_sample(lambda x, c, t: np.zeros_like(x), cond[:500], z[:500], ac, 20, 0.0).actions_std
    assert np.abs(bad.std(0) / s - 1).max() > 1.0


def test_ddim_clip_sample():
    mu, s, ac, oracle = _gaussian_problem()
    z = np.random.default_rng(1).standard_normal((500,) + mu.shape).astype(np.float32)
    cond = np.zeros((500, 1), np.float32)
    free = ddim_sample(oracle, cond, z, ac, 20, 0.0).actions_std
    # a range the x0 predictions never reach changes nothing (eps is recomputed from the same x0)
    np.testing.assert_allclose(ddim_sample(oracle, cond, z, ac, 20, 50.0).actions_std, free, atol=1e-4)
    clipped = ddim_sample(oracle, cond, z, ac, 20, 0.5).actions_std
    assert np.abs(clipped).max() <= 0.5 and np.abs(free).max() > 1.0


# ---------------------------------------------------------------------------
# network, loss
# ---------------------------------------------------------------------------
def test_noise_unet_shares_backbone_and_keeps_energy_keys():
    cfg = ModelConfig(action_dim=2, state_dim=4, **TINY_SIZE)
    e_keys, n = set(EnergyUNet(cfg).state_dict()), tiny_noise_model()
    n_keys = set(n.state_dict())
    assert {"time_lin1.weight", "enc_lin2.bias", "down.0.0.block0.conv.weight", "mid.1.cond_lin.weight",
            "up.0.2.conv.weight", "final_block.norm.weight", "head.0.bias"} <= e_keys
    assert n_keys - e_keys == {"final_conv.weight", "final_conv.bias"}
    assert all(k.startswith("head.") for k in e_keys - n_keys)
    assert n.cfg.policy == "diffusion" and n.final_conv.out_channels == 2
    a, c, t = torch.randn(3, 16, 2), torch.randn(3, 8), torch.tensor([0.0, 42.0, 99.0])
    eps = n(a, c, t)
    assert eps.shape == (3, 16, 2)
    torch.testing.assert_close(n(a, c, t, plain=True), eps, rtol=1e-5, atol=1e-5)
    # the integer timestep itself is embedded (time scale 1, not cfg.time_scale)
    torch.testing.assert_close(n.global_cond(c, t)[:, :n.cfg.time_embed_dim],
                               n.time_lin2(torch.nn.functional.mish(n.time_lin1(n.time_emb(t)))))


def test_ddpm_loss_falls_on_conditional_toy():
    """a = cond[0] * ramp + 0.5 * mode (+-1) + noise: the loss must drop clearly in 100 steps."""
    torch.manual_seed(0)
    m = NoiseUNet(ModelConfig(action_dim=2, state_dim=1, obs_horizon=1, pred_horizon=4, down_dims=(16, 32),
                              n_groups=4, time_embed_dim=16, state_hidden=16))
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    ramp = torch.linspace(-1, 1, 4).reshape(1, 4, 1)
    losses = []
    for _ in range(100):
        cond = torch.randn(64, 1, generator=g)
        mode = (torch.rand(64, 1, 1, generator=g) < 0.5).float() * 2 - 1
        a = cond.reshape(-1, 1, 1) * ramp + 0.5 * mode + 0.05 * torch.randn(64, 4, 2, generator=g)
        loss = ddpm_loss(m, a, cond, generator=g)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-25:]) < 0.5 * np.mean(losses[:25]), (np.mean(losses[:25]), np.mean(losses[-25:]))


def test_ddpm_loss_fixed_inputs():
    """x_k = sqrt(ab_k) a0 + sqrt(1-ab_k) eps reaches the network; loss = MSE to eps."""
    seen = {}

    def net(x, cond, t):
        seen["x"], seen["t"] = x, t
        return torch.zeros_like(x)

    a0, eps = torch.randn(2, 4, 3), torch.randn(2, 4, 3)
    k = torch.tensor([0, 99])
    loss = ddpm_loss(net, a0, torch.zeros(2, 1), k=k, eps=eps)
    ac = ddpm_alphas_cumprod()
    want = torch.stack([math.sqrt(ac[i]) * a0[j] + math.sqrt(1 - ac[i]) * eps[j] for j, i in enumerate((0, 99))])
    torch.testing.assert_close(seen["x"], want)
    assert seen["t"].dtype == torch.float32 and seen["t"].tolist() == [0.0, 99.0]
    assert loss.item() == pytest.approx(eps.pow(2).mean().item())


# ---------------------------------------------------------------------------
# export, bundle
# ---------------------------------------------------------------------------
def test_export_eps_round_trip_and_refuses_bad(tmp_path):
    m = tiny_noise_model(1)
    errs = export_eps(m, tmp_path / "eps.onnx")
    assert errs["eps_max_abs"] <= 1e-4
    model = onnx.load(str(tmp_path / "eps.onnx"))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == 17
    ops = set(graph_ops(tmp_path / "eps.onnx"))
    assert ops <= ALLOWED_OPS and not ops & {"Shape", "Where", "Cast", "Expand", "ConstantOfShape"}, ops
    sess = ort.InferenceSession(str(tmp_path / "eps.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["a_t", "cond", "t"]
    assert [o.name for o in sess.get_outputs()] == ["eps"]
    rng = np.random.default_rng(0)
    for B in (1, 7):
        a = rng.standard_normal((B, 16, 2)).astype(np.float32)
        c = rng.standard_normal((B, 8)).astype(np.float32)
        t = rng.integers(0, N, B).astype(np.float32)
        (e,) = sess.run(None, {"a_t": a, "cond": c, "t": t})
        with torch.no_grad():
            ref = m.eval()(torch.from_numpy(a), torch.from_numpy(c), torch.from_numpy(t)).numpy()
        assert e.shape == (B, 16, 2) and np.abs(e - ref).max() < 1e-4
    with pytest.raises(ExportCheckError):
        export_eps(m, tmp_path / "bad.onnx", tol=0.0)
    assert not (tmp_path / "bad.onnx").exists()


def test_diffusion_manifest_fields(dp_bundle):
    man = read_manifest(dp_bundle)
    assert man["format_version"] == 1 and man["policy"] == "diffusion"
    assert man["graphs"] == {"eps": {"file": "eps.onnx",
                                     "inputs": [{"name": "a_t", "shape": [-1, 16, 2]},
                                                {"name": "cond", "shape": [-1, 8]},
                                                {"name": "t", "shape": [-1]}],
                                     "outputs": [{"name": "eps", "shape": [-1, 16, 2]}]}}
    sch = man["schedule"]
    assert {k: v for k, v in sch.items() if k != "alphas_cumprod"} == {
        "kind": "ddpm", "num_train_timesteps": 100, "beta_schedule": "squaredcos_cap_v2",
        "prediction_type": "epsilon", "clip_sample": 1.5}
    assert sch["alphas_cumprod"] == ddpm_alphas_cumprod().tolist()  # float64, exact round trip
    assert man["sampler"] == {"kind": "ddim", "steps": 20}
    assert man["calibration"] is None
    assert np.asarray(man["reference_actions"]).shape == (16, 16, 2)
    assert man["files"] == {"eps.onnx": sha256_file(dp_bundle / "eps.onnx")}
    assert man["action_norm"]["std"] == [2.0, 0.5] and man["cond_dim"] == 8
    assert man["obs"][0]["norm"]["std"][2] == pytest.approx(1e-6)
    assert man["conditioning"] == {"layout": "history_flat", "items": [{"obs": "state", "width": 4}]}
    assert "head_dims" not in man["model"] and "policy" not in man["model"]
    assert man["model"]["export_check"]["eps"]["eps_max_abs"] <= 1e-4
    # the same field set as an energyflow manifest
    from test_export_bundle import tiny_model

    ef = write_bundle(dp_bundle.parent / "ef", tiny_model(), "ef", [0, 0], [1, 1], [0] * 4, [1] * 4)
    assert list(ef) == list(man) and ef["sampler"] == {"steps": 20} and "kind" not in ef["sampler"]


def test_calibrate_refuses_diffusion(dp_bundle, data_file, tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(dp_bundle, b)
    before = {p.name: p.read_bytes() for p in b.iterdir()}
    rc = cli.main(["calibrate", "--bundle", str(b), "--data", str(data_file), "--n-windows", "4"])
    assert rc != 0
    assert "diffusion bundles have no energy to calibrate" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in b.iterdir()} == before


def test_sample_diffusion_bundle_cli(dp_bundle, capsys):
    assert cli.main(["sample", "--bundle", str(dp_bundle), "--batch", "2", "--steps", "4", "--threads", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["policy"] == "diffusion" and np.asarray(res["actions"]).shape == (2, 16, 2)
    assert cli.main(["inspect", "--bundle", str(dp_bundle)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["policy"] == "diffusion" and info["sampler"] == {"kind": "ddim", "steps": 20}
    assert "Conv" in info["graphs"]["eps"]["ops"] and info["hashes_ok"]


# ---------------------------------------------------------------------------
# training through the shared trainer / CLI
# ---------------------------------------------------------------------------
def test_resume_is_exact_diffusion(data_file, tmp_path):
    from energyflow.train import Trainer, build_datasets

    over = dict(policy="diffusion", down_dims=(8, 16), n_groups=4, time_embed_dim=8, state_hidden=16)
    tc = TrainConfig(batch_size=8, steps=4, warmup_steps=2, val_every=0, ckpt_every=0, val_fraction=0.2,
                     log_every=1, threads=1)
    mcfg, tr, va, meta = build_datasets(str(data_file), over, tc, "state", [])
    assert mcfg.policy == "diffusion"
    assert meta["clip_sample"] == clip_sample_range(tr.actions[np.unique(tr.act_idx)]) > 0

    def fresh(out):
        out.mkdir()
        return Trainer(mcfg, tc, tr, va, out, meta, progress=False)

    a = fresh(tmp_path / "a")
    a.run()
    b = fresh(tmp_path / "b")
    for _ in range(2):
        b.train_step()
    ck = b.save()
    c = fresh(tmp_path / "c")
    c.load_state_dict(torch.load(ck, weights_only=False))
    c.run()
    for (k, pa), pc in zip(a.policy.state_dict().items(), c.policy.state_dict().values()):
        assert k.startswith(("noise.", "vision.")), k
        torch.testing.assert_close(pa, pc, rtol=0, atol=0, msg=k)
    assert a.validate() is not None


def test_cli_train_diffusion(data_file, tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(["train", "--policy", "diffusion", "--data", str(data_file), "--out", str(out), "--steps", "3",
                   "--batch-size", "8", "--val-every", "2", "--ckpt-every", "2", "--warmup-steps", "1",
                   "--no-progress", "--val-fraction", "0.34", "--threads", "1", "--lr", "1e-3"] + TINY_FLAGS)
    assert rc == 0
    assert (out / "latest.pt").exists() and (out / "ckpt_00000002.pt").exists()
    log = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    assert any(r.get("val_loss") is not None for r in log)
    summ = json.loads((out / "summary.json").read_text())
    assert summ["steps"] == 3 and summ["export_check"]["eps"]["eps_max_abs"] <= 1e-4
    ck = torch.load(out / "latest.pt", weights_only=False)
    assert ck["model_cfg"]["policy"] == "diffusion" and ck["meta"]["clip_sample"] > 0
    man = read_manifest(out / "bundle")
    assert man["policy"] == "diffusion" and man["schedule"]["clip_sample"] == ck["meta"]["clip_sample"]
    assert man["model"]["down_dims"] == [8, 16] and set(man["files"]) == {"eps.onnx"}
    # resume (the checkpoint knows its kind; a conflicting --policy is refused)
    assert cli.main(["train", "--data", str(data_file), "--out", str(out), "--resume", "auto", "--steps", "4",
                     "--no-progress", "--no-export", "--threads", "1"]) == 0
    assert json.loads((out / "summary.json").read_text())["steps"] == 4
    with pytest.raises(ValueError, match="diffusion"):
        cli.main(["train", "--policy", "energyflow", "--data", str(data_file), "--out", str(out), "--resume",
                  "auto", "--steps", "5", "--no-progress", "--no-export", "--threads", "1"])
    # export from the checkpoint writes a diffusion bundle
    assert cli.main(["export", "--checkpoint", str(out / "latest.pt"), "--out", str(out / "b2")]) == 0
    capsys.readouterr()
    man2 = read_manifest(out / "b2")
    assert man2["policy"] == "diffusion" and man2["sampler"] == {"kind": "ddim", "steps": 20}
    assert cli.main(["sample", "--bundle", str(out / "b2"), "--threads", "1"]) == 0
    assert np.asarray(json.loads(capsys.readouterr().out)["actions"]).shape == (1, 16, 2)


def test_cli_export_random_diffusion(tmp_path, capsys):
    assert cli.main(["export", "--random-init", "--tiny", "--policy", "diffusion", "--action-dim", "3",
                     "--state-dim", "4", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    man = read_manifest(tmp_path / "r")
    assert man["policy"] == "diffusion" and man["schedule"]["clip_sample"] == 0.0 and man["action_dim"] == 3
    from energyflow.bench import bench_bundle

    r = bench_bundle(tmp_path / "r", steps=2, repeats=1, warmup=0, threads=1, backend="ort")
    assert r["median_ms"] > 0 and r["policy"] == "diffusion"


# ---------------------------------------------------------------------------
# parity fixtures
# ---------------------------------------------------------------------------
def test_diffusion_fixtures_format(tmp_path):
    from energyflow.fixtures import make_fixtures

    res = make_fixtures(tmp_path, n_cases=2, train_steps=2, steps=3, policy="diffusion")
    doc = json.loads((tmp_path / "cases.json").read_text())
    assert doc["steps"] == 3 and len(doc["cases"]) == 2
    c = doc["cases"][1]
    assert set(c) == {"seed", "obs", "cond", "noise", "actions", "actions_std"}
    man = read_manifest(tmp_path / "bundle")
    assert man["policy"] == "diffusion" and man["schedule"]["clip_sample"] == res["clip_sample"] > 0
    assert np.asarray(c["noise"]).shape == (16, 3) and len(c["cond"]) == man["cond_dim"]
    std = np.asarray(man["action_norm"]["std"], np.float32)
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    a_std = np.asarray(c["actions_std"], np.float32)
    np.testing.assert_allclose(np.asarray(c["actions"]), a_std * std + mean, rtol=1e-6, atol=1e-6)
    # replaying the case on the bundle reproduces it exactly
    fn = OrtEps(tmp_path / "bundle" / "eps.onnx")
    r = ddim_sample(fn, np.asarray([c["cond"]], np.float32), np.asarray([c["noise"]], np.float32),
                    np.asarray(man["schedule"]["alphas_cumprod"]), 3, man["schedule"]["clip_sample"], mean, std)
    np.testing.assert_array_equal(r.actions_std[0], a_std)
    assert res["torch_vs_ort_max_abs_action_diff"] < 1e-3


def test_committed_diffusion_fixtures_replay():
    """engines/testdata/parity-diffusion: the committed cases replay on the committed bundle."""
    root = Path(__file__).resolve().parents[2] / "engines" / "testdata" / "parity-diffusion"
    if not (root / "cases.json").exists():
        pytest.skip("no committed diffusion fixtures")
    man = read_manifest(root / "bundle")
    doc = json.loads((root / "cases.json").read_text())
    assert doc["steps"] == 20 and len(doc["cases"]) >= 20
    fn = OrtEps(root / "bundle" / man["graphs"]["eps"]["file"])
    mean = np.asarray(man["action_norm"]["mean"], np.float32)
    std = np.asarray(man["action_norm"]["std"], np.float32)
    for c in doc["cases"][:3]:
        r = ddim_sample(fn, np.asarray([c["cond"]], np.float32), np.asarray([c["noise"]], np.float32),
                        np.asarray(man["schedule"]["alphas_cumprod"]), doc["steps"], man["schedule"]["clip_sample"],
                        mean, std)
        np.testing.assert_allclose(r.actions[0], np.asarray(c["actions"], np.float32), rtol=1e-5, atol=1e-5)
