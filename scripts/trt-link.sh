#!/usr/bin/env bash
# Builds the real TensorRT shim and `go build -tags tensorrt` against
# NVIDIA's own libraries on a machine without a GPU, and runs the binary far
# enough to see it load TensorRT and report that there is no CUDA device.
# Called by `make trt-link TRT_INCLUDE_DIR=…` (mk/trt.mk, docs/jetson.md §6).
#
#   TRT_INCLUDE_DIR   TensorRT's include/ (NvInferRuntime.h): any checkout of
#                     github.com/NVIDIA/TensorRT, at the tag of the library
#                     below (v10.16), e.g.
#                       git -C TensorRT archive v10.16 include | tar -x -C /tmp/trt-10.16
#   TRT_LINK_CUDA_ARCH  GPU architecture for nvcc (default 87: Jetson Orin)
#
# What comes from PyPI (pinned, into the virtual environment .deps/trt-pypi,
# never the project's .venv):
#   nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt, nvidia-cuda-runtime 13.0.88
#       the only CUDA wheels on PyPI with nvcc itself (the -cu12 nvcc wheels
#       hold ptxas and libnvvm but no nvcc or cicc);
#   tensorrt-lean-cu13-libs 10.16.1.11
#       TensorRT 10's lean runtime, libnvinfer_lean.so.10: the TensorRT
#       runtime library with real wheels on PyPI (tensorrt-cu12-libs and
#       tensorrt-cu13-libs are stubs that download from pypi.nvidia.com).
#       It exports the runtime API the shim uses; build/trt-link/lib/
#       libnvinfer.so points at it, so the shim links as `-lnvinfer`.
#
# Steps, each failing the target:
#   1. CMake + nvcc build of trt/shim (TRT_WITH_CUDA=ON; C++ with -Werror)
#      into build/trt-link/trt/libefx_trt.a, and the graph benchmark;
#   2. the whole archive linked into a shared object with -Wl,--no-undefined
#      against libnvinfer and libcudart: a missing or misspelled TensorRT or
#      CUDA symbol fails here (the Go link itself cannot catch it: go-nvml
#      links with --unresolved-symbols=ignore-in-object-files);
#   3. go build -tags tensorrt -o build/trt-link/energyflow ./cmd/energyflow,
#      and `ldd -r` on it: no undefined symbol but go-nvml's (resolved when
#      it dlopens libnvidia-ml);
#   4. `energyflow engine info` with the PyPI libraries on LD_LIBRARY_PATH:
#      libnvinfer_lean and libcudart load, the command exits 1 with
#      "no usable CUDA device" (no crash, no signal).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

inc=${TRT_INCLUDE_DIR:-}
if [ -z "$inc" ] || [ ! -f "$inc/NvInferRuntime.h" ]; then
  echo "trt-link: set TRT_INCLUDE_DIR to TensorRT's include/ (NvInferRuntime.h${inc:+; not in $inc}), e.g. git -C TensorRT archive v10.16 include | tar -x -C /tmp/trt-10.16 && make trt-link TRT_INCLUDE_DIR=/tmp/trt-10.16/include" >&2
  exit 2
fi
inc=$(cd "$inc" && pwd)
arch=${TRT_LINK_CUDA_ARCH:-87}
out=build/trt-link
venv=.deps/trt-pypi
pins=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.88 tensorrt-lean-cu13-libs==10.16.1.11)

# 0. The pinned wheels.
if [ "$(cat "$venv/.pins" 2>/dev/null)" != "${pins[*]}" ]; then
  echo "trt-link: installing ${pins[*]} into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "${pins[@]}"
  echo "${pins[*]}" > "$venv/.pins"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cuda=$site/nvidia/cu13
trtlib=$site/tensorrt_lean_libs
# The wheels' toolkit layout lacks two things a CUDA install has: nvcc.profile
# looks for $TOP/lib64, and CMake's FindCUDAToolkit for an unversioned
# libcudart.so.
ln -sfn lib "$cuda/lib64"
ln -sfn libcudart.so.13 "$cuda/lib/libcudart.so"
mkdir -p "$out/lib"
ln -sfn "$trtlib/libnvinfer_lean.so.10" "$out/lib/libnvinfer.so"

hver=$(awk '/define (NV_TENSORRT|TRT)_(MAJOR|MINOR|PATCH)(_ENTERPRISE)? /{print $3}' "$inc/NvInferVersion.h" | grep -E '^[0-9]+$' | head -3 | paste -sd.)
lver=${pins[4]#*==}
echo "trt-link: TensorRT headers $hver ($inc), libnvinfer_lean $lver, $("$cuda/bin/nvcc" --version | tail -1), sm_$arch"
[ "${hver%.*}" = "$(cut -d. -f1-2 <<<"$lver")" ] || echo "trt-link: warning: TensorRT headers $hver, library $lver: use the headers of tag v$(cut -d. -f1-2 <<<"$lver")" >&2

# 1. The shim with nvcc.
t0=$SECONDS
cmake --fresh -S . -B "$out" -DTRT_WITH_CUDA=ON -DTRT_BUILD_FAKE=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCUDAToolkit_ROOT="$cuda" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DTRT_INCLUDE_DIR="$inc" -DTRT_LIB_DIR="$root/$out/lib" > "$out.cmake.log" 2>&1 \
  || { cat "$out.cmake.log"; exit 1; }
grep -- '-- TensorRT:' "$out.cmake.log" || true
env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS cmake --build "$out" -j2 --clean-first
echo "trt-link: shim built in $((SECONDS - t0)) s: $out/trt/libefx_trt.a (trt_shim.cpp, euler_step.cu for sm_$arch), $out/trt/efx_euler_graph_bench"

# 2. Every symbol of the shim resolves in libnvinfer + libcudart.
g++ -shared -o "$out/libefx_trt_linkcheck.so" -Wl,--whole-archive "$out/trt/libefx_trt.a" -Wl,--no-whole-archive \
  -L"$out/lib" -L"$cuda/lib" -lnvinfer -lcudart -Wl,--no-undefined
echo "trt-link: shim linked with -Wl,--no-undefined: $(readelf -d "$out/libefx_trt_linkcheck.so" | awk '/NEEDED/{gsub(/[][]/,"",$5); printf "%s ", $5}')"

# 3. The Go binary with -tags tensorrt. Go's build cache does not hash C
# archives named by -L/-l: the archive is linked from a directory named by
# its sha256, so a rebuilt shim changes CGO_LDFLAGS and is linked again.
t0=$SECONDS
sum=$(sha256sum "$out/trt/libefx_trt.a" | cut -c1-16)
rm -rf "$out/archive"; mkdir -p "$out/archive/$sum"
ln -s ../../trt/libefx_trt.a "$out/archive/$sum/libefx_trt.a"
CGO_LDFLAGS="-L$root/$out/archive/$sum -L$root/$out/lib -L$cuda/lib" nice -n 10 go build -tags tensorrt -o "$out/energyflow" ./cmd/energyflow
echo "trt-link: go build -tags tensorrt in $((SECONDS - t0)) s: $out/energyflow"
export LD_LIBRARY_PATH=$trtlib:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
undef=$(ldd -r "$out/energyflow" 2>&1 | grep 'undefined symbol' | grep -v 'undefined symbol: nvml' || true)
[ -z "$undef" ] || { echo "trt-link: undefined symbols in $out/energyflow:"; echo "$undef"; exit 1; }
echo "trt-link: ldd -r: no undefined symbols (but go-nvml's nvml*, resolved by its dlopen)"

# 4. Load TensorRT, find no GPU, say so.
rc=0
LD_DEBUG=files "$out/energyflow" engine info > "$out/engine-info.log" 2> "$out/engine-info.ld.log" || rc=$?
grep -o 'calling init: [^ ]*lib\(nvinfer[^ ]*\|cudart[^ ]*\)' "$out/engine-info.ld.log" | sort -u | sed 's/^/trt-link: /' || true
msg=$(grep -v '^ *[0-9]*:' "$out/engine-info.ld.log" || true)
echo "trt-link: energyflow engine info -> exit $rc: $msg"
if [ $rc != 1 ] || ! grep -q 'no usable CUDA device' <<<"$msg"; then
  echo "trt-link: expected exit 1 and 'no usable CUDA device' from a machine without a GPU" >&2; exit 1
fi
echo "trt-link: ok"
