#!/usr/bin/env bash
# How much of the object fault's box each of the scene's cameras shows, and what
# a palette on that view reads on clean frames and on the box (stop 71,
# research/camera/unseen/README.md, "Stop 71: a watch camera").
#
#   research/camera/unseen/views.sh TASK [CAMERA ...]   (default: corner corner3 corner4 behindGripper corner2)
#
# Per camera: 10 episodes of seeds 50000 on with the box from step 30 and the same
# seeds without it (`visible`: the pixels the box changes), 20 clean episodes of
# seeds 60000 on and 200 of seeds 70000 on for a palette built from the runtime's
# decoding (`table --runtime-frames`). Frames under build/unseen/views/.
set -euo pipefail
cd "$(dirname "$0")/../../.."
t=$1; shift
cams=("$@"); [ ${#cams[@]} -gt 0 ] || cams=(corner corner3 corner4 behindGripper corner2)
d=build/unseen/views
py=.venv/bin/python
for c in "${cams[@]}"; do
  $py -m research.camera.unseen.frames --task "$t" --camera "$c" --out "$d/$t-$c-object" --seed 50000 --episodes 10 --fault object
  $py -m research.camera.unseen.frames --task "$t" --camera "$c" --out "$d/$t-$c-objectfree" --seed 50000 --episodes 10
  echo "== $t $c: what the box changes"
  $py -m research.camera.unseen.visible "$d/$t-$c-object" "$d/$t-$c-objectfree" | tail -n 1
done
for c in "${cams[@]}"; do
  case "$c" in corner|corner4) ;; *) continue ;; esac   # the two views that show the box best
  $py -m research.camera.unseen.frames --task "$t" --camera "$c" --out "$d/$t-$c-clean" --seed 60000 --episodes 20
  $py -m research.camera.unseen.frames --task "$t" --camera "$c" --out "$d/$t-$c-palette" --seed 70000 --episodes 200
  for x in clean object palette; do go run ./research/camera/unseen/decode "$d/$t-$c-$x" "$d/$t-$c-$x.rgb"; done
  echo "== $t $c: a palette from the runtime's decoding"
  $py -m research.camera.unseen.table --clean "$d/$t-$c-clean" --object "$d/$t-$c-object" --runtime-frames "$d/$t-$c-palette" | tail -n 5
done
