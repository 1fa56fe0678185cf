//go:build !tensorrt

package trt_test

import (
	"errors"
	"fmt"

	"github.com/energyflow/edge/trt"
)

// Without the "tensorrt" build tag the backend says how to get one.
func ExampleNewBackend() {
	_, err := trt.NewBackend(trt.Options{})
	fmt.Println(errors.Is(err, trt.ErrNoTensorRT))
	// Output: true
}
