#!/usr/bin/env bash
# Restores the baseline bundles into bundles/: the Diffusion Policy baselines
# (bundles/metaworld-<task>-dp, <task>-camera-dp) and the superseded image bundle
# (metaworld-button-press-image). They are evaluation references, not what a robot
# runs, so they live on the branch `baselines` rather than in main's checkout (which
# they would make twice as heavy); scripts/evaluate.sh --policies diffusion needs them.
#
#   scripts/baselines.sh            (or: make baselines)
#
# fetches the branch from origin when this clone lacks it, then copies its bundles/
# over. A baseline trained here (POLICY=diffusion scripts/train-defaults.sh TASK) is
# left alone unless --force.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=baselines
force=0; [ "${1:-}" = --force ] && force=1
if ! git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
  if git rev-parse -q --verify "origin/$ref^{commit}" >/dev/null; then
    ref=origin/$ref
  else
    git fetch origin "$ref:$ref" || { echo "baselines.sh: no branch $ref here or on origin" >&2; exit 1; }
  fi
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git archive "$ref" bundles | tar -x -C "$tmp"
for b in "$tmp"/bundles/*; do
  name=$(basename "$b")
  if [ -e "bundles/$name" ] && [ $force = 0 ]; then
    echo "keep   bundles/$name (there already; --force replaces it)"
  else
    rm -rf "bundles/$name"; cp -r "$b" "bundles/$name"; echo "copied bundles/$name"
  fi
done
