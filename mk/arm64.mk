# arm64 (Jetson) cross build on x86-64, tested under qemu-aarch64
# (docs/jetson.md, section 7). Leaves the native build alone: the arm64
# libraries live in a sysroot, .deps/arm64-sysroot, not in dpkg.
#
#   make deps-arm64       cross compiler (Debian), the arm64 sysroot (Debian 12
#                         arm64 libc6-dev, libvpx-dev, libhdf5-dev and their
#                         closure, unpacked), qemu-aarch64 10 (bookworm-backports,
#                         unpacked into .deps/qemu), ONNX Runtime linux-arm64
#   make build-arm64      bin/linux-arm64/energyflow, cgo, GOARCH=arm64
#   make test-arm64       arm64 test binaries of engines, camera, safety,
#                         actuators and runtime under qemu -cpu cortex-a76, then
#                         `energyflow bundle verify` and `energyflow bench` on
#                         bundles/metaworld-button-press with the arm64 ONNX
#                         Runtime (5.5 min warm on 2 cores)
#   make test-arm64-quick engines' Python parity and zero-allocation tests,
#                         safety, bundle verify and bench (2.5 min warm)
#   make test-arm64-ci    CI (EXTRA_TESTS): deps-arm64, then test-arm64
#                         (7.75 min from a clean clone)
#
# Every emulated process is killed after ARM64_TIMEOUT seconds (default 120).
# build-arm64 and test-arm64 install nothing: without the cross compiler,
# qemu or the sysroot they stop with one line naming `make deps-arm64`.

.PHONY: deps-arm64 build-arm64 test-arm64 test-arm64-quick test-arm64-ci

deps-arm64:
	./scripts/deps-arm64.sh

build-arm64:
	@./scripts/arm64.sh build

test-arm64:
	@./scripts/arm64.sh test

test-arm64-quick:
	@./scripts/arm64.sh test --quick

test-arm64-ci: deps-arm64
	@./scripts/arm64.sh test

EXTRA_TESTS += test-arm64-ci
