"""The denoiser energy head (training/README.md, "Energy heads and noise levels"), EDM noise levels and loss weight,
EMA spectral-norm vectors, grad-norm logging, manifest records, old bundles."""
import json
import math
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from energyflow import cli
from energyflow.bundle import model_config_from_manifest, read_manifest
from energyflow.config import LEGACY_ENERGY_HEAD, ModelConfig, Schedule, TINY_SIZE, TrainConfig
from energyflow.data import write_hdf5
from energyflow.export import ExportCheckError, export_energy_grad, write_bundle
from energyflow.losses import dsm_loss, sample_t_lognormal, sigma_t, t_of_sigma
from energyflow.model import (DenoiserEnergy, EnergyUNet, VectorUNet, energy_model, recompute_spectral_norm)
from test_export_bundle import check_export_graph
from test_train_cli import TINY_FLAGS, toy_demos

torch.set_num_threads(1)
D = torch.float64
ROOT = Path(__file__).resolve().parents[2]
# a committed bundle exported before --energy-head existed (the pooled head; the
# Go parity fixture: the shipped Meta-World bundles are all retrained since)
SHIPPED = ROOT / "engines" / "testdata" / "parity" / "bundle"


def tiny(**kw) -> ModelConfig:
    d = dict(action_dim=3, state_dim=5, energy_head="denoiser", **TINY_SIZE)
    d.update(kw)
    return ModelConfig(**d)


def trained_like(m: DenoiserEnergy, seed: int = 0) -> DenoiserEnergy:
    """Give F's zero-initialised last layer random weights (as training would)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (m.net.final_conv.weight, m.net.final_conv.bias):
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return m


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("ehdata") / "toy.hdf5"
    write_hdf5(p, toy_demos(), env="toy-env")
    return p


# ---------------------------------------------------------------------------
# the head
# ---------------------------------------------------------------------------
def test_energy_model_picks_head():
    assert isinstance(energy_model(tiny()), DenoiserEnergy)
    assert isinstance(energy_model(tiny(energy_head="pooled")), EnergyUNet)
    with pytest.raises(ValueError, match="energy head"):
        tiny(energy_head="scalar")


def test_denoiser_head_is_gaussian_prior_at_init():
    torch.manual_seed(0)
    m = DenoiserEnergy(tiny()).to(D).eval()
    a = torch.randn(4, 16, 3, dtype=D) * 3
    c = torch.randn(4, m.cfg.cond_dim, dtype=D)
    t = torch.tensor([0.0, 1e-3, 0.5, 1.0], dtype=D)
    sig = sigma_t(t, m.cfg.schedule).reshape(-1, 1, 1)
    prior = 0.5 * (a * a).sum(dim=(1, 2)) / (sig.reshape(-1) ** 2 + 1)
    torch.testing.assert_close(m(a, c, t), prior, rtol=1e-12, atol=1e-12)
    s, _ = m.score(a, c, t)
    torch.testing.assert_close(-s, a / (sig * sig + 1), rtol=1e-12, atol=1e-12)
    g, e = m.energy_and_grad(a, c, t)
    torch.testing.assert_close(g, a / (sig * sig + 1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(e, prior, rtol=1e-12, atol=1e-12)
    # the preconditioning: c_in = 1/sqrt(sigma^2+1), c_noise = ln(sigma)/4
    sg, c_in, c_noise = m.precond(t)
    torch.testing.assert_close(sg, sig)
    torch.testing.assert_close(c_in, 1 / torch.sqrt(sig * sig + 1))
    torch.testing.assert_close(c_noise, 0.25 * torch.log(sig.reshape(-1)))


def test_vector_unet_vjp():
    torch.manual_seed(1)
    f = VectorUNet(tiny(), zero_init=False).to(D).eval()
    x = torch.randn(2, 16, 3, dtype=D, requires_grad=True)
    c, cn = torch.randn(2, 10, dtype=D), torch.randn(2, dtype=D)
    y = f(x, c, cn)
    y2, cache = f.forward_cache(x, c, cn)
    torch.testing.assert_close(y2, y)
    gy = torch.randn_like(y)
    (ref,) = torch.autograd.grad(y, x, gy)
    torch.testing.assert_close(f.vjp(gy, cache), ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(activation="softplus"), dict(down_dims=(8, 16), n_groups=8)])
def test_denoiser_vjp_matches_autograd(kw):
    torch.manual_seed(2)
    m = trained_like(DenoiserEnergy(tiny(**kw)).to(D).eval())
    a = torch.randn(3, 16, 3, dtype=D) * 2
    c = torch.randn(3, m.cfg.cond_dim, dtype=D)
    t = torch.tensor([1e-3, 0.4, 1.0], dtype=D)
    s, e = m.score(a, c, t)
    g, e2 = m.energy_and_grad(a, c, t)
    torch.testing.assert_close(e2, e, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(g, -s, rtol=1e-9, atol=1e-9)


def test_denoiser_export_matches_autograd_and_ops(tmp_path):
    torch.manual_seed(3)
    m = trained_like(DenoiserEnergy(tiny(action_dim=2, state_dim=4)))
    p = tmp_path / "eg.onnx"
    errs = export_energy_grad(m, p)
    assert errs["grad_a"] <= 1e-5 and errs["energy"] <= 1e-5
    check_export_graph(p)
    sess = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["a_t", "cond", "t"]
    assert [o.name for o in sess.get_outputs()] == ["grad_a", "energy"]
    for B in (1, 5):  # dynamic batch
        g, e = sess.run(None, {"a_t": np.random.randn(B, 16, 2).astype(np.float32),
                               "cond": np.random.randn(B, 8).astype(np.float32),
                               "t": np.random.rand(B).astype(np.float32)})
        assert g.shape == (B, 16, 2) and e.shape == (B,)
    # the self-check refuses a graph outside the tolerance and leaves no file
    with pytest.raises(ExportCheckError):
        export_energy_grad(m, tmp_path / "bad.onnx", tol=0.0)
    assert not (tmp_path / "bad.onnx").exists()


# ---------------------------------------------------------------------------
# noise levels and loss weight
# ---------------------------------------------------------------------------
def test_lognormal_sigma_sampling_stays_in_range():
    s = Schedule()
    g = torch.Generator().manual_seed(0)
    t = sample_t_lognormal(200_000, s, -0.5, 1.2, g)
    assert float(t.min()) >= 0.0 and float(t.max()) <= s.T
    sig = sigma_t(t, s)
    assert float(sig.min()) >= s.sigma_min * (1 - 1e-5) and float(sig.max()) <= s.sigma_max * (1 + 1e-5)
    ln = torch.log(sig)
    inside = ln[(t > 0) & (t < s.T)]
    assert abs(float(ln.median()) + 0.5) < 0.02
    assert abs(float(inside.std()) - 1.2) < 0.1          # only ~1 % is clipped
    assert 0.005 < float((t == s.T).float().mean()) < 0.015   # P(ln sigma > ln 10) ≈ 1 %
    torch.testing.assert_close(t_of_sigma(sig, s), t, rtol=1e-4, atol=1e-5)
    # a law far outside the schedule is clipped to its ends, never out of range
    t2 = sample_t_lognormal(1000, s, 10.0, 1.0, g)
    assert torch.all(t2 == s.T)


def test_edm_loss_weighting():
    torch.manual_seed(4)
    m = DenoiserEnergy(tiny()).eval()
    a0, c = torch.randn(8, 16, 3), torch.randn(8, 10)
    eps = torch.randn(8, 16, 3)
    for tv in (0.1, 0.6, 0.95):
        t = torch.full((8,), tv)
        sig2 = float(sigma_t(t[:1], m.cfg.schedule)) ** 2
        l1 = dsm_loss(m, a0, c, m.cfg.schedule, t=t, eps=eps)
        l2 = dsm_loss(m, a0, c, m.cfg.schedule, t=t, eps=eps, weighting="edm")
        assert float(l2.detach()) == pytest.approx((sig2 + 1) * float(l1.detach()), rel=1e-5)
    # at init (E = the Gaussian prior) the sigma2-weighted residual is known in closed form
    t = torch.full((8,), 0.6)
    sig = sigma_t(t, m.cfg.schedule).reshape(-1, 1, 1)
    resid = -sig * (a0 + sig * eps) / (sig * sig + 1) + eps
    l0 = dsm_loss(m, a0, c, m.cfg.schedule, t=t, eps=eps).detach()
    assert float(l0) == pytest.approx(float(resid.pow(2).mean()), rel=1e-5)
    with pytest.raises(ValueError, match="weighting"):
        dsm_loss(m, a0, c, m.cfg.schedule, t=t, eps=eps, weighting="l1")
    with pytest.raises(ValueError):
        TrainConfig(sigma_sampling="beta")
    with pytest.raises(ValueError):
        TrainConfig(loss_weighting="none")


# ---------------------------------------------------------------------------
# EMA spectral norm
# ---------------------------------------------------------------------------
def _top_singular(model) -> list:
    """Largest singular value of every spectral-normalised layer's effective (eval) weight."""
    return [float(torch.linalg.matrix_norm(lin.weight.detach(), ord=2)) for lin in model.head]


def test_ema_spectral_norm_recompute():
    from energyflow.train import EMA

    torch.manual_seed(5)
    live = EnergyUNet(tiny(energy_head="pooled")).train()
    ema = EMA(live)
    a, c, t = torch.randn(4, 16, 3), torch.randn(4, 10), torch.rand(4)
    # the live weights move far from the averaged ones; its power iteration follows them
    with torch.no_grad():
        for lin in live.head:
            w = lin.parametrizations.weight.original
            w.add_(torch.randn_like(w) * 2.0)
    for _ in range(20):
        live(a, c, t)
    ema.step = 3  # decay 1 - 4^-0.75 ≈ 0.65: a real average of old and new weights
    ema.update(live)
    ema.model.eval()
    before = _top_singular(ema.model)
    assert max(abs(s - 1.0) for s in before) > 1e-2, before   # the copied vectors belong to other weights
    assert ema.sync_spectral_norm() == len(live.head)
    after = _top_singular(ema.model)
    assert max(abs(s - 1.0) for s in after) < 1e-5, after
    # the live model is untouched and a model without spectral norm has nothing to do
    assert recompute_spectral_norm(DenoiserEnergy(tiny())) == 0


# ---------------------------------------------------------------------------
# training, manifest, checkpoint, old bundles
# ---------------------------------------------------------------------------
def _train(data_file, out, *extra):
    rc = cli.main(["train", "--data", str(data_file), "--out", str(out), "--steps", "3", "--batch-size", "8",
                   "--val-every", "2", "--ckpt-every", "0", "--warmup-steps", "1", "--no-progress",
                   "--val-fraction", "0.34", "--threads", "1", *TINY_FLAGS, *extra])
    assert rc == 0
    return json.loads((out / "bundle" / "manifest.json").read_text())


def test_denoiser_train_records_head_sampling_weighting(data_file, tmp_path, capsys):
    out = tmp_path / "run"
    man = _train(data_file, out, "--energy-head", "denoiser", "--sigma-sampling", "lognormal",
                 "--sigma-mean", "-0.4", "--sigma-std", "1.1", "--loss-weighting", "edm")
    capsys.readouterr()
    assert man["policy"] == "energyflow"
    assert man["model"]["energy_head"] == "denoiser"
    assert man["model"]["training"] == {"sigma_sampling": {"kind": "lognormal", "mean": -0.4, "std": 1.1,
                                                           "clip": "schedule"},
                                        "loss_weighting": "edm"}
    assert "head_dims" not in man["model"] and "energy_prior" not in man["model"]   # pooled-only fields
    assert man["model"]["export_check"]["energy_grad"]["grad_a"] <= 1e-5
    cfg = model_config_from_manifest(man)
    assert cfg.energy_head == "denoiser"
    # the checkpoint records them too
    ck = torch.load(out / "latest.pt", weights_only=False)
    assert ck["model_cfg"]["energy_head"] == "denoiser"
    assert ck["train_cfg"]["sigma_sampling"] == "lognormal" and ck["train_cfg"]["loss_weighting"] == "edm"
    assert ck["meta"]["training"] == man["model"]["training"]
    # the gradient norm before clipping is logged
    log = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    gn = [r["grad_norm"] for r in log if "grad_norm" in r]
    assert gn and all(g > 0 and math.isfinite(g) for g in gn)
    # export from the checkpoint writes the same records; the bundle samples
    assert cli.main(["export", "--checkpoint", str(out / "latest.pt"), "--out", str(tmp_path / "b2")]) == 0
    capsys.readouterr()
    man2 = read_manifest(tmp_path / "b2")
    assert man2["model"]["energy_head"] == "denoiser" and man2["model"]["training"] == man["model"]["training"]
    assert cli.main(["sample", "--bundle", str(tmp_path / "b2"), "--batch", "2", "--steps", "3"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert np.isfinite(np.asarray(res["actions"])).all() and len(res["energy"]) == 2


def test_pooled_head_still_trains_and_exports(data_file, tmp_path, capsys):
    man = _train(data_file, tmp_path / "run", "--energy-head", "pooled", "--energy-prior", "gaussian")
    capsys.readouterr()
    assert man["model"]["energy_head"] == "pooled" and man["model"]["energy_prior"] == "gaussian"
    assert man["model"]["head_dims"] == [16, 8]
    assert man["model"]["training"] == {"sigma_sampling": {"kind": "uniform"}, "loss_weighting": "sigma2"}
    assert isinstance(energy_model(model_config_from_manifest(man)), EnergyUNet)


def test_default_head_is_one_constant():
    """A new config's head is config.DEFAULT_ENERGY_HEAD (the one line to switch); a saved
    config without the field (checkpoint, manifest from before it) is always the pooled head."""
    import energyflow.config as config

    assert ModelConfig().energy_head == config.DEFAULT_ENERGY_HEAD == "denoiser"
    assert ModelConfig.from_dict({"action_dim": 2, "energy_head": "denoiser"}).energy_head == "denoiser"
    assert ModelConfig.from_saved({"action_dim": 2}).energy_head == LEGACY_ENERGY_HEAD == "pooled"
    assert ModelConfig.from_saved({"action_dim": 2, "energy_head": "denoiser"}).energy_head == "denoiser"


def test_default_training_is_the_measured_denoiser_recipe(data_file, tmp_path, capsys):
    """No head flags: the denoiser head with its measured noise law and weight (log-normal
    sigma, EDM weighting), recorded in the manifest and the checkpoint's train_cfg."""
    man = _train(data_file, tmp_path / "run")
    capsys.readouterr()
    assert man["model"]["energy_head"] == "denoiser"
    assert man["model"]["training"] == {"sigma_sampling": {"kind": "lognormal", "mean": -0.5, "std": 1.2,
                                                           "clip": "schedule"}, "loss_weighting": "edm"}
    ck = torch.load(tmp_path / "run" / "latest.pt", weights_only=False)
    assert ck["train_cfg"]["sigma_sampling"] == "lognormal" and ck["train_cfg"]["loss_weighting"] == "edm"


@pytest.mark.parametrize("head, over, want", [
    ("denoiser", {}, ("lognormal", "edm")),
    ("pooled", {}, ("uniform", "sigma2")),
    ("denoiser", {"sigma_sampling": "uniform"}, ("uniform", "edm")),
    ("pooled", {"loss_weighting": "edm"}, ("uniform", "edm")),
])
def test_auto_noise_recipe_follows_the_head(head, over, want):
    tc = TrainConfig(**over).for_head(head)
    assert (tc.sigma_sampling, tc.loss_weighting) == want
    with pytest.raises(ValueError, match="unresolved"):
        TrainConfig().noise_record()
    with pytest.raises(ValueError, match="unknown energy head 'wide'"):
        TrainConfig().for_head("wide")


def test_old_checkpoint_without_head_field_loads_pooled(data_file, tmp_path, capsys):
    from energyflow.train import load_checkpoint_policy

    out = tmp_path / "run"
    _train(data_file, out, "--energy-head", "pooled", "--sigma-sampling", "uniform", "--loss-weighting", "sigma2")
    capsys.readouterr()
    ck = torch.load(out / "latest.pt", weights_only=False)
    for k in ("sigma_sampling", "sigma_mean", "sigma_std", "loss_weighting"):
        del ck["train_cfg"][k]
    del ck["model_cfg"]["energy_head"]
    del ck["meta"]["training"]
    torch.save(ck, out / "old.pt")
    pol, meta = load_checkpoint_policy(out / "old.pt")
    assert isinstance(pol.energy, EnergyUNet)
    assert meta["training"] == {"sigma_sampling": {"kind": "uniform"}, "loss_weighting": "sigma2"}


def test_shipped_bundle_still_loads_and_samples(tmp_path, capsys):
    man = read_manifest(SHIPPED)
    assert "energy_head" not in man["model"]          # exported before the option
    cfg = model_config_from_manifest(man)
    assert cfg.energy_head == "pooled"
    assert cli.main(["inspect", "--bundle", str(SHIPPED)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["hashes_ok"]
    assert cli.main(["sample", "--bundle", str(SHIPPED), "--batch", "2", "--steps", "4", "--threads", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert np.asarray(res["actions"]).shape == (2, man["pred_horizon"], man["action_dim"])
    assert np.isfinite(res["energy"]).all()
    # and the torch rebuild from its graph (bench) is still the pooled network
    from energyflow.bench import torch_model_from_bundle

    m, _ = torch_model_from_bundle(SHIPPED)
    assert isinstance(m, EnergyUNet) and m.weights_loaded[0] > 0


def test_denoiser_bundle_torch_rebuild(tmp_path):
    from energyflow.bench import torch_model_from_bundle
    from energyflow.sampler import OrtEnergyGrad, TorchEnergyGrad

    torch.manual_seed(6)
    m = trained_like(DenoiserEnergy(tiny(action_dim=2, state_dim=4)))
    write_bundle(tmp_path / "b", m, "d", [0, 0], [1, 1], [0] * 4, [1] * 4)
    r, man = torch_model_from_bundle(tmp_path / "b")
    assert isinstance(r, DenoiserEnergy) and man["model"]["energy_head"] == "denoiser"
    a = np.random.default_rng(0).standard_normal((3, 16, 2)).astype(np.float32)
    c = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    t = np.asarray([1e-3, 0.5, 1.0], np.float32)
    g1, e1 = OrtEnergyGrad(tmp_path / "b" / "energy_grad.onnx")(a, c, t)
    g2, e2 = TorchEnergyGrad(r)(a, c, t)
    np.testing.assert_allclose(g2, g1, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(e2, e1, rtol=1e-5)


def test_denoiser_fixtures(tmp_path, capsys):
    assert cli.main(["fixtures", "--out", str(tmp_path), "--energy-head", "denoiser", "--cases", "2",
                     "--train-steps", "3", "--steps", "3"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["energy_head"] == "denoiser" and res["torch_vs_ort_max_abs_action_diff"] < 1e-3
    man = read_manifest(tmp_path / "bundle")
    assert man["model"]["energy_head"] == "denoiser" and man["name"] == "parity-denoiser-tiny"
    doc = json.loads((tmp_path / "cases.json").read_text())
    assert doc["steps"] == 3 and len(doc["cases"]) == 2
    assert cli.main(["fixtures", "--out", str(tmp_path / "x"), "--policy", "diffusion",
                     "--energy-head", "denoiser"]) == 2
