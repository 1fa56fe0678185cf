"""Shapes, and the hand-written VJP against autograd for every layer type and the whole network."""
import copy

import pytest
import torch

from energyflow.config import ModelConfig, TINY_SIZE
from energyflow.model import (Conv1dBlock, CondResBlock, Downsample1d, EnergyUNet, GroupNormVJP, Upsample1d,
                              act_fwd, act_grad, bake_spectral_norm)

torch.set_num_threads(1)
D = torch.float64


def tiny(**kw) -> ModelConfig:
    d = dict(action_dim=3, state_dim=5, **TINY_SIZE)
    d.update(kw)
    return ModelConfig(**d)


def _vjp_vs_autograd(fwd, vjp, x, g, rtol=1e-10, atol=1e-12):
    x = x.clone().requires_grad_(True)
    y = fwd(x)
    (ref,) = torch.autograd.grad(y, x, g)
    got = vjp(g)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["mish", "softplus", "silu"])
def test_activation_derivative(name):
    x = torch.linspace(-30, 30, 601, dtype=D)
    g = torch.ones_like(x)
    # torch's softplus switches to the identity above x=20 (derivative exactly 1)
    _vjp_vs_autograd(lambda v: act_fwd(name, v), lambda gg: gg * act_grad(name, x), x, g, rtol=1e-8, atol=1e-8)


def test_groupnorm_vjp():
    torch.manual_seed(0)
    gn = GroupNormVJP(4, 16).to(D)
    torch.nn.init.normal_(gn.weight)
    torch.nn.init.normal_(gn.bias)
    x = torch.randn(3, 16, 8, dtype=D) * 3 + 1
    y, cache = gn.forward_cache(x)
    torch.testing.assert_close(y, gn(x))
    _vjp_vs_autograd(gn, lambda g: gn.vjp(g, cache), x, torch.randn(3, 16, 8, dtype=D))


@pytest.mark.parametrize("act", ["mish", "softplus"])
def test_conv_block_vjp(act):
    torch.manual_seed(1)
    blk = Conv1dBlock(6, 8, 5, 4, act, length=8).to(D)
    x = torch.randn(2, 6, 8, dtype=D)
    y, cache = blk.forward_cache(x)
    torch.testing.assert_close(y, blk(x))
    _vjp_vs_autograd(blk, lambda g: blk.vjp(g, cache), x, torch.randn_like(y))


@pytest.mark.parametrize("cin,cout", [(8, 8), (4, 8)])
def test_cond_res_block_vjp(cin, cout):
    torch.manual_seed(2)
    blk = CondResBlock(cin, cout, 10, 5, 4, "mish", length=8).to(D)
    x = torch.randn(2, cin, 8, dtype=D)
    c = torch.randn(2, 10, dtype=D)
    y, cache = blk.forward_cache(x, c)
    torch.testing.assert_close(y, blk(x, c))
    _vjp_vs_autograd(lambda v: blk(v, c), lambda g: blk.vjp(g, cache), x, torch.randn_like(y))


def test_down_up_sample_vjp():
    torch.manual_seed(3)
    ds, us = Downsample1d(8).to(D), Upsample1d(8).to(D)
    x = torch.randn(2, 8, 16, dtype=D)
    assert ds(x).shape == (2, 8, 8)
    _vjp_vs_autograd(ds, ds.vjp, x, torch.randn(2, 8, 8, dtype=D))
    assert us(x).shape == (2, 8, 32)
    _vjp_vs_autograd(us, us.vjp, x, torch.randn(2, 8, 32, dtype=D))


def test_shapes():
    cfg = tiny()
    m = EnergyUNet(cfg)
    a = torch.randn(4, 16, 3)
    c = torch.randn(4, cfg.cond_dim)
    t = torch.rand(4)
    e = m(a, c, t)
    assert e.shape == (4,)
    s, e2 = m.score(a, c, t)
    assert s.shape == a.shape and e2.shape == (4,)
    g, e3 = m.energy_and_grad(a, c, t)
    assert g.shape == a.shape and e3.shape == (4,)
    assert cfg.cond_dim == 2 * 5


@pytest.mark.parametrize("kw", [dict(), dict(activation="softplus"), dict(activation="silu"),
                                dict(energy_scale="inv_sigma"), dict(down_dims=(8, 16), n_groups=8),
                                dict(input_scale="c_in"), dict(input_scale="c_in", energy_scale="inv_sigma"),
                                dict(input_scale="c_in", energy_scale="edm"),
                                dict(energy_prior="gaussian"),
                                dict(input_scale="c_in", energy_scale="edm", energy_prior="gaussian")])
def test_whole_network_vjp(kw):
    torch.manual_seed(4)
    m = EnergyUNet(tiny(**kw)).to(D).eval()
    a = torch.randn(3, 16, 3, dtype=D) * 2
    c = torch.randn(3, m.cfg.cond_dim, dtype=D)
    t = torch.tensor([1e-3, 0.4, 1.0], dtype=D)
    s, e = m.score(a, c, t)
    g, e2 = m.energy_and_grad(a, c, t)
    torch.testing.assert_close(e2, e, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g, -s, rtol=1e-9, atol=1e-12)


def test_bake_spectral_norm_keeps_values_and_original():
    torch.manual_seed(5)
    m = EnergyUNet(tiny()).eval()
    a, c, t = torch.randn(2, 16, 3), torch.randn(2, 10), torch.rand(2)
    e = m(a, c, t).detach()
    baked = bake_spectral_norm(copy.deepcopy(m))
    torch.testing.assert_close(baked(a, c, t), e)
    assert not any("parametrizations" in k for k in baked.state_dict())
    # the original (which shares the parametrized class with the copy) still works
    torch.testing.assert_close(m(a, c, t), e)


def test_spectral_norm_bounds_head():
    torch.manual_seed(6)
    m = bake_spectral_norm(EnergyUNet(tiny()))
    for lin in m.head:
        assert torch.linalg.matrix_norm(lin.weight, ord=2) <= 1.05


def test_bad_config():
    with pytest.raises(ValueError):
        EnergyUNet(tiny(pred_horizon=6))
    with pytest.raises(ValueError):
        EnergyUNet(tiny(activation="relu"))
