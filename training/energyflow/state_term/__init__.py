"""The state term g_φ(s, σ): an alarm score that is high for an unseen state
(training/README.md, "State term"; docs/safety.md).

g is a small scalar network on the bundle's conditioning vector ``cond``
(the standardized observation history the policy graph is fed), trained by
denoising score matching on noisy ``cond`` vectors, so that −∇ₛg estimates
the score of the demonstrations' state distribution at each noise level σ::

    g(s, σ) = f(c_in·s, c_noise)/σ + |s|²/(2(σ²+1)),   c_in = 1/√(σ²+1), c_noise = ¼ ln σ

f is an MLP (SiLU) whose last layer starts at zero, so at initialization g is
the exact energy of unit-variance Gaussian data (the quadratic term, as the
policy's denoiser head, training/README.md) and, whatever f learns, g grows
quadratically far from the data at every σ. The 1/σ keeps σ·∇g, the noise
estimate the loss compares with ε, O(1) at every level. Loss (λ = σ²)::

    σ ~ U{σ_1 … σ_J} (log-spaced),  ε ~ N(0, I),  s̃ = s + σε
    L = ‖σ·∇ₛg(s̃, σ) − ε‖² / D              (= σ²‖−∇g − (−ε/σ)‖² per dimension)

Score matching shapes g only where its noise reached, so a state 10σ away is
read at several levels. The reading (measured best in the prototype)::

    z_j = (g(s, σ_j) − μ_j) / sd_j          μ_j, sd_j: over held-out demonstration steps
    state_energy = max_j z_j                 higher = more out of distribution

The **transition term** (measured: a push of the arm, whose states the
demonstrations all visit, is invisible to g — DSM's smallest noise level,
0.05 std, is coarser than the step-to-step motion of the hand): a linear
model of the newest frame of ``cond`` given the earlier ones (ridge
regression on every demonstration step, bias included), read as the largest
per-dimension residual in units of its training std::

    r = x_t − (W x_<t + b),   t(s) = max_k |r_k| / sd_k
    z_t = (t(s) − μ_t)/sd_t                                 μ_t, sd_t: held-out steps

It sees motion the robot does not make on its own (a shove, a slipping
grasp, a frame from another time) and a value that jumps between frames
(an object that appears). ``cond`` must hold T_o ≥ 2 frames (with one
frame, or ``--no-transition``, it is left out).

The **RND component** (FIPER's observation score, Römer et al. 2025, which
separated shifted scenes better than g in ``research/ood/ood_compare.py``):
random network distillation on cond, a fixed random MLP and a predictor
trained on every demonstration step, read as the mean squared prediction
error and z-scored on the held-out steps like the others. Off by default
(``--rnd-steps N`` adds it): measured through the runtime on ButtonPress it
lifted state_energy above its held-out q99.9 in 20 of 50 normal episodes,
where g with the transition term stayed below it. The policy's own states
are near, not on, the demonstrations', and RND, the sharpest detector of
shifted scenes offline, calls them new. With either extra component the reading is
``max_z`` and the block lists ``components`` (["g", "transition", "rnd"]);
g alone is ``max_sigma_z``.

Training and calibration use **every step of every demonstration**, each
step's history built as the runtime's episode start (the first frame
repeated; :func:`step_conds`). A g trained on the policy's training windows
alone never sees the last T_a−1 states of an episode and alarms on them.

``state_energy.onnx`` (input ``cond [B, cond_dim]``, output ``state_energy
[B]``, float32, dynamic batch, opset 17) holds the whole reading with σ_j,
μ_j and sd_j as constants; the max over σ is a MaxPool (only operators of
:data:`energyflow.export.ALLOWED_OPS`). Its export checks itself against
torch in float64 and is refused above the tolerance.

State bundles only: for an image bundle ``cond`` holds vision features, and
building them for every demonstration step is not implemented here.

Modules: :mod:`~energyflow.state_term.network` (g, its loss, the config and
noise levels), :mod:`~energyflow.state_term.reading` (the z-scores, the
transition and RND components, the max), :mod:`~energyflow.state_term.data`
(``cond`` of every demonstration step), :mod:`~energyflow.state_term.training`,
:mod:`~energyflow.state_term.export` (``state_energy.onnx``) and
:mod:`~energyflow.state_term.manifest` (the block and the ``state-term``
command). Every public name is re-exported here
(``from energyflow import state_term as st; st.fit_state_term(...)``).
"""
from __future__ import annotations

from .data import check_data, step_conds
from .export import EXPORT_TOL, GRAPH_FILE, INPUT, OUTPUT, SHAPE_OPS, export_state_energy
from .manifest import manifest_block, state_term_bundle, state_term_main
from .network import StateEnergyNet, StateTermConfig, StateTermError, dsm_loss, sigma_grid
from .reading import (EXTRA_COMPONENTS, READING, READING_MAX_Z, RNDScore, StateEnergyReading, TransitionScore,
                      fit_reading, fit_transition, per_sigma_values, read)
from .training import fit_state_term, score_calibration, train_rnd, train_state_term, val_loss_per_sigma

__all__ = ["EXPORT_TOL", "EXTRA_COMPONENTS", "GRAPH_FILE", "INPUT", "OUTPUT", "READING", "READING_MAX_Z", "RNDScore",
           "SHAPE_OPS", "StateEnergyNet", "StateEnergyReading", "StateTermConfig", "StateTermError",
           "TransitionScore", "check_data", "dsm_loss", "export_state_energy", "fit_reading", "fit_state_term",
           "fit_transition", "manifest_block", "per_sigma_values", "read", "score_calibration", "sigma_grid",
           "state_term_bundle", "state_term_main", "step_conds", "train_rnd", "train_state_term",
           "val_loss_per_sigma"]
