"""One EnergyFlow sample on an NVIDIA GPU: eager launches against one CUDA graph, fp32 and fp16.

What the TensorRT engine would run on a Jetson, measured with the network the
bundle ships, on whatever GPU the machine has (no TensorRT needed): the
bundle's own ``energy_grad.onnx`` (the hand-written VJP: ∇ₐE and E in one
graph), its half-precision weights widened back to float32 and the graph
converted to a torch module by onnx2torch (a pure-Python package; carry its
wheel). Per bundle and batch it times

- ``eager``: K Euler steps + the final energy as separate launches, the way
  the shim enqueues them today (one engine call per step);
- ``graph``: the same sample captured once as a CUDA graph and replayed
  (what ``trt/shim/euler_graph_bench.cu`` measures with a stand-in kernel);
- ``graph_fp16``: the graph with the network in half precision, as the
  TensorRT engine builds by default (``--precision fp16``);
- ``rescore``: the M reference energies of the centered reward (batch M) as
  one graph;

and checks each against the CPU reference (``energyflow.sampler.sample`` over
``energy_grad.onnx`` in ONNX Runtime) on the same noise: the largest
difference of the standardized actions.

Usage (on the GPU machine; the repository root on the path)::

    PYTHONPATH=training:. python3 -m research.gpu.sample_cuda \
        --bundle bundles/metaworld-button-press bundles/metaworld-assembly --json out.json

Times are per sample, wall clock from the host's call to the result on the
host (``torch.cuda.synchronize``), median and 90th percentile of ``--n``.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np
import torch

import onnx
from onnx import numpy_helper
from onnx2torch import convert

from energyflow.bench import torch_model_from_bundle
from energyflow.compact import FP16_SUFFIX
from energyflow.config import Schedule
from energyflow.sampler import OrtEnergyGrad, sample, step_schedule


def timed(fn: Callable[[], Any], n: int, warmup: int = 5) -> Dict[str, float]:
    """Median and p90 wall ms of ``fn`` (which synchronizes), over ``n`` calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    ts: List[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return {"p50_ms": statistics.median(ts), "p90_ms": ts[min(n - 1, int(0.9 * n))], "min_ms": ts[0], "n": n}


def float32_graph(path: Path) -> onnx.ModelProto:
    """The graph at ``path`` with every compacted (float16 + Cast) weight stored as float32 again."""
    m = onnx.load(str(path))
    g = m.graph
    widened = {}
    keep = []
    for init in g.initializer:
        if init.name.endswith(FP16_SUFFIX):
            name = init.name[: -len(FP16_SUFFIX)]
            widened[init.name] = name
            keep.append(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), name))
        else:
            keep.append(init)
    nodes = [n for n in g.node if not (n.op_type == "Cast" and len(n.input) == 1 and n.input[0] in widened)]
    del g.initializer[:]
    g.initializer.extend(keep)
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(m)
    return m


def to_device(gm: torch.fx.GraphModule, dev: torch.device) -> torch.fx.GraphModule:
    """``gm`` on ``dev``, except the constants that only say shapes, slices and indices.

    onnx2torch reads those on the host (``tolist``, ``numpy``, ``torch.any``); kept
    on the host, a sample has no device-to-host copy and a CUDA graph can capture it.
    """
    host = set()
    for node in gm.graph.nodes:
        if node.op != "call_module" or type(gm.get_submodule(node.target)).__name__ not in (
                "OnnxReshape", "OnnxSlice", "OnnxGather"):
            continue
        for arg in node.args[1:]:
            if isinstance(arg, torch.fx.Node) and arg.op == "call_module" and \
                    type(gm.get_submodule(arg.target)).__name__ == "OnnxConstant":
                host.add(arg.target)
    gm = gm.to(dev)
    for name in host:
        mod = gm.get_submodule(name)
        if isinstance(mod.value, torch.Tensor):
            mod._buffers["value"] = mod.value.cpu()
    return gm


class EnergyGrad(torch.nn.Module):
    """(∇ₐE, E) from the converted graph, under the name the sampler calls."""

    def __init__(self, graph: torch.nn.Module) -> None:
        super().__init__()
        self.graph = graph

    def energy_and_grad(self, a: torch.Tensor, cond: torch.Tensor, t: torch.Tensor):
        g, e = self.graph(a, cond, t)
        return g, e


class TorchSampler:
    """Algorithm 2 in torch on one device and dtype, with static buffers a CUDA graph can capture."""

    def __init__(self, model: torch.nn.Module, sch: Schedule, steps: int, batch: int, cond_dim: int,
                 shape: tuple, device: torch.device, half: bool = False) -> None:
        self.model = model
        self.half = half  # fp16 autocast: convolutions and matrix products in half, as TensorRT's fp16 build
        dtype = torch.float32
        ts, cs = step_schedule(sch, steps) if steps > 0 else ([], [])  # 0: the final energy alone
        self.ts = [torch.full((batch,), float(t), device=device, dtype=dtype) for t in ts]
        self.cs = [float(c) for c in cs]
        self.gamma = torch.full((batch,), sch.gamma, device=device, dtype=dtype)
        self.sigma_max = float(sch.sigma_max)
        self.z = torch.zeros((batch,) + shape, device=device, dtype=dtype)
        self.cond = torch.zeros((batch, cond_dim), device=device, dtype=dtype)
        self.a = torch.zeros_like(self.z)
        self.energy = torch.zeros((batch,), device=device, dtype=dtype)
        self.graph: torch.cuda.CUDAGraph | None = None

    @torch.no_grad()
    def run(self) -> None:
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.half):
            self._run()

    def _run(self) -> None:
        a = self.sigma_max * self.z
        for t, c in zip(self.ts, self.cs):
            g, _ = self.model.energy_and_grad(a, self.cond, t)
            a = a - c * g.float()
        _, e = self.model.energy_and_grad(a, self.cond, self.gamma)
        self.a.copy_(a)
        self.energy.copy_(e)

    def capture(self) -> None:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.run()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.run()

    def eager(self) -> None:
        self.run()
        if self.a.is_cuda:
            torch.cuda.synchronize()

    def replay(self) -> None:
        assert self.graph is not None
        self.graph.replay()
        torch.cuda.synchronize()


def measure(bundle: str, steps_list: List[int], batches: List[int], n: int, refs: int,
            dev: torch.device) -> List[Dict[str, Any]]:
    man = json.loads((Path(bundle) / "manifest.json").read_text())
    path = Path(bundle) / man["graphs"]["energy_grad"]["file"]
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    shape = (man["pred_horizon"], man["action_dim"])
    ort = OrtEnergyGrad(path, threads=2)
    m32 = EnergyGrad(to_device(convert(float32_graph(path)).eval(), dev))
    native = torch_model_from_bundle(bundle)[0].to(dev)
    rows = []
    for steps in steps_list:
        for batch in batches:
            rng = np.random.default_rng(steps * 1000 + batch)
            z = rng.standard_normal((batch,) + shape).astype(np.float32)
            cond = rng.standard_normal((batch, man["cond_dim"])).astype(np.float32)
            ref = sample(ort, cond, z, sch, steps)
            row: Dict[str, Any] = {"bundle": Path(bundle).name, "steps": steps, "batch": batch}
            for name in ("fp32", "fp16"):
                ts = TorchSampler(m32, sch, steps, batch, man["cond_dim"], shape, dev, half=name == "fp16")
                ts.z.copy_(torch.from_numpy(z))
                ts.cond.copy_(torch.from_numpy(cond))
                if name == "fp32":
                    row["eager"] = timed(ts.eager, n)
                    ts.eager()
                    row["eager_max_abs_diff"] = float(np.abs(ts.a.float().cpu().numpy() - ref.actions_std).max())
                if dev.type != "cuda":
                    continue
                try:
                    ts.capture()
                    row[f"graph_{name}"] = timed(ts.replay, n)
                    ts.replay()
                    got = ts.a.float().cpu().numpy()
                    row[f"graph_{name}_max_abs_diff"] = float(np.abs(got - ref.actions_std).max())
                    row[f"graph_{name}_energy_max_rel_diff"] = float(
                        np.abs(ts.energy.float().cpu().numpy() - ref.energy).max() / max(1e-6, np.abs(ref.energy).max()))
                except Exception as e:  # report, do not hide, a capture that fails
                    row[f"graph_{name}_error"] = str(e).splitlines()[0]
            if dev.type == "cuda":  # the toolkit's own network, for timing only: some weights are not by name
                try:    # in the graph (weights_loaded), so its actions are not compared
                    ts = TorchSampler(native, sch, steps, batch, man["cond_dim"], shape, dev)
                    ts.capture()
                    row["native_graph_fp32"] = timed(ts.replay, n)
                    row["native_weights_loaded"] = list(native.weights_loaded)
                except Exception as e:
                    row["native_graph_fp32_error"] = str(e).splitlines()[0]
            rows.append(row)
    # the centered reward's M reference energies at gamma, batch M, as one graph
    ra = np.asarray(man.get("reference_actions") or [], np.float32)[:refs]
    if ra.ndim == 3 and dev.type == "cuda":
        M = ra.shape[0]
        rs = TorchSampler(m32, sch, 0, M, man["cond_dim"], shape, dev)
        rs.sigma_max = 1.0
        rs.z.copy_(torch.from_numpy(ra))
        rs.cond.copy_(torch.from_numpy(np.repeat(np.random.default_rng(7).standard_normal(
            (1, man["cond_dim"])).astype(np.float32), M, axis=0)))
        rs.capture()
        rows.append({"bundle": Path(bundle).name, "rescore_refs": M, "graph_fp32": timed(rs.replay, n)})
    return rows


def kernels_per_call(fn: Callable[[], Any]) -> int:
    """CUDA kernels one call of ``fn`` launches (after a warm-up call)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


class Compiled:
    """``model.energy_and_grad`` compiled by torch.compile (Inductor fuses the elementwise chains)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.energy_and_grad = torch.compile(model.energy_and_grad, dynamic=False)


def measure_compiled(bundle: str, steps: int, batch: int, n: int, dev: torch.device) -> Dict[str, Any]:
    """The toolkit's network (timing only, see ``native``) eager, as a CUDA graph, and compiled + CUDA graph,
    with the kernels each ∇E evaluation launches."""
    man = json.loads((Path(bundle) / "manifest.json").read_text())
    sch = Schedule(**{k: man["schedule"][k] for k in ("sigma_min", "sigma_max", "T", "gamma")})
    shape = (man["pred_horizon"], man["action_dim"])
    path = Path(bundle) / man["graphs"]["energy_grad"]["file"]
    onnx_graph = EnergyGrad(to_device(convert(float32_graph(path)).eval(), dev))
    native = torch_model_from_bundle(bundle)[0].to(dev)
    row: Dict[str, Any] = {"bundle": Path(bundle).name, "steps": steps, "batch": batch, "compiled": True}
    a = torch.randn((batch,) + shape, device=dev)
    c = torch.randn((batch, man["cond_dim"]), device=dev)
    t = torch.full((batch,), 0.5, device=dev)
    with torch.no_grad():
        row["kernels_onnx_graph"] = kernels_per_call(lambda: onnx_graph.energy_and_grad(a, c, t))
        row["kernels_native"] = kernels_per_call(lambda: native.energy_and_grad(a, c, t))
        t0 = time.perf_counter()
        comp = Compiled(native)
        comp.energy_and_grad(a, c, t)
        torch.cuda.synchronize()
        row["compile_s"] = time.perf_counter() - t0
        row["kernels_compiled"] = kernels_per_call(lambda: comp.energy_and_grad(a, c, t))
    for name, m in (("native_graph_fp32", native), ("compiled_graph_fp32", comp)):
        ts = TorchSampler(m, sch, steps, batch, man["cond_dim"], shape, dev)
        try:
            ts.capture()
            row[name] = timed(ts.replay, n)
        except Exception as e:
            row[name + "_error"] = str(e).splitlines()[0]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", nargs="+", required=True)
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--refs", type=int, default=16)
    ap.add_argument("--json", required=True)
    ap.add_argument("--compiled", action="store_true",
                    help="only the kernel counts and torch.compile + CUDA graph rows (first --steps and --batch)")
    ap.add_argument("--device", default="cuda", help="cpu only checks this script (eager rows, no graphs)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("sample_cuda: no CUDA device (this measures a GPU; run it where one is)")
    torch.backends.cudnn.benchmark = True
    out: Dict[str, Any] = {"gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "none",
                           "torch": torch.__version__,
                           "cuda": torch.version.cuda, "host": platform.node(), "rows": []}
    for b in a.bundle:
        try:
            if a.compiled:
                out["rows"].append(measure_compiled(b, a.steps[0], a.batch[0], a.n, dev))
            else:
                out["rows"].extend(measure(b, a.steps, a.batch, a.n, a.refs, dev))
        except Exception as e:  # one bundle's failure is a row, not the end of the run
            out["rows"].append({"bundle": Path(b).name, "error": f"{type(e).__name__}: {e}"})
        Path(a.json).write_text(json.dumps(out, indent=1))
        print(json.dumps(out["rows"][-1]), flush=True)
    Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
