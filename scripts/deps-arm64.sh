#!/usr/bin/env bash
# Installs what the arm64 (Jetson) cross build and its emulated tests need on
# an x86-64 Debian 12 machine, without touching the native build:
#
#   1. host packages: the cross compiler (gcc-aarch64-linux-gnu);
#   2. a sysroot, .deps/arm64-sysroot: Debian 12's arm64 libvpx-dev,
#      libhdf5-dev and libc6-dev with their whole dependency closure,
#      downloaded by apt with a private state directory (.deps/arm64-apt,
#      architecture arm64, empty dpkg status, so apt resolves every
#      dependency) and unpacked with `dpkg-deb -x`. Nothing is installed into
#      the host's dpkg database: Debian 12's libhdf5-dev cannot be installed
#      for two architectures at once, and installing libhdf5-dev:arm64 would
#      remove the amd64 one that the native build links;
#   3. qemu-aarch64 10.0 from bookworm-backports (qemu-user, a static
#      binary), unpacked into .deps/qemu/: Debian 12's own qemu-user 7.2
#      shows arm64 programs the host's x86 /proc/cpuinfo, and ONNX Runtime's
#      CPU detection then crashes with SIGSEGV while the library loads
#      (docs/jetson.md, section 7);
#   4. ONNX Runtime's linux-arm64 C library from the same pinned npm package
#      as the native one (scripts/install-onnxruntime.sh arm64), into
#      .deps/onnxruntime/linux-arm64/.
#
# Every .deb comes through apt, which checks it against Debian's signed
# Release files. Idempotent: a second run only checks (the sysroot is
# rebuilt when the package list below changes, or with
# ARM64_SYSROOT_REFRESH=1 to pick up Debian security updates). Called by
# `make deps-arm64` (mk/arm64.mk).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

[ "$(uname -m)" = x86_64 ] || { echo "deps-arm64: this sets up a cross build on x86-64; on an arm64 machine use make deps and make build" >&2; exit 1; }

# 1. Host packages.
host_pkgs=(gcc-aarch64-linux-gnu pkg-config)
missing=()
for p in "${host_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps-arm64: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A private apt: its own sources, lists, cache and an empty dpkg status
# (every dependency is "missing", so a simulated install lists the whole
# closure); it never reads, writes or locks the host's dpkg database.
#   private_apt DIR ARCH SUITE... ; then apt-get "${apt_opts[@]}" ...
key=/usr/share/keyrings/debian-archive-keyring.gpg
private_apt() {
  local dir=$1 arch=$2; shift 2
  rm -rf "$dir"; mkdir -p "$dir"/{lists/partial,archives/partial,sources.d,preferences.d}
  : > "$dir/status"
  for suite in "$@"; do
    case $suite in
      *-security) echo "deb [arch=$arch signed-by=$key] http://deb.debian.org/debian-security $suite main" ;;
      *) echo "deb [arch=$arch signed-by=$key] http://deb.debian.org/debian $suite main" ;;
    esac
  done > "$dir/sources.list"
  apt_opts=(
    -o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/sources.d"
    -o "Dir::Etc::Preferences=$dir/preferences" -o "Dir::Etc::PreferencesParts=$dir/preferences.d"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::State::status=$dir/status"
    -o "Dir::Cache=$dir" -o "Dir::Cache::archives=$dir/archives"
    -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o Debug::NoLocking=1
    -o APT::Install-Recommends=false -o APT::Sandbox::User=root
  )
  apt-get "${apt_opts[@]}" -qq update
}

# 2. The arm64 sysroot.
sysroot_pkgs=(libc6-dev libvpx-dev libhdf5-dev)
sysroot=.deps/arm64-sysroot
stamp=$sysroot/.packages
want="bookworm arm64: ${sysroot_pkgs[*]}"
if [ -f "$stamp" ] && [ "$(head -1 "$stamp")" = "$want" ] && [ "${ARM64_SYSROOT_REFRESH:-0}" != 1 ]; then
  echo "deps-arm64: $sysroot is installed ($(($(wc -l < "$stamp") - 1)) packages)"
else
  echo "deps-arm64: resolving the arm64 closure of ${sysroot_pkgs[*]} (Debian bookworm)"
  aptdir=$root/.deps/arm64-apt
  private_apt "$aptdir" arm64 bookworm bookworm-updates bookworm-security
  mapfile -t closure < <(apt-get "${apt_opts[@]}" install -s "${sysroot_pkgs[@]}" | awk '/^Inst /{print $2}')
  [ ${#closure[@]} -gt 0 ] || { echo "deps-arm64: apt resolved no packages" >&2; exit 1; }
  echo "deps-arm64: downloading ${#closure[@]} arm64 packages"
  (cd "$aptdir/archives" && apt-get "${apt_opts[@]}" -qq download "${closure[@]}")
  rm -rf "$sysroot.tmp"; mkdir -p "$sysroot.tmp"
  for deb in "$aptdir"/archives/*.deb; do dpkg-deb -x "$deb" "$sysroot.tmp"; done
  # Debian 12 is merged-/usr on the target: make /lib and /usr/lib one
  # directory, so the loader (/lib/ld-linux-aarch64.so.1) and the libraries
  # are found under one prefix by qemu -L and by the linker.
  if [ -d "$sysroot.tmp/lib" ] && [ ! -L "$sysroot.tmp/lib" ]; then
    mkdir -p "$sysroot.tmp/usr/lib"; cp -a "$sysroot.tmp/lib/." "$sysroot.tmp/usr/lib/"; rm -rf "${sysroot:?}.tmp/lib"
  fi
  ln -sfn usr/lib "$sysroot.tmp/lib"
  # Absolute symlinks point into the host: make them relative to the sysroot.
  while IFS= read -r l; do
    t=$(readlink "$l")
    case "$t" in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$sysroot.tmp$t")" "$l" ;; esac
  done < <(find "$sysroot.tmp" -type l)
  # What dpkg's maintainer scripts would have set up (dpkg-deb -x runs
  # none): libhdf5-dev's serial flavour as the default hdf5.
  multi=$sysroot.tmp/usr/lib/aarch64-linux-gnu
  ln -sfn hdf5-serial.pc "$multi/pkgconfig/hdf5.pc"
  for f in "$multi"/hdf5/serial/libhdf5*.so; do ln -sfn "hdf5/serial/$(basename "$f")" "$multi/$(basename "$f")"; done
  { echo "$want"; for deb in "$aptdir"/archives/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done; } > "$sysroot.tmp/.packages"
  rm -rf "$sysroot"; mv "$sysroot.tmp" "$sysroot"
  rm -rf "$aptdir"
  echo "deps-arm64: installed $sysroot ($(du -sh "$sysroot" | cut -f1), ${#closure[@]} packages)"
fi
# One C library: the loader and libc.so.6 must come from the same build (a
# loader from another glibc build, e.g. libc6-arm64-cross's, with this
# libc.so.6 loops forever in pthread_create: docs/jetson.md, section 7).
./scripts/arm64.sh check-sysroot

# 3. qemu-aarch64 from bookworm-backports.
qemu=.deps/qemu/qemu-aarch64
if [ -x "$qemu" ] && "$qemu" --version | grep -q '^qemu-aarch64 version 10\.'; then
  echo "deps-arm64: $qemu is installed ($("$qemu" --version | head -1))"
else
  echo "deps-arm64: fetching qemu-user from bookworm-backports (qemu-aarch64 only)"
  qdir=$root/.deps/qemu-apt
  private_apt "$qdir" amd64 bookworm-backports
  ver=$(apt-cache "${apt_opts[@]}" show qemu-user | awk '/^Version: 1:10\./{print $2; exit}')
  [ -n "$ver" ] || { echo "deps-arm64: bookworm-backports has no qemu-user 10.x" >&2; exit 1; }
  (cd "$qdir/archives" && apt-get "${apt_opts[@]}" -qq download "qemu-user=$ver")
  mkdir -p .deps/qemu
  dpkg-deb --fsys-tarfile "$qdir"/archives/qemu-user_*.deb | tar -xO ./usr/bin/qemu-aarch64 > "$qemu.tmp"
  chmod 0755 "$qemu.tmp"; mv "$qemu.tmp" "$qemu"
  rm -rf "$qdir"
  echo "deps-arm64: installed $qemu ($("$qemu" --version | head -1))"
fi

# 4. ONNX Runtime for linux-arm64.
./scripts/install-onnxruntime.sh arm64
echo "deps-arm64: ok"
