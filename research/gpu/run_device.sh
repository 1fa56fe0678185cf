#!/usr/bin/env bash
# research/gpu/run_device.sh OUT — the GPU checks docs/jetson.md §8 reports, in one run
# on a machine with an NVIDIA GPU, nvcc and PyTorch (no TensorRT needed):
#   OUT/machine.txt            the GPU, driver, nvcc, torch, and whether TensorRT is there
#   OUT/euler_graph_bench.txt  trt/shim/euler_graph_bench.cu (stand-in kernel) at K 10/20, batch 1/16
#   OUT/sample_cuda.json       research.gpu.sample_cuda over the shipped bundles
# onnx2torch is needed and not on such machines: put its wheel in .whl/ first
# (pip download --no-deps -d .whl onnx2torch==1.5.15).
set -u
out=${1:?usage: research/gpu/run_device.sh OUTDIR}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:training:.
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    nvcc --version | tail -2
    python3 -c 'import torch, onnxruntime; print("torch", torch.__version__, "cuda", torch.version.cuda, "onnxruntime", onnxruntime.__version__)'
    ldconfig -p | grep -i nvinfer || echo "TensorRT: no libnvinfer on this machine"
} >"$out/machine.txt" 2>&1
if nvcc -O3 -arch=native -o /tmp/efx_euler_graph_bench trt/shim/euler_graph_bench.cu trt/shim/euler_step.cu \
    >"$out/euler_graph_bench.txt" 2>&1; then
    for K in 10 20; do for B in 1 16; do /tmp/efx_euler_graph_bench "$K" "$B" 2000; done; done \
        >>"$out/euler_graph_bench.txt" 2>&1
fi
PYTHONUNBUFFERED=1 timeout 420 python3 -W ignore -m research.gpu.sample_cuda --json "$out/sample_cuda.json" \
    --bundle bundles/metaworld-button-press bundles/metaworld-assembly bundles/metaworld-bin-picking \
    bundles/metaworld-button-press-camera
