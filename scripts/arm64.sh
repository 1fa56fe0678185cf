#!/usr/bin/env bash
# The arm64 (Jetson) cross build and its tests under qemu-aarch64, on an
# x86-64 machine prepared by scripts/deps-arm64.sh (make deps-arm64).
#
#   scripts/arm64.sh build               bin/linux-arm64/energyflow (cgo)
#   scripts/arm64.sh test [--quick]      arm64 test binaries under qemu, then
#                                        bundle verify and bench (docs/jetson.md §7)
#   scripts/arm64.sh exec BIN [ARGS...]  run one arm64 program under qemu
#                                        (also a `go test -exec` wrapper)
#   scripts/arm64.sh check-sysroot       the sysroot's loader and libc.so.6
#                                        come from one glibc build
#
# Environment: ARM64_TIMEOUT (seconds, default 120) bounds every emulated
# process but the bench with SIGKILL; QEMU_AARCH64 picks another qemu-aarch64 (default
# .deps/qemu/qemu-aarch64, 10.0 from bookworm-backports); ARM64_QEMU_CPU
# the emulated core (default cortex-a76); ARM64_NICE (default 10) is the
# niceness of builds and emulated runs; ARM64_BENCH_N the timed samples of
# the emulated bench (default 3: each sample is also re-scored), which has
# its own limit, ARM64_BENCH_TIMEOUT (default 300 s): since the per-stage
# re-score, 3 samples after 2 warm-ups take 106 s alone on an idle 2-core
# machine (stop 75), and a CI rehearsal killed one at the 120 s limit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sysroot=$root/.deps/arm64-sysroot
qemu=${QEMU_AARCH64:-$root/.deps/qemu/qemu-aarch64}
timeout_s=${ARM64_TIMEOUT:-120}
# Jetson Orin's cores are Cortex-A78AE (Armv8.2: LSE atomics, dot product,
# FP16; no SVE). qemu's closest model is the Cortex-A76; its default "max"
# adds SVE2, SME and pointer authentication, which Orin lacks and which
# make ONNX Runtime about 2x slower under emulation.
qemu_cpu=${ARM64_QEMU_CPU:-cortex-a76}
nice_n=${ARM64_NICE:-10}
ort=$root/.deps/onnxruntime/linux-arm64/libonnxruntime.so.1
bundle=bundles/metaworld-button-press
export ENERGYFLOW_ROOT=$root

die() { echo "arm64: $*" >&2; exit 2; }

need_build() {
  command -v aarch64-linux-gnu-gcc >/dev/null || die "aarch64-linux-gnu-gcc not found: run make deps-arm64 (installs Debian's gcc-aarch64-linux-gnu)"
  [ -f "$sysroot/.packages" ] || die "no arm64 sysroot at .deps/arm64-sysroot: run make deps-arm64"
}

need_run() {
  [ -x "$qemu" ] || command -v "$qemu" >/dev/null || die "qemu-aarch64 not found at ${qemu#"$root"/}: run make deps-arm64 (unpacks qemu-user 10 from bookworm-backports) or set QEMU_AARCH64"
  [ -f "$sysroot/.packages" ] || die "no arm64 sysroot at .deps/arm64-sysroot: run make deps-arm64"
}

# The Go toolchain's view of the cross build: cgo with the cross compiler,
# headers, libraries and .pc files from the sysroot only.
cross_env() {
  export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++
  export CGO_CFLAGS="--sysroot=$sysroot -O2 -g" CGO_LDFLAGS="--sysroot=$sysroot"
  export PKG_CONFIG_LIBDIR=$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig:$sysroot/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$sysroot PKG_CONFIG_PATH=
}

glibc_build() { LC_ALL=C grep -aom1 'GLIBC [^)]*' "$1" || echo "unknown"; }

check_sysroot() {
  local ld=$sysroot/usr/lib/ld-linux-aarch64.so.1 libc=$sysroot/usr/lib/aarch64-linux-gnu/libc.so.6
  [ -e "$ld" ] && [ -e "$libc" ] || die "the sysroot has no loader or libc.so.6: run make deps-arm64"
  local a b; a=$(glibc_build "$ld"); b=$(glibc_build "$libc")
  [ "$a" = "$b" ] || die "the sysroot's loader ($a) and libc.so.6 ($b) come from different glibc builds: programs hang in pthread_create; rebuild it with ARM64_SYSROOT_REFRESH=1 make deps-arm64"
  [ "${1:-}" = -q ] || echo "arm64: sysroot loader and libc.so.6 from one build ($a)"
}

# run_q BIN ARGS: one emulated process, SIGKILLed after $timeout_s (a
# process stuck with its signals blocked ignores SIGTERM). Only the
# sysroot's libraries: the host's LD_LIBRARY_PATH and LD_PRELOAD are
# removed from the program's environment.
run_q() {
  timeout -s KILL "$timeout_s" nice -n "$nice_n" "$qemu" -cpu "$qemu_cpu" -L "$sysroot" -U LD_LIBRARY_PATH -U LD_PRELOAD "$@"
}

build() {
  need_build
  cross_env
  mkdir -p "$root/bin/linux-arm64"
  local t0=$SECONDS
  (cd "$root" && nice -n "$nice_n" go build -o bin/linux-arm64/energyflow ./cmd/energyflow)
  local bin=$root/bin/linux-arm64/energyflow info
  info="$(aarch64-linux-gnu-readelf -h "$bin" | awk -F': +' '/Class|Machine/{printf "%s ", $2}')needs"
  info+="$(aarch64-linux-gnu-readelf -d "$bin" | awk '/NEEDED/{gsub(/[][]/,"",$5); printf " %s", $5}')"
  echo "arm64: built bin/linux-arm64/energyflow in $((SECONDS - t0)) s ($info)"
}

# The emulated test runs: "package|flags" (flags split at spaces). Each line
# is one process, bounded by ARM64_TIMEOUT: the slow tests under qemu
# (engines' Python parity tests, 15 to 85 s each: the two slowest alone;
# runtime's end-to-end tests, 35 to 60 s; the unseen-colour test's three
# vision stacks, about 40 s each, one run each; the watch camera's four, in
# three runs: the first two together, the last two alone) run apart
# from the rest of their package, and the -test.skip line
# of a package runs all its other tests, so a renamed test still runs.
full_tests=(
  "engines|-test.run=^TestParityWithPythonReference$"
  "engines|-test.run=^TestParityStateEnergyWithPythonReference$"
  "engines|-test.run=Parity -test.skip=^(TestParityWithPythonReference|TestParityStateEnergyWithPythonReference)$"
  "engines|-test.skip=Parity"
  "camera|"
  "safety|"
  "actuators|"
  "actuators/simarm|"
  "runtime|-test.run=^TestEndToEnd$"
  "runtime|-test.run=^TestEndToEndImagePolicy$"
  "runtime|-test.run=^TestLoopRefusesMismatchedBundle$"
  "runtime|-test.run=^TestCameraUnseenEndToEnd$/^every_colour_seen$"
  "runtime|-test.run=^TestCameraUnseenEndToEnd$/^no_colour_seen$"
  "runtime|-test.run=^TestCameraUnseenEndToEnd$/^no_palette$"
  "runtime|-test.run=^TestWatchCameraEndToEnd$/^(every_colour_seen|no_colour_seen)$"
  "runtime|-test.run=^TestWatchCameraEndToEnd$/^another_frame_size$"
  "runtime|-test.run=^TestWatchCameraEndToEnd$/^goes_quiet$"
  "runtime|-test.skip=^(TestEndToEnd|TestEndToEndImagePolicy|TestLoopRefusesMismatchedBundle|TestCameraUnseenEndToEnd|TestWatchCameraEndToEnd)$"
  "runtime/record|"
)
# --quick: the Python parity tests, the zero-allocation tests, safety.
quick_tests=(
  "engines|-test.run=^TestParityWithPythonReference$"
  "engines|-test.run=Parity|Alloc|VisionConditioning -test.skip=^TestParityWithPythonReference$"
  "safety|"
)

test_all() {
  local quick=0
  [ "${1:-}" = --quick ] && quick=1
  need_build; need_run; check_sysroot -q
  [ -f "$ort" ] || die "no arm64 ONNX Runtime at .deps/onnxruntime/linux-arm64: run make deps-arm64"
  local t_all=$SECONDS specs=("${full_tests[@]}")
  [ $quick = 1 ] && specs=("${quick_tests[@]}")
  local out=$root/build/arm64 pkgs=() s
  for s in "${specs[@]}"; do
    case " ${pkgs[*]} " in *" ./${s%%|*} "*) ;; *) pkgs+=("./${s%%|*}") ;; esac
  done
  mkdir -p "$out/test"
  build
  local t0=$SECONDS
  (cd "$root" && cross_env && nice -n "$nice_n" go test -c -o "$out/test/" "${pkgs[@]}")
  echo "arm64: built ${#pkgs[@]} test binaries in $((SECONDS - t0)) s"
  local failed=() pkg flags fl bin rc log i=0
  rm -f "$out"/test-*.log
  for s in "${specs[@]}"; do
    pkg=${s%%|*}; flags=${s#*|}; bin=$out/test/$(basename "$pkg").test
    i=$((i + 1)); log=$out/test-$i-$(echo "$pkg" | tr / -).log
    t0=$SECONDS; rc=0
    # Like go test: the binary runs in its package directory.
    read -ra fl <<<"$flags"
    (cd "$root/$pkg" && run_q "$bin" -test.count=1 -test.v -test.timeout="$((timeout_s - 5))s" "${fl[@]}") > "$log" 2>&1 || rc=$?
    if [ $rc = 0 ]; then
      echo "ok    $pkg (arm64, qemu) $((SECONDS - t0)) s, $(grep -c -- '^--- PASS' "$log") passed$(grep -q -- '^--- SKIP' "$log" && echo ", $(grep -c -- '^--- SKIP' "$log") skipped")${flags:+ [$flags]}"
    else
      echo "FAIL  $pkg (arm64, qemu) $((SECONDS - t0)) s, exit $rc${flags:+ [$flags]}"
      [ $rc = 137 ] && echo "      killed after ${timeout_s} s (ARM64_TIMEOUT)"
      { grep -- '^--- FAIL' "$log"; tail -30 "$log"; } | sed 's/^/      /'
      failed+=("$pkg${flags:+ [$flags]}")
    fi
  done
  # The parity logs: which tolerances hold on arm64.
  grep -h 'parity over' "$out"/test-*-engines.log 2>/dev/null | sed 's/^ */      /' || true
  local ef=$root/bin/linux-arm64/energyflow
  t0=$SECONDS
  if (cd "$root" && run_q "$ef" bundle verify "$bundle") > "$out/bundle-verify.log" 2>&1; then
    echo "ok    energyflow bundle verify $bundle (arm64, qemu) $((SECONDS - t0)) s"
  else
    echo "FAIL  energyflow bundle verify $bundle (arm64, qemu)"; sed 's/^/      /' "$out/bundle-verify.log"; failed+=("bundle verify")
  fi
  t0=$SECONDS
  if (cd "$root" && timeout_s=${ARM64_BENCH_TIMEOUT:-300} && run_q "$ef" bench --bundle "$bundle" -n "${ARM64_BENCH_N:-3}" -warmup 2) > "$out/bench.log" 2>&1; then
    echo "ok    energyflow bench --bundle $bundle (arm64, qemu) $((SECONDS - t0)) s:"
    sed 's/^/      /' "$out/bench.log"
  else
    echo "FAIL  energyflow bench --bundle $bundle (arm64, qemu) after $((SECONDS - t0)) s (ARM64_BENCH_TIMEOUT ${ARM64_BENCH_TIMEOUT:-300} s)"; sed 's/^/      /' "$out/bench.log"; failed+=("bench")
  fi
  echo "arm64: test$([ $quick = 1 ] && echo " --quick") took $((SECONDS - t_all)) s; logs in build/arm64/"
  [ ${#failed[@]} = 0 ] || { echo "arm64: FAILED: ${failed[*]}"; exit 1; }
}

case "${1:-}" in
  build) build ;;
  test) shift; test_all "$@" ;;
  exec) shift; need_run; run_q "$@" ;;
  check-sysroot) check_sysroot ;;
  *) echo "usage: scripts/arm64.sh build | test [--quick] | exec BIN [ARGS...] | check-sysroot" >&2; exit 2 ;;
esac
