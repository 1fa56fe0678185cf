//go:build tensorrt && !trtfake

package trt

// The real shim: build it first with
//
//	cmake -S . -B build -DTRT_WITH_CUDA=ON && cmake --build build -j2
//
// (see docs/jetson.md). CGO_LDFLAGS may add -L for a TensorRT or CUDA
// installed elsewhere.

/*
#cgo LDFLAGS: -L${SRCDIR}/../build/trt -lefx_trt -L/usr/local/cuda/lib64 -lnvinfer -lcudart -lstdc++ -lm -ldl -lpthread
*/
import "C"
