#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine: Debian
# packages, the Python environment (.venv), ONNX Runtime's C library, and
# the browser-test driver.
#
#   scripts/deps.sh demo   only what `make demo` runs (`make deps-demo`): the
#                          packages the Go build and headless MuJoCo need, the
#                          simulator's Python packages (sim/requirements.txt,
#                          no torch) and ONNX Runtime's C library
#   scripts/deps.sh        everything the tests and benchmarks need as well
#                          (`make deps`, called by `make test`): adds the
#                          training toolkit's requirements and pytest
#                          (training/requirements.txt), the toolkit itself
#                          (editable, training/pyproject.toml), Chromium,
#                          playwright-core and the test tools
#
# Idempotent: a second run only checks. Each set of Python requirements has
# its own stamp in .venv; going from the demo set to the full one installs
# the difference into the existing .venv (it is never recreated).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

case "${1:-all}" in
  demo) full=0 ;;
  all) full=1 ;;
  *) echo "usage: scripts/deps.sh [demo|all]" >&2; exit 2 ;;
esac

# 1. Debian packages.
#    Demo: libvpx (VP8 encoder of the live view) and libhdf5 (episode
#    recording), both linked by the Go build through pkg-config; OSMesa
#    (headless MuJoCo rendering, MUJOCO_GL=osmesa: PyOpenGL loads
#    libOSMesa.so.8, no -dev package needed).
#    Full: also OSMesa's headers and libGL/libEGL (other MUJOCO_GL
#    back ends), Chromium (browser tests), systemd (systemd-analyze
#    verify), ffmpeg (camera fixtures), socat (RTU tests through a
#    pseudo-terminal pair).
apt_pkgs=(libvpx-dev libhdf5-dev pkg-config libosmesa6)
[ $full = 1 ] && apt_pkgs+=(libosmesa6-dev libgl1 libegl1 chromium systemd ffmpeg socat)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's python3 needs python3-venv to create .venv.
if [ ! -x .venv/bin/python ] && [ "$(command -v python3)" = /usr/bin/python3 ] &&
   ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed'; then
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "deps: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. Python environment: the simulated robot (demo), then the training
#    toolkit and the tests (full). training/requirements.txt includes
#    sim/requirements.txt, so the full install resolves both sets together.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c '' 2>/dev/null; then
  echo "deps: creating .venv"
  python3 -m venv .venv
  rm -f .venv/.requirements*.sha256
  .venv/bin/pip install -q --upgrade pip
fi
sim_want=$(sha256sum sim/requirements.txt | cut -d' ' -f1)
full_want=$(cat sim/requirements.txt training/requirements.txt | sha256sum | cut -d' ' -f1)
if [ $full = 1 ]; then
  if [ "$(cat .venv/.requirements-full.sha256 2>/dev/null)" != "$full_want" ]; then
    echo "deps: installing the training toolkit and test requirements into .venv (torch, onnx, onnxruntime, pytest, metaworld, ...)"
    .venv/bin/pip install -q -r training/requirements.txt
    echo "$full_want" > .venv/.requirements-full.sha256
    echo "$sim_want" > .venv/.requirements-sim.sha256
  fi
elif [ "$(cat .venv/.requirements-sim.sha256 2>/dev/null)" != "$sim_want" ]; then
  echo "deps: installing the simulator's requirements into .venv (metaworld, mujoco, pymodbus, ...)"
  .venv/bin/pip install -q -r sim/requirements.txt
  echo "$sim_want" > .venv/.requirements-sim.sha256
fi
rm -f .venv/.requirements.sha256 # the single stamp of earlier versions
# The training toolkit itself, editable (training/pyproject.toml): `energyflow`
# then imports from any directory, e.g. for `python -m research.stop.false_trips`
# from the root. Checked on every run, so a moved checkout is reinstalled.
if [ $full = 1 ] && [ "$(cd / && "$root/.venv/bin/python" -c 'import energyflow, os; print(os.path.dirname(energyflow.__file__))' 2>/dev/null)" != "$root/training/energyflow" ]; then
  echo "deps: installing the training toolkit into .venv (editable: pip install -e training)"
  .venv/bin/pip install -q --no-deps -e training
fi

# 3. ONNX Runtime's C library for the Go runtime.
./scripts/install-onnxruntime.sh

# 4. playwright-core for the browser test (drives Debian's /usr/bin/chromium;
#    never downloads a browser).
if [ $full = 1 ] && [ -f telemetry/browsertest/package.json ] && [ ! -d telemetry/browsertest/node_modules/playwright-core ]; then
  echo "deps: installing playwright-core"
  (cd telemetry/browsertest && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund)
fi
if [ $full = 1 ]; then echo "deps: ok"; else echo "deps: ok (demo set; make deps adds the training toolkit and the test tools)"; fi
