"""Training (toy two-mode data, exact resume), calibration and the CLI."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from energyflow import cli
from energyflow.calibrate import calibration_block, score_stats
from energyflow.config import ModelConfig, TrainConfig
from energyflow.data import Demo, write_hdf5
from energyflow.losses import dsm_loss
from energyflow.model import EnergyUNet
from energyflow.sampler import TorchEnergyGrad, sample

torch.set_num_threads(1)

TINY_FLAGS = ["--down-dims", "8", "16", "--n-groups", "4", "--time-embed-dim", "8", "--state-hidden", "16",
              "--head-dims", "16", "8"]


def toy_demos(n=6, L=20, ds=3, da=2, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = np.cumsum(rng.standard_normal((L, ds)), 0).astype(np.float32) * 0.1
        a = np.tanh(s[:, :da] + rng.standard_normal((L, da)) * 0.05).astype(np.float32)
        out.append(Demo(f"demo_{i}", a, {"state": s}))
    return out


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("data") / "toy.hdf5"
    write_hdf5(p, toy_demos(), env="toy-env")
    return p


def test_dsm_loss_falls_and_sampler_finds_both_modes():
    """Toy 2-D two-mode data: a = +-1 (every step and dim) + 0.1 noise, no state dependence."""
    torch.manual_seed(0)
    cfg = ModelConfig(action_dim=2, state_dim=1, pred_horizon=4, down_dims=(16, 32), n_groups=4, time_embed_dim=16,
                      state_hidden=16, head_dims=(32, 16))
    m = EnergyUNet(cfg)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(250):
        mode = (torch.rand(64, 1, 1, generator=g) < 0.5).float() * 2 - 1
        a = mode * torch.ones(64, 4, 2) + 0.1 * torch.randn(64, 4, 2, generator=g)
        loss = dsm_loss(m, a, torch.zeros(64, 2), cfg.schedule, generator=g)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    assert np.mean(losses[-25:]) < 0.7 * np.mean(losses[:25])
    m.eval()
    z = np.random.default_rng(1).standard_normal((200, 4, 2)).astype(np.float32)
    r = sample(TorchEnergyGrad(m), np.zeros((200, 2), np.float32), z, cfg.schedule, 20)
    mean = r.actions_std.mean(axis=(1, 2))
    assert (mean > 0.5).mean() > 0.25 and (mean < -0.5).mean() > 0.25, mean
    # lower energy at the modes than between them
    a = np.stack([np.full((4, 2), v, np.float32) for v in (-1.0, 0.0, 1.0)])
    e = TorchEnergyGrad(m)(a, np.zeros((3, 2), np.float32), np.full(3, cfg.schedule.gamma, np.float32))[1]
    assert e[1] > max(e[0], e[2])


def test_resume_is_exact(data_file, tmp_path):
    from energyflow.train import Trainer, build_datasets

    over = dict(down_dims=(8, 16), n_groups=4, time_embed_dim=8, state_hidden=16, head_dims=(16, 8))
    tc = TrainConfig(batch_size=8, steps=4, warmup_steps=2, val_every=0, ckpt_every=0, val_fraction=0.2,
                     log_every=1, threads=1)
    mcfg, tr, va, meta = build_datasets(str(data_file), over, tc, "state", [])

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
        torch.testing.assert_close(pa, pc, rtol=0, atol=0, msg=k)
    for pa, pc in zip(a.ema.model.state_dict().values(), c.ema.model.state_dict().values()):
        torch.testing.assert_close(pa, pc, rtol=0, atol=0)
    assert a.validate() is not None


def test_cli_train_calibrate_inspect_sample(data_file, tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(["train", "--data", str(data_file), "--out", str(out), "--steps", "3", "--batch-size", "8",
                   "--val-every", "2", "--ckpt-every", "2", "--warmup-steps", "1", "--no-progress",
                   "--val-fraction", "0.34", "--no-export", "--threads", "1"] + TINY_FLAGS)
    assert rc == 0
    assert (out / "latest.pt").exists() and (out / "ckpt_00000002.pt").exists()
    log = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    assert any("val_loss" in r for r in log) and any("it_per_s" in r for r in log)
    assert json.loads((out / "summary.json").read_text())["steps"] == 3
    # resume to more steps
    assert cli.main(["train", "--data", str(data_file), "--out", str(out), "--resume", "auto", "--steps", "4",
                     "--no-progress", "--no-export", "--threads", "1"]) == 0
    assert json.loads((out / "summary.json").read_text())["steps"] == 4
    # export the EMA weights from the checkpoint (verified against autograd)
    assert cli.main(["export", "--checkpoint", str(out / "latest.pt"), "--out", str(out / "bundle")]) == 0
    capsys.readouterr()
    man = json.loads((out / "bundle" / "manifest.json").read_text())
    assert man["action_dim"] == 2 and man["cond_dim"] == 6 and man["model"]["down_dims"] == [8, 16]
    assert man["model"]["export_check"]["energy_grad"]["grad_a"] <= 1e-5
    # calibrate on held-out demos (same split as training)
    assert cli.main(["calibrate", "--bundle", str(out / "bundle"), "--data", str(data_file), "--n-windows", "12",
                     "--steps", "2", "--val-fraction", "0.34"]) == 0
    capsys.readouterr()
    man = json.loads((out / "bundle" / "manifest.json").read_text())
    cal = man["calibration"]
    assert cal["n_windows"] == 12 and cal["steps"] == 2
    assert set(cal["scores"]) == {"energy", "centered_energy"}
    assert set(cal["scores"]["energy"]["quantiles"]) == {"50", "90", "99", "99.9"}
    assert cal["recommended"]["threshold"] == cal["scores"]["energy"]["quantiles"]["99.9"]
    assert "calibration.png" in man["files"]
    # recalibrating on windows keeps the closed-loop thresholds (energyflow sim calibrate), those
    # at other control rates too
    closed = {"score": "energy", "alpha": 0.1, "rate_hz": 20, "steps_k": 2,
              "bands": [{"from": 0, "mean": 1.0, "std": 0.5, "threshold": 2.0}]}
    others = [dict(closed, rate_hz=10)]
    man["calibration"]["closed_loop"] = closed
    man["calibration"]["closed_loop_others"] = others
    (out / "bundle" / "manifest.json").write_text(json.dumps(man))
    assert cli.main(["calibrate", "--bundle", str(out / "bundle"), "--data", str(data_file), "--n-windows", "12",
                     "--steps", "2", "--val-fraction", "0.34"]) == 0
    capsys.readouterr()
    man = json.loads((out / "bundle" / "manifest.json").read_text())
    assert man["calibration"]["closed_loop"] == closed and man["calibration"]["scores"] == cal["scores"]
    assert man["calibration"]["closed_loop_others"] == others
    # the evaluation's choice replaces the recommendation only; hashes stay valid
    assert cli.main(["threshold", "--bundle", str(out / "bundle"), "--score", "centered_energy",
                     "--value", "1.5", "--rule", "test"]) == 0
    man2 = json.loads((out / "bundle" / "manifest.json").read_text())
    assert man2["calibration"]["recommended"] == {"score": "centered_energy", "threshold": 1.5, "rule": "test"}
    assert man2["calibration"]["scores"] == cal["scores"]
    assert cli.main(["threshold", "--bundle", str(out / "bundle"), "--score", "energy", "--value", "nan",
                     "--rule", "x"]) == 2
    capsys.readouterr()
    assert cli.main(["inspect", "--bundle", str(out / "bundle")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["hashes_ok"] and "Conv" in info["graphs"]["energy_grad"]["ops"]
    assert cli.main(["sample", "--bundle", str(out / "bundle"), "--batch", "2", "--steps", "3"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert np.asarray(res["actions"]).shape == (2, 16, 2) and len(res["energy"]) == 2


def test_cli_export_random_and_bench(tmp_path, capsys):
    assert cli.main(["export", "--random-init", "--tiny", "--action-dim", "3", "--state-dim", "4",
                     "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    man = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert man["action_dim"] == 3 and man["model"]["down_dims"] == [8, 16, 32]
    from energyflow.bench import bench_bundle

    r = bench_bundle(tmp_path / "r", steps=2, repeats=1, warmup=1, threads=1)
    assert r["median_ms"] > 0 and r["weights_loaded"][0] > 0
    r = bench_bundle(tmp_path / "r", steps=2, repeats=1, warmup=1, threads=1, backend="ort")
    assert r["median_ms"] > 0


@pytest.mark.parametrize("cmd", ["train", "export", "calibrate", "sample", "inspect", "fixtures", "bench", "probe"])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([cmd, "--help"])
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_calibration_quantiles_known_data():
    x = np.arange(1001, dtype=np.float64)  # 0..1000
    st = score_stats(x)
    assert st["mean"] == 500.0 and st["std"] == pytest.approx(np.std(x))
    assert st["quantiles"] == pytest.approx({"50": 500.0, "90": 900.0, "99": 990.0, "99.9": 999.0})
    blk = calibration_block({"energy": x, "centered_energy": -x}, 1001, 0, 20)
    assert blk["recommended"]["threshold"] == pytest.approx(999.0)
    assert blk["recommended"]["rule"] == "quantile 99.9 of held-out windows"
    assert blk["scores"]["centered_energy"]["quantiles"]["50"] == -500.0
    with pytest.raises(ValueError):
        score_stats([])


def test_config_file(tmp_path, data_file):
    cfgf = tmp_path / "c.yaml"
    cfgf.write_text("model:\n  down_dims: [8, 16]\n  n_groups: 4\nschedule:\n  sigma_max: 5.0\ntrain:\n  lr: 0.001\n")
    args = cli.build_parser().parse_args(["train", "--data", str(data_file), "--out", "x", "--config", str(cfgf),
                                          "--lr", "0.002"])
    fc = cli._file_cfg(args)
    mo = cli.model_overrides(args, fc)
    assert mo["down_dims"] == [8, 16] and mo["schedule"] == {"sigma_max": 5.0}
    assert cli.train_overrides(args, fc)["lr"] == 0.002
    assert ModelConfig.from_dict(mo).schedule.sigma_max == 5.0


def test_bad_input_is_one_line(tmp_path):
    """``python -m energyflow``: a missing data file is one line on stderr and exit status 2."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "energyflow", "train", "--data", str(tmp_path / "none.hdf5"),
                        "--out", str(tmp_path / "run"), "--steps", "1"], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"energyflow train: {tmp_path / 'none.hdf5'}: file not found"]
