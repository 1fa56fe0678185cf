//go:build tensorrt && trtfake

/* Compiles the CPU fake of the C ABI into package trt for tests
 * (go test -tags "tensorrt trtfake" ./trt/...). */
#include "fake/trt_fake.c"
