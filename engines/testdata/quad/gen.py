"""Writes the tiny analytic graphs of the engines tests.

energy_grad.onnx (cond width 4), energy_grad_c12.onnx (cond width 12, for
the bundle with an image input), vision.onnx (image [B,3,8,8] → per-channel
mean → features [B,4] = mean · V, V[c, f] = 0.5 cos(c + 2 f)) and
state_energy.onnx (the state term: cond [B,C] → state_energy [B] =
0.5 ||cond||^2 - 1, C symbolic so that any bundle can carry it).


E(a, cond, t) = 0.5 * (1 + t) * ||a - reshape(cond @ W)||^2, grad_a = (1 + t) * (a - mu)
with W[i, j] = 0.3 * sin(7 i + j). The Go test double (engines/enginestest)
computes the same function, so ORT and pure Go can be compared.

Run: .venv/bin/python engines/testdata/quad/gen.py
"""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TP, DA = 4, 3
HERE = os.path.dirname(os.path.abspath(__file__))


def energy_model(C):
    W = np.array([[0.3 * math.sin(7 * i + j) for j in range(TP * DA)] for i in range(C)], dtype=np.float32)

    nodes = [
        helper.make_node("MatMul", ["cond", "W"], ["mu_flat"]),
        helper.make_node("Reshape", ["mu_flat", "mu_shape"], ["mu"]),
        helper.make_node("Sub", ["a_t", "mu"], ["d"]),
        helper.make_node("Add", ["t", "one"], ["s"]),
        helper.make_node("Reshape", ["s", "s_shape"], ["s3"]),
        helper.make_node("Mul", ["d", "s3"], ["grad_a"]),
        helper.make_node("Mul", ["d", "d"], ["d2"]),
        helper.make_node("ReduceSum", ["d2", "axes"], ["ss"], keepdims=0),
        helper.make_node("Mul", ["ss", "s"], ["e2"]),
        helper.make_node("Mul", ["e2", "half"], ["energy"]),
    ]
    inits = [
        numpy_helper.from_array(W, "W"),
        numpy_helper.from_array(np.array([-1, TP, DA], dtype=np.int64), "mu_shape"),
        numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), "s_shape"),
        numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half"),
    ]
    graph = helper.make_graph(
        nodes, "quad_energy",
        [helper.make_tensor_value_info("a_t", TensorProto.FLOAT, ["B", TP, DA]),
         helper.make_tensor_value_info("cond", TensorProto.FLOAT, ["B", C]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, ["B"])],
        [helper.make_tensor_value_info("grad_a", TensorProto.FLOAT, ["B", TP, DA]),
         helper.make_tensor_value_info("energy", TensorProto.FLOAT, ["B"])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def vision_model():
    V = np.array([[0.5 * math.cos(c + 2 * f) for f in range(4)] for c in range(3)], dtype=np.float32)
    nodes = [helper.make_node("ReduceMean", ["image", "hw"], ["m"], keepdims=0),
             helper.make_node("MatMul", ["m", "V"], ["features"])]
    inits = [numpy_helper.from_array(V, "V"), numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "hw")]
    g = helper.make_graph(nodes, "quad_vision",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["B", 3, 8, 8])],
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["B", 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def state_model():
    nodes = [helper.make_node("Mul", ["cond", "cond"], ["c2"]),
             helper.make_node("ReduceSum", ["c2", "axes"], ["ss"], keepdims=0),
             helper.make_node("Mul", ["ss", "half"], ["h"]),
             helper.make_node("Sub", ["h", "one"], ["state_energy"])]
    inits = [numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
             numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half"),
             numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")]
    g = helper.make_graph(nodes, "quad_state_energy",
                          [helper.make_tensor_value_info("cond", TensorProto.FLOAT, ["B", "C"])],
                          [helper.make_tensor_value_info("state_energy", TensorProto.FLOAT, ["B"])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


for name, model in [("energy_grad.onnx", energy_model(4)), ("energy_grad_c12.onnx", energy_model(12)),
                    ("vision.onnx", vision_model()), ("state_energy.onnx", state_model())]:
    out = os.path.join(HERE, name)
    onnx.save(model, out)
    print("wrote", out)
