#!/usr/bin/env bash
# Installs everything the demo, the tests and the benchmarks need on a fresh
# Debian 12 machine: Debian packages, the Python environment (.venv), ONNX
# Runtime's C library, and the browser-test driver. Idempotent: a second run
# only checks. Called by `make deps` (and so by `make demo` and `make test`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# 1. Debian packages: libvpx (VP8 encoder), Chromium (browser tests), OSMesa
#    (headless MuJoCo rendering), systemd (systemd-analyze verify), ffmpeg
#    (camera fixtures), socat (RTU tests through a pseudo-terminal pair),
#    libhdf5 (episode recording).
apt_pkgs=(libvpx-dev libhdf5-dev pkg-config chromium libosmesa6 libosmesa6-dev libgl1 libegl1 systemd ffmpeg socat)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "deps: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. Python environment for the training toolkit and the simulated robot.
stamp=.venv/.requirements.sha256
want=$(sha256sum training/requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "deps: creating .venv (torch, onnx, onnxruntime, metaworld, pymodbus, ...)"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r training/requirements.txt
  echo "$want" > "$stamp"
fi

# 3. ONNX Runtime's C library for the Go runtime.
./scripts/install-onnxruntime.sh

# 4. playwright-core for the browser test (drives Debian's /usr/bin/chromium;
#    never downloads a browser).
if [ -f telemetry/browsertest/package.json ] && [ ! -d telemetry/browsertest/node_modules/playwright-core ]; then
  echo "deps: installing playwright-core"
  (cd telemetry/browsertest && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund)
fi
echo "deps: ok"
