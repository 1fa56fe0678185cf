#!/usr/bin/env bash
# Installs ONNX Runtime's C library (libonnxruntime.so.1) for the Go runtime.
#
# The library comes from the npm package onnxruntime-node, which ships the
# plain C library for linux x64 and arm64. It is verified against pinned
# sha256 sums and installed into .deps/onnxruntime/linux-<arch>/ (the
# project's own install location, the last place the runtime looks).
# Nothing is done when a verified copy is already there, or when
# SKIP_IF_SYSTEM=1 and the system already has libonnxruntime.so.1.
#
#   scripts/install-onnxruntime.sh [x64|arm64]   (default: this machine's;
#                                                 arm64 on x86-64 for the
#                                                 cross build, make deps-arm64)
set -euo pipefail

version=1.30.0
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-$(uname -m)}" in
  x86_64|amd64|x64) arch=x64; sum=ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23 ;;
  aarch64|arm64) arch=arm64; sum=1f549d46250b005580b597f4164984aaf75b3bcb9f3aeb07c7f8a8fe60b23c76 ;;
  *) echo "install-onnxruntime: unsupported machine ${1:-$(uname -m)} (need x86_64/x64 or aarch64/arm64)" >&2; exit 1 ;;
esac
dest="$root/.deps/onnxruntime/linux-$arch"
lib="$dest/libonnxruntime.so.1"

if [ "${SKIP_IF_SYSTEM:-0}" = 1 ] && [ -z "${1:-}" ] && ldconfig -p 2>/dev/null | grep -q 'libonnxruntime.so.1 '; then
  echo "install-onnxruntime: system library found, nothing to do"; exit 0
fi
if [ -f "$lib" ] && echo "$sum  $lib" | sha256sum -c --quiet - 2>/dev/null; then
  echo "install-onnxruntime: $lib is installed and verified"; exit 0
fi

command -v npm >/dev/null || { echo "install-onnxruntime: npm is needed to fetch onnxruntime-node@$version" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "install-onnxruntime: fetching onnxruntime-node@$version from the npm registry"
(cd "$tmp" && npm pack --silent "onnxruntime-node@$version" >/dev/null)
tar -xzf "$tmp"/onnxruntime-node-$version.tgz -C "$tmp" "package/bin/napi-v6/linux/$arch/libonnxruntime.so.1"
got="$tmp/package/bin/napi-v6/linux/$arch/libonnxruntime.so.1"
if ! echo "$sum  $got" | sha256sum -c --quiet -; then
  echo "install-onnxruntime: sha256 mismatch for libonnxruntime.so.1 ($arch): refusing to install" >&2; exit 1
fi
mkdir -p "$dest"
install -m 0644 "$got" "$lib"
echo "install-onnxruntime: installed $lib (ONNX Runtime $version)"
