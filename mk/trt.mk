# TensorRT backend (package trt, trt/enginebuild, CMakeLists.txt).
#
#   make test-trt        CI: vet + race tests without TensorRT (ErrNoTensorRT
#                        path, plan selection, engine build with the trtexec
#                        test double) and of the cgo path linked against the
#                        CPU fake of the shim (tags "tensorrt trtfake"); builds
#                        the fake with CMake and -Werror; builds every
#                        package that can build with CGO_ENABLED=0.
#   make trt-syntax TRT_INCLUDE_DIR=/path/to/TensorRT/include
#                        compile-checks the real shim and the CUDA sources
#                        against those headers (-Wall -Wextra -Werror, no
#                        CUDA toolkit, no link). Fetches nothing.
#   make trt-shim        on a Jetson / TensorRT machine: build the real shim
#                        (build/trt/libefx_trt.a) and the graph benchmark.
#   make trt-bench       on a GPU machine: K-step CUDA graph vs eager launches.
#   make build-trt       on a Jetson: bin/energyflow with -tags tensorrt.

EXTRA_TESTS += test-trt
TRT_TAGS := tensorrt trtfake
TRT_BUILD_DIR ?= build
CMAKE ?= cmake

.PHONY: test-trt trt-fake trt-syntax trt-shim trt-bench build-trt trt-nocgo

test-trt: trt-fake trt-nocgo
	$(GO) vet ./trt/...
	$(GO) vet -tags "$(TRT_TAGS)" ./trt/...
	$(GO) test -race -count=1 ./trt/...
	$(GO) test -race -count=1 -tags "$(TRT_TAGS)" ./trt/...
	@if [ -n "$(TRT_INCLUDE_DIR)" ]; then $(MAKE) --no-print-directory trt-syntax; \
	  else echo "test-trt: shim compile check skipped (set TRT_INCLUDE_DIR to TensorRT headers to run it)"; fi

# The CPU fake as a C library, with -Wall -Wextra -Werror.
trt-fake:
	$(CMAKE) -S . -B $(TRT_BUILD_DIR)/trt-fake -DTRT_BUILD_FAKE=ON >/dev/null
	$(CMAKE) --build $(TRT_BUILD_DIR)/trt-fake

# CGO_ENABLED=0 build of every package whose dependencies need no cgo.
# Package trt needs no cgo without the tag, but it implements the
# interfaces of package engines, which links ONNX Runtime through cgo, so
# it (like everything importing engines, and telemetry's NVML and libvpx
# bindings) is listed as needing cgo until those interfaces live in a
# cgo-free package.
trt-nocgo:
	@cgo=$$(CGO_ENABLED=1 $(GO) list -deps -f '{{if and (not .Standard) .CgoFiles}}{{.ImportPath}}{{end}}' ./... | sort -u); \
	pkgs=$$($(GO) list -f '{{if .GoFiles}}{{.ImportPath}} {{join .Deps " "}}{{end}}' ./... | while read -r p deps; do \
	  [ -n "$$p" ] || continue; bad=0; for d in $$p $$deps; do case " $$(echo $$cgo) " in *" $$d "*) bad=1; break;; esac; done; \
	  [ $$bad = 0 ] && echo $$p; done); \
	echo "CGO_ENABLED=0 go build:" $$pkgs; \
	CGO_ENABLED=0 $(GO) build $$pkgs

trt-syntax:
	@test -n "$(TRT_INCLUDE_DIR)" || { echo "usage: make trt-syntax TRT_INCLUDE_DIR=/path/to/TensorRT/include"; exit 2; }
	$(CMAKE) -S . -B $(TRT_BUILD_DIR)/trt-syntax -DTRT_SYNTAX_ONLY=ON -DTRT_BUILD_FAKE=OFF -DTRT_INCLUDE_DIR=$(abspath $(TRT_INCLUDE_DIR))
	$(CMAKE) --build $(TRT_BUILD_DIR)/trt-syntax --clean-first

trt-shim:
	$(CMAKE) -S . -B $(TRT_BUILD_DIR) -DTRT_WITH_CUDA=ON -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(TRT_BUILD_DIR) -j

trt-bench: trt-shim
	./$(TRT_BUILD_DIR)/trt/efx_euler_graph_bench 20 16 2000
	./$(TRT_BUILD_DIR)/trt/efx_euler_graph_bench 20 1 2000

build-trt: trt-shim
	$(GO) build -tags tensorrt -o bin/energyflow ./cmd/energyflow

# make trt-link TRT_INCLUDE_DIR=/path/to/TensorRT/include
#                      the real shim compiled (nvcc) and linked, and
#                      `go build -tags tensorrt`, against NVIDIA's CUDA 13
#                      and TensorRT 10 lean-runtime wheels from PyPI (pinned,
#                      into .deps/trt-pypi); links the shim with
#                      -Wl,--no-undefined and runs `engine info` up to
#                      "no usable CUDA device" (scripts/trt-link.sh).
.PHONY: trt-link
trt-link:
	@TRT_INCLUDE_DIR="$(TRT_INCLUDE_DIR)" ./scripts/trt-link.sh
