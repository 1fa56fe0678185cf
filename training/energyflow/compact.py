"""Store a bundle's weights as float16: half the bytes, the same float32 arithmetic.

Every float32 initializer of at least :data:`MIN_ELEMENTS` elements in every
``*.onnx`` of a bundle is replaced by a float16 initializer followed by a
``Cast`` back to float32, so the graph computes in float32 exactly as before
and only the stored weights are rounded (a relative error of at most 2^-11 per
weight). ONNX Runtime folds the casts when it loads the graph, so a step costs
what it did; TensorRT's parser accepts ``Cast``. Small tensors (biases, norms,
constants) stay float32.

The conversion checks itself: each graph is run by ONNX Runtime before and
after on the same random inputs, and the largest difference of every output,
relative to that output's largest magnitude, is written into the manifest
(``weights``) and must stay under ``--tolerance``; otherwise the bundle is left
as it was. The manifest's file hashes are rewritten.

    python -m energyflow.compact --bundle ../bundles/metaworld-button-press
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from .bundle import read_manifest, write_manifest

#: initializers smaller than this stay float32 (biases, norms: a few bytes, no gain)
MIN_ELEMENTS = 256
#: largest allowed relative output difference, float16 weights against float32
DEFAULT_TOLERANCE = 5e-3
#: suffix of the float16 copy of an initializer
FP16_SUFFIX = "__fp16"


class CompactError(RuntimeError):
    """The float16 graph does not reproduce the float32 one within tolerance."""


def to_float16(model: "onnx.ModelProto", min_elements: int = MIN_ELEMENTS) -> int:  # noqa: F821
    """Rewrite ``model`` in place; returns how many initializers were converted."""
    import onnx  # heavy optional dependency: only the export path needs it
    from onnx import TensorProto, helper, numpy_helper  # heavy optional dependency, as above

    g = model.graph
    graph_inputs = {i.name for i in g.input}
    keep: List[onnx.TensorProto] = []
    casts: List[onnx.NodeProto] = []
    n = 0
    for init in g.initializer:
        if (init.data_type != TensorProto.FLOAT or init.name in graph_inputs
                or int(np.prod(init.dims, dtype=np.int64)) < min_elements):
            keep.append(init)
            continue
        w = numpy_helper.to_array(init)
        if np.abs(w).max(initial=0.0) >= np.finfo(np.float16).max:
            keep.append(init)  # would overflow: leave it exact
            continue
        keep.append(numpy_helper.from_array(w.astype(np.float16), init.name + FP16_SUFFIX))
        casts.append(helper.make_node("Cast", [init.name + FP16_SUFFIX], [init.name], to=TensorProto.FLOAT,
                                      name=init.name + "_cast"))
        n += 1
    del g.initializer[:]
    g.initializer.extend(keep)
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(model)
    return n


def _random_feeds(session: "ort.InferenceSession", rng: np.random.Generator, batch: int = 4  # noqa: F821
                  ) -> Dict[str, np.ndarray]:
    feeds = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else batch for d in inp.shape]
        if "float" in inp.type:
            x = rng.standard_normal(shape).astype(np.float32)
            if len(shape) == 1:  # a noise level or time: positive
                x = np.abs(x) + 0.1
            feeds[inp.name] = x
        else:
            feeds[inp.name] = rng.integers(0, 256, shape).astype(np.uint8 if "uint8" in inp.type else np.int64)
    return feeds


def output_difference(before: Path, after: Path, seed: int = 0, trials: int = 4) -> Dict[str, float]:
    """Largest |after - before| of each output over ``trials`` random batches, relative to max |before|."""
    import onnxruntime as ort  # heavy optional dependency

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    a = ort.InferenceSession(str(before), opts, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(str(after), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    names = [o.name for o in a.get_outputs()]
    worst = {n: 0.0 for n in names}
    for _ in range(trials):
        feeds = _random_feeds(a, rng)
        for n, x, y in zip(names, a.run(None, feeds), b.run(None, feeds)):
            scale = max(float(np.abs(x).max()), 1e-12)
            worst[n] = max(worst[n], float(np.abs(y - x).max()) / scale)
    return worst


def compact_bundle(bundle: str | Path, tolerance: float = DEFAULT_TOLERANCE,
                   min_elements: int = MIN_ELEMENTS) -> Dict[str, Dict[str, float]]:
    """Convert every graph of ``bundle`` in place; returns the relative difference per graph and output.

    A bundle already converted is left alone (its manifest says so). Nothing
    is written unless every graph stays within ``tolerance``.
    """
    import onnx  # heavy optional dependency

    bundle = Path(bundle)
    man = read_manifest(bundle)
    if man.get("weights", {}).get("dtype") == "float16":
        return man["weights"]["max_rel_diff"]
    diffs: Dict[str, Dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        staged = []
        for path in sorted(bundle.glob("*.onnx")):
            model = onnx.load(str(path))
            if to_float16(model, min_elements) == 0:
                continue
            out = Path(tmp) / path.name
            onnx.save(model, str(out))
            diffs[path.name] = output_difference(path, out)
            bad = {k: v for k, v in diffs[path.name].items() if v > tolerance}
            if bad:
                raise CompactError(f"{path}: float16 weights move {bad} (relative) beyond {tolerance}; bundle unchanged")
            staged.append((out, path))
        for out, path in staged:
            shutil.copyfile(out, path)
    man["weights"] = {"dtype": "float16", "min_elements": min_elements, "max_rel_diff": diffs}
    write_manifest(bundle, man)
    return diffs


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m energyflow.compact", description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, nargs="+", help="bundle directories, converted in place")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="largest relative output difference allowed (default %(default)s)")
    a = p.parse_args(argv)
    for b in a.bundle:
        before = sum(f.stat().st_size for f in Path(b).glob("*.onnx"))
        diffs = compact_bundle(b, a.tolerance)
        after = sum(f.stat().st_size for f in Path(b).glob("*.onnx"))
        worst = max((v for d in diffs.values() for v in d.values()), default=0.0)
        print(f"{b}: {before / 1e6:.2f} -> {after / 1e6:.2f} MB, largest relative output difference {worst:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
