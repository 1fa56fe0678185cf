"""The conditioning probe on analytic bundles whose action is a known function of the state.

Data: raw action[0] = 2 * state[0] (+ tiny noise), action[1] constant; state[1]
is a copy of state[0] plus an offset (a grouped input), state[2] varies most
and does not matter. The bundles hold the exact energy / noise predictor of
that law (Gaussian, std S0 in standardized units around the state's mean), so
the probe must report slope 2 for state 0 and 0 for state 2, with either
sampler, and D's slope sigma^2/(sigma^2 + S0^2) * 2 at noise level sigma.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from energyflow import cli
from energyflow.bundle import build_manifest, write_manifest
from energyflow.config import ModelConfig
from energyflow.data import Demo, write_hdf5
from energyflow.diffusion import ddpm_alphas_cumprod
from energyflow.export import export_onnx
from energyflow.probe import ProbeError, parse_dims, run_probe, top_varying_groups

torch.set_num_threads(1)

S0 = 0.05                                      # action noise around the mean, standardized units
S_MEAN = np.asarray([0.1, 5.1, 0.0], np.float32)
S_STD = np.asarray([0.6, 0.6, 1.7], np.float32)
A_MEAN = np.asarray([2 * 0.1, 0.3], np.float32)   # action[0] = 2 state[0]: standardized a0 = cond[state 0]
A_STD = np.asarray([2 * 0.6, 1.0], np.float32)
T_P, T_O, D_A, D_S = 8, 2, 2, 3


def _cfg(policy: str) -> ModelConfig:
    return ModelConfig(action_dim=D_A, state_dim=D_S, pred_horizon=T_P, obs_horizon=T_O, action_horizon=4,
                       policy=policy)


class _Mean(nn.Module):
    """m(cond) [B, T_p, D_a]: the newest frame's standardized state 0 in action dim 0, 0 in dim 1."""

    def __init__(self) -> None:
        super().__init__()
        sel = torch.zeros(T_O * D_S, D_A)
        sel[(T_O - 1) * D_S + 0, 0] = 1.0
        self.register_buffer("sel", sel)
        self.register_buffer("ones", torch.ones(1, T_P, 1))

    def forward(self, cond: torch.Tensor) -> torch.Tensor:
        return torch.matmul(cond, self.sel).unsqueeze(1) * self.ones


class ExactEnergy(nn.Module):
    """E = |a - m|^2 / (2 (sigma^2 + S0^2)), grad = (a - m)/(sigma^2 + S0^2)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.mean, self.s = _Mean(), cfg.schedule

    def forward(self, a_t, cond, t):
        s = self.s
        sig = s.sigma_min * torch.exp(t * (np.log(s.sigma_max / s.sigma_min) / s.T))
        var = (sig * sig + S0 * S0).reshape(-1, 1, 1)
        d = a_t - self.mean(cond)
        return d / var, 0.5 * (d * d / var).sum(dim=(1, 2))


class ExactEps(nn.Module):
    """E[eps | x_k] for a0 ~ N(m, S0^2): sqrt(1-ab) (x - sqrt(ab) m) / (ab S0^2 + 1 - ab)."""

    def __init__(self) -> None:
        super().__init__()
        self.mean = _Mean()
        self.register_buffer("ac", torch.as_tensor(ddpm_alphas_cumprod(), dtype=torch.float32))

    def forward(self, a_t, cond, t):
        ab = self.ac[t.long()].reshape(-1, 1, 1)
        return torch.sqrt(1 - ab) * (a_t - torch.sqrt(ab) * self.mean(cond)) / (ab * S0 * S0 + 1 - ab)


def _bundle(out: Path, policy: str) -> Path:
    out.mkdir(parents=True)
    cfg = _cfg(policy)
    args = (torch.zeros(2, T_P, D_A), torch.zeros(2, cfg.cond_dim), torch.full((2,), 0.5))
    names = ["a_t", "cond", "t"]
    if policy == "diffusion":
        outs, mod, f = ["eps"], ExactEps(), "eps.onnx"
    else:
        outs, mod, f = ["grad_a", "energy"], ExactEnergy(cfg), "energy_grad.onnx"
    export_onnx(mod, args, out / f, names, outs, {n: {0: "batch"} for n in names + outs})
    man = build_manifest(cfg, f"exact-{policy}", A_MEAN, A_STD, S_MEAN, S_STD)
    write_manifest(out, man)
    return out


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    return _bundle(root / "ef", "energyflow"), _bundle(root / "dp", "diffusion")


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    demos = []
    for i in range(12):
        L = 10
        s = np.zeros((L, D_S), np.float32)
        s[:, 0] = 0.1 + 0.6 * rng.uniform(-1.5, 1.5) + 0.01 * np.arange(L)
        s[:, 1] = s[:, 0] + 5.0
        s[:, 2] = 1.7 * rng.uniform(-1.5, 1.5)
        a = np.stack([2 * s[:, 0], np.full(L, 0.3, np.float32)], 1) + 0.01 * rng.standard_normal((L, D_A))
        demos.append(Demo(f"demo_{i}", a.astype(np.float32), {"state": s}))
    p = tmp_path_factory.mktemp("probedata") / "lin.hdf5"
    write_hdf5(p, demos, env="linear")
    return p


def test_input_selection():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((20, 4)) * np.asarray([1.0, 3.0, 0.1, 1.0])
    s[:, 3] = s[:, 0] + 7.0
    assert top_varying_groups(s, top=2) == [[1], [0, 3]]
    g = top_varying_groups(s, top=3, group=False)
    assert g[0] == [1] and sorted(g[1:]) == [[0], [3]]
    assert parse_dims("4+22+36, 5", 39) == [[4, 22, 36], [5]]
    with pytest.raises(ProbeError):
        parse_dims("40", 39)


@pytest.mark.parametrize("which", [0, 1])
def test_probe_finds_the_known_slope(bundles, data_file, which):
    res = run_probe(bundles[which], data_file, dims="0+1,2", all_demos=True, episodes=12, samples=8,
                    sigmas=(7.0, 0.5, 0.1))
    assert res["start_states"]["n"] == 12
    b = res["bundles"][0]
    assert b["policy"] == ("energyflow", "diffusion")[which]
    moved, idle = b["inputs"]
    assert moved["dims"] == [0, 1] and idle["dims"] == [2]
    # executed action (actions[T_o-1]): d a0 / d s0 = 2, action 1 constant; nothing for state 2
    assert moved["slope"][0] == pytest.approx(2.0, abs=0.02)
    assert abs(moved["slope"][1]) < 1e-3
    assert moved["slope_norm"] == pytest.approx(2.0, abs=0.02)
    assert idle["slope_norm"] < 1e-3 and idle["slope_norm_per_state"] < 1e-3
    # denoised estimate at a fixed noisy point: dD/dm = sigma^2 / (sigma^2 + S0^2)
    for d in moved["denoised"]:
        sig = d["sigma_used"]
        assert d["slope"][0] == pytest.approx(2.0 * sig ** 2 / (sig ** 2 + S0 ** 2), rel=2e-3), d
        assert d["chunk_rms_per_std"] > 0
    for d in idle["denoised"]:
        assert d["slope_norm"] < 1e-4 and d["chunk_rms_per_std"] < 1e-4
    if which == 1:
        assert all("k" in d for d in moved["denoised"])


def test_probe_cli_side_by_side(bundles, data_file, capsys):
    ef, dp = bundles
    assert cli.main(["probe", "--bundle", str(ef), "--data", str(data_file), "--against", str(dp),
                     "--all-demos", "--samples", "4", "--top", "2", "--sigmas", "2,0.5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [b["policy"] for b in res["bundles"]] == ["energyflow", "diffusion"]
    assert [i["dims"] for i in res["inputs"]] == [[2], [0, 1]]     # most varying first, copies grouped
    for b in res["bundles"]:
        assert b["inputs"][1]["slope"][0] == pytest.approx(2.0, abs=0.03)
        assert b["inputs"][0]["slope_norm"] < 1e-3
    assert cli.main(["probe", "--bundle", str(ef), "--data", str(data_file), "--against", str(dp),
                     "--episodes", "3", "--samples", "2", "--sigmas", "1"]) == 0
    text = capsys.readouterr().out
    assert "exact-energyflow" in text and "exact-diffusion" in text and "executed action" in text
    # held-out split of 12 demos at 0.1: one demo
    assert "1 start states" in text
    assert cli.main(["probe", "--bundle", str(ef), "--data", str(data_file), "--dims", "7"]) == 2
