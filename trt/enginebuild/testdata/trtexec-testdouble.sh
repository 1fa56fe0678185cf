#!/bin/sh
# TEST DOUBLE of NVIDIA's trtexec — NOT TensorRT. trtexec cannot exist on
# the machines CI runs on; this script stands in for it in
# trt/enginebuild's tests. It checks its arguments the way the builder
# must pass them, writes a fake plan and a timing cache, and prints the
# lines of a real trtexec log the builder reads (TensorRT version, device).
#
# Environment (set by the tests):
#   TRTEXEC_TESTDOUBLE_LOG      file that receives one argument per line
#   TRTEXEC_TESTDOUBLE_VERSION  version to report (default 10.3.0)
#   TRTEXEC_TESTDOUBLE_GPU      device to report (default Orin)
#   TRTEXEC_TESTDOUBLE_FAIL     1: fail like a failed build
set -eu
log=${TRTEXEC_TESTDOUBLE_LOG:-/dev/null}
: >"$log"
onnx='' save='' cache='' min='' opt='' max='' fp16=0 obey=0 lp='' lo='' skip=0
for a in "$@"; do
  printf '%s\n' "$a" >>"$log"
  case $a in
    --onnx=*) onnx=${a#*=} ;;
    --saveEngine=*) save=${a#*=} ;;
    --timingCacheFile=*) cache=${a#*=} ;;
    --minShapes=*) min=${a#*=} ;;
    --optShapes=*) opt=${a#*=} ;;
    --maxShapes=*) max=${a#*=} ;;
    --fp16) fp16=1 ;;
    --precisionConstraints=obey) obey=1 ;;
    --layerPrecisions=*) lp=${a#*=} ;;
    --layerOutputTypes=*) lo=${a#*=} ;;
    --memPoolSize=workspace:*M) ;;
    --skipInference) skip=1 ;;
    *) echo "[E] Unknown option: $a" ; exit 1 ;;
  esac
done
echo "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec $*"
[ -f "$onnx" ] || { echo "[E] Cannot open ONNX file: $onnx"; exit 1; }
if [ -z "$save" ] || [ -z "$min" ] || [ -z "$opt" ] || [ -z "$max" ] || [ -z "$cache" ] || [ $skip = 0 ]; then
  echo "[E] test double: missing --saveEngine, shapes, --timingCacheFile or --skipInference"; exit 1
fi
if [ $fp16 = 1 ] && { [ $obey = 0 ] || [ -z "$lp" ] || [ "$lp" != "$lo" ]; }; then
  echo "[E] test double: --fp16 without --precisionConstraints=obey and matching --layerPrecisions/--layerOutputTypes"; exit 1
fi
if [ "${TRTEXEC_TESTDOUBLE_FAIL:-0}" = 1 ]; then
  echo "[E] Error[4]: [network.cpp::validate::3100] simulated build failure"
  echo "&&&& FAILED TensorRT.trtexec"
  exit 1
fi
echo "[I] === Device Information ==="
echo "[I] Selected Device: ${TRTEXEC_TESTDOUBLE_GPU:-Orin}"
echo "[I] "
echo "[I] TensorRT version: ${TRTEXEC_TESTDOUBLE_VERSION:-10.3.0}"
printf 'TRTEXEC-TESTDOUBLE-PLAN\nmin=%s\nopt=%s\nmax=%s\nfp16=%s\n' "$min" "$opt" "$max" "$fp16" >"$save"
echo "timing" >>"$cache"
echo "[I] Engine built in 1.0 sec."
echo "&&&& PASSED TensorRT.trtexec"
