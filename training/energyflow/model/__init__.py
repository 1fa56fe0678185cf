"""EnergyFlow energy networks E(a_t, cond, t) (paper appendix C; training/README.md, "Energy heads and noise levels").

Two energy heads on the same Diffusion-Policy style 1D temporal conditional
U-Net trunk (:class:`UNetBackbone`: time/state conditioning, down/mid/up
residual blocks, final conv block), selected by ``ModelConfig.energy_head``
(:func:`energy_model`):

* ``pooled`` (:class:`EnergyUNet`, the paper's head): the final feature map is
  average-pooled over time and mapped by a spectrally normalised MLP to one
  scalar energy per sample;
* ``denoiser`` (:class:`DenoiserEnergy`): a wrapper around the Diffusion
  Policy network F (:class:`VectorUNet`: trunk + DP's per-step vector head),
  E = 1/2 |c_in a - F(c_in a; s, c_noise)/sigma|^2 with EDM's preconditioning.

The trunk is also shared with the Diffusion Policy baseline
(:class:`energyflow.diffusion.NoiseUNet`).

Every layer exposes two code paths:

* ``forward``: ordinary differentiable PyTorch (used for training, where the
  score is ``-autograd.grad(E, a_t, create_graph=True)``);
* ``forward_cache`` / ``vjp``: the same forward with saved intermediates and a
  hand-written vector-Jacobian product with respect to the *action* input only.
  This path uses only plain tensor operators so that ``torch.onnx.export``
  turns it into opset-17 ONNX (see :mod:`energyflow.export`).

``cond`` (flattened observation history, see docs/bundle.md) and ``t`` only go
through forward computations (state encoder, time embedding, FiLM
projections); no gradient is taken with respect to them in the export path.

Modules: :mod:`~energyflow.model.layers` (activations, blocks, spectral
norm), :mod:`~energyflow.model.trunk` (:class:`UNetBackbone`) and
:mod:`~energyflow.model.heads` (the two heads and :func:`energy_model`); every
public name is re-exported here, so ``from energyflow.model import X`` works.
"""
from __future__ import annotations

from .heads import DenoiserEnergy, EnergyUNet, VectorUNet, autograd_score, energy_model
from .layers import (Act, CondResBlock, Conv1dBlock, Downsample1d, GroupNormVJP, SinusoidalPosEmb, Tensor,
                     Upsample1d, act_fwd, act_grad, bake_spectral_norm, count_params, recompute_spectral_norm,
                     spectral_norm_linear)
from .trunk import UNetBackbone

__all__ = ["Act", "CondResBlock", "Conv1dBlock", "DenoiserEnergy", "Downsample1d", "EnergyUNet", "GroupNormVJP",
           "SinusoidalPosEmb", "Tensor", "UNetBackbone", "Upsample1d", "VectorUNet", "act_fwd", "act_grad",
           "autograd_score", "bake_spectral_norm", "count_params", "energy_model", "recompute_spectral_norm",
           "spectral_norm_linear"]
