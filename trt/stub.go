//go:build !tensorrt

package trt

import "github.com/energyflow/edge/engines"

// NewBackend returns an error wrapping ErrNoTensorRT: this binary was built
// without the "tensorrt" build tag.
func NewBackend(opts Options) (engines.Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return nil, ErrNoTensorRT
}

// Probe returns an error wrapping ErrNoTensorRT: this binary was built
// without the "tensorrt" build tag.
func Probe(device int) (DeviceInfo, error) {
	return DeviceInfo{}, ErrNoTensorRT
}
