#!/usr/bin/env bash
# Installs EnergyFlow Edge as a systemd service on the robot computer.
#
#   sudo deploy/install.sh [--bundle DIR] [--config FILE]
#
# Builds the binary (or uses bin/energyflow), installs it to /usr/local/bin,
# ONNX Runtime's library to /usr/local/lib/energyflow, the unit to
# /etc/systemd/system, creates the 'energyflow' system user (groups video and
# dialout for cameras and serial ports), writes an example config to
# /etc/energyflow/config.yaml if none exists, and enables the service.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=""; config=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (sudo)" >&2; exit 1; }

cd "$root"
[ -x bin/energyflow ] || go build -o bin/energyflow ./cmd/energyflow
./scripts/install-onnxruntime.sh
install -D -m 0755 bin/energyflow /usr/local/bin/energyflow
arch=$(uname -m); case "$arch" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; esac
install -D -m 0644 ".deps/onnxruntime/linux-$arch/libonnxruntime.so.1" /usr/local/lib/energyflow/libonnxruntime.so.1

id energyflow >/dev/null 2>&1 || useradd --system --home-dir /var/lib/energyflow --shell /usr/sbin/nologin energyflow
usermod -a -G video,dialout energyflow
install -d -m 0750 -o energyflow -g energyflow /var/lib/energyflow /var/log/energyflow
install -d -m 0755 /etc/energyflow
if [ -n "$bundle" ]; then
  rm -rf /var/lib/energyflow/bundle && cp -r "$bundle" /var/lib/energyflow/bundle
  chown -R energyflow:energyflow /var/lib/energyflow/bundle
fi
if [ -n "$config" ]; then
  install -m 0640 -g energyflow "$config" /etc/energyflow/config.yaml
elif [ ! -f /etc/energyflow/config.yaml ]; then
  /usr/local/bin/energyflow config example > /etc/energyflow/config.yaml
  chgrp energyflow /etc/energyflow/config.yaml; chmod 0640 /etc/energyflow/config.yaml
  echo "install.sh: wrote an example /etc/energyflow/config.yaml — edit it, then: energyflow config check --config /etc/energyflow/config.yaml"
fi
install -m 0644 deploy/energyflow.service /etc/systemd/system/energyflow.service
systemctl daemon-reload
systemctl enable energyflow.service
echo "install.sh: installed. Start with: systemctl start energyflow; logs: journalctl -u energyflow -f"
