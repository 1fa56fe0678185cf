"""Writes the analytic noise-prediction graphs of the DDIM tests.

For data a ~ N(mu, s^2) per element, the exact noise prediction of the
DDPM forward process x_t = sqrt(ab_t) a + sqrt(1 - ab_t) eps is

    eps(x, t) = (x - sqrt(ab_t) mu) * sqrt(1 - ab_t) / (ab_t s^2 + 1 - ab_t)

with ab_t = alphas_cumprod[t] gathered from a constant table (t is the
integer DDPM timestep carried as float32, cast to int64). DDIM on this
oracle must turn standard-normal noise into samples of N(mu, s^2).

Outputs:

  engines/testdata/ddim/eps.onnx      T_p=4, D_a=3, cond width 4 (the quad
                                      test bundle's shapes);
                                      mu = mu0 + reshape(cond @ W)
  engines/testdata/ddim/oracle.json   alphas_cumprod (float64), mu0, s, W:
                                      what the Go tests build the manifest
                                      and their float64 reference from
  runtime/testdata/simarm-diffusion/  a whole diffusion bundle for the
                                      runtime's end-to-end test on the
                                      simulated 7-DoF arm (state 15 =
                                      position 7 + velocity 7 + gripper 1,
                                      actions 8 = 7 joint velocities +
                                      gripper): mu moves joint 0 at
                                      0.4 rad/s, and eps is NaN once the
                                      newest joint-0 position (cond[15])
                                      exceeds 1.0 rad, so the test can see
                                      a NaN stop

alphas_cumprod is diffusers' "squaredcos_cap_v2" schedule for N = 100
(betas_for_alpha_bar with max_beta 0.999), in float64.

Run: .venv/bin/python engines/testdata/ddim/gen.py
"""
import hashlib
import json
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
N = 100


def squaredcos_cap_v2(n, max_beta=0.999):
    def alpha_bar(t):
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    betas = [min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), max_beta) for i in range(n)]
    return np.cumprod(1.0 - np.array(betas, dtype=np.float64))


def eps_model(tp, da, c, ab, mu0, s, W, trap=None):
    """W None: mu = mu0 (cond unused but for the trap). trap = (cond index,
    threshold): eps is NaN for rows whose cond value at that index exceeds
    the threshold."""
    mu_nodes = [
        helper.make_node("MatMul", ["cond", "W"], ["mu_flat"]),
        helper.make_node("Reshape", ["mu_flat", "mu_shape"], ["mu_c"]),
        helper.make_node("Add", ["mu_c", "mu0"], ["mu"]),
    ] if W is not None else [helper.make_node("Identity", ["mu0"], ["mu"])]
    nodes = [
        helper.make_node("Cast", ["t"], ["ti"], to=TensorProto.INT64),
        helper.make_node("Gather", ["ab_table", "ti"], ["ab"], axis=0),
        helper.make_node("Reshape", ["ab", "b11"], ["ab3"]),
        helper.make_node("Sqrt", ["ab3"], ["sab"]),
        helper.make_node("Sub", ["one", "ab3"], ["omab"]),
        helper.make_node("Sqrt", ["omab"], ["s1m"]),
    ] + mu_nodes + [
        helper.make_node("Mul", ["sab", "mu"], ["sab_mu"]),
        helper.make_node("Sub", ["a_t", "sab_mu"], ["d"]),
        helper.make_node("Mul", ["d", "s1m"], ["num"]),
        helper.make_node("Mul", ["ab3", "s2"], ["ab_s2"]),
        helper.make_node("Add", ["ab_s2", "omab"], ["den"]),
        helper.make_node("Div", ["num", "den"], ["eps_raw" if trap else "eps"]),
    ]
    inits = [
        numpy_helper.from_array(ab.astype(np.float32), "ab_table"),
        numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), "b11"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(mu0.astype(np.float32).reshape(tp, da), "mu0"),
        numpy_helper.from_array((s.astype(np.float64) ** 2).astype(np.float32).reshape(tp, da), "s2"),
    ]
    if W is not None:
        inits += [numpy_helper.from_array(W.astype(np.float32), "W"),
                  numpy_helper.from_array(np.array([-1, tp, da], dtype=np.int64), "mu_shape")]
    if trap:
        idx, thr = trap
        nodes += [
            helper.make_node("Gather", ["cond", "trap_idx"], ["watched"], axis=1),
            helper.make_node("Greater", ["watched", "trap_thr"], ["tripped"]),
            helper.make_node("Reshape", ["tripped", "b11"], ["tripped3"]),
            helper.make_node("Where", ["tripped3", "nan", "eps_raw"], ["eps"]),
        ]
        inits += [
            numpy_helper.from_array(np.array(idx, dtype=np.int64), "trap_idx"),
            numpy_helper.from_array(np.array(thr, dtype=np.float32), "trap_thr"),
            numpy_helper.from_array(np.array(np.nan, dtype=np.float32), "nan"),
        ]
    graph = helper.make_graph(
        nodes, "gaussian_eps_oracle",
        [helper.make_tensor_value_info("a_t", TensorProto.FLOAT, ["B", tp, da]),
         helper.make_tensor_value_info("cond", TensorProto.FLOAT, ["B", c]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, ["B"])],
        [helper.make_tensor_value_info("eps", TensorProto.FLOAT, ["B", tp, da])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def check(model, ab, mu0, s, W, tp, da, trap=None):
    """The graph computes the formula (float64 reference, float32 graph)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    B = 5
    a = rng.standard_normal((B, tp, da)).astype(np.float32)
    cond = rng.standard_normal((B, W.shape[0])).astype(np.float32)
    t = np.array([0, 7, 50, 95, 99], dtype=np.float32)
    (eps,) = sess.run(None, {"a_t": a, "cond": cond, "t": t})
    abt = ab[t.astype(np.int64)][:, None, None]
    mu = mu0.reshape(tp, da) + (cond.astype(np.float64) @ W).reshape(B, tp, da)
    want = (a - np.sqrt(abt) * mu) * np.sqrt(1 - abt) / (abt * s.reshape(tp, da) ** 2 + 1 - abt)
    if trap:
        idx, thr = trap
        cond[0, idx], cond[1, idx] = thr + 0.01, thr - 0.01
        (eps,) = sess.run(None, {"a_t": a, "cond": cond, "t": t})
        assert np.all(np.isnan(eps[0])) and not np.any(np.isnan(eps[1:])), "trap"
        eps, want = eps[1:], want[1:]
    err = np.max(np.abs(eps - want) / np.maximum(1, np.abs(want)))
    assert err < 1e-5, err


def write_engines_oracle(ab):
    tp, da, c = 4, 3, 4
    j = np.arange(tp * da)
    mu0 = np.round(1.5 * np.sin(0.9 * j + 0.3), 6)          # in [-1.5, 1.5]
    s = np.round(0.3 + 0.6 * (1 + np.cos(1.7 * j)), 6)      # in [0.3, 1.5]
    W = np.round(np.array([[0.2 * math.sin(3 * i + 2 * k) for k in range(tp * da)] for i in range(c)]), 6)
    model = eps_model(tp, da, c, ab, mu0, s, W)
    check(model, ab, mu0, s, W, tp, da)
    out = os.path.join(HERE, "eps.onnx")
    onnx.save(model, out)
    print("wrote", out)
    with open(os.path.join(HERE, "oracle.json"), "w") as f:
        json.dump({"num_train_timesteps": N, "alphas_cumprod": [float(v) for v in ab],
                   "mu0": mu0.tolist(), "s": s.tolist(), "W": W.tolist()}, f, indent=1)
        f.write("\n")
    print("wrote", os.path.join(HERE, "oracle.json"))


def write_simarm_bundle(ab):
    tp, da, ds, to = 16, 8, 15, 2
    c = ds * to
    mu0 = np.zeros((tp, da))
    mu0[:, 0] = 0.4                       # joint 0 at 0.4 rad/s
    s = np.full((tp, da), 0.05)
    model = eps_model(tp, da, c, ab, mu0.ravel(), s.ravel(), None, trap=(ds + 0, 1.0))
    check(model, ab, mu0.ravel(), s.ravel(), np.zeros((c, tp * da)), tp, da, trap=(ds + 0, 1.0))
    out_dir = os.path.join(ROOT, "runtime", "testdata", "simarm-diffusion")
    os.makedirs(out_dir, exist_ok=True)
    data = model.SerializeToString()
    with open(os.path.join(out_dir, "eps.onnx"), "wb") as f:
        f.write(data)

    def tensors(*kv):
        return [{"name": kv[i], "shape": kv[i + 1]} for i in range(0, len(kv), 2)]

    manifest = {
        "format_version": 1, "policy": "diffusion", "name": "simarm-diffusion-test",
        "created": "2026-11-22T12:00:00Z", "source_commit": "engines/testdata/ddim/gen.py",
        "action_dim": da, "pred_horizon": tp, "obs_horizon": to, "action_horizon": 8,
        "action_norm": {"mean": [0.0] * da, "std": [1.0] * da},
        "obs": [{"name": "state", "kind": "state", "shape": [ds], "norm": {"mean": [0.0] * ds, "std": [1.0] * ds}}],
        "conditioning": {"layout": "history_flat", "items": [{"obs": "state", "width": ds}]},
        "cond_dim": c,
        "schedule": {"kind": "ddpm", "num_train_timesteps": N, "beta_schedule": "squaredcos_cap_v2",
                     "prediction_type": "epsilon", "clip_sample": 1.0, "alphas_cumprod": [float(v) for v in ab]},
        "sampler": {"kind": "ddim", "steps": 10},
        "reference_actions": [[[0.0] * da for _ in range(tp)]],
        "graphs": {"eps": {"file": "eps.onnx",
                           "inputs": tensors("a_t", [-1, tp, da], "cond", [-1, c], "t", [-1]),
                           "outputs": tensors("eps", [-1, tp, da])}},
        "calibration": None,
        "files": {"eps.onnx": hashlib.sha256(data).hexdigest()},
        "model": {"kind": "analytic Gaussian eps oracle (engines/testdata/ddim/gen.py)",
                  "mu": "joint 0 velocity 0.4, else 0", "s": 0.05, "nan_when": "cond[15] > 1.0"},
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote", out_dir)


if __name__ == "__main__":
    ab = squaredcos_cap_v2(N)
    write_engines_oracle(ab)
    write_simarm_bundle(ab)
