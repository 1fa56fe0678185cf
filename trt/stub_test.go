//go:build !tensorrt

package trt

import (
	"errors"
	"strings"
	"testing"
)

func TestNewBackendWithoutTensorRT(t *testing.T) {
	b, err := NewBackend(Options{})
	if b != nil || !errors.Is(err, ErrNoTensorRT) {
		t.Fatalf("NewBackend = %v, %v; want nil, ErrNoTensorRT", b, err)
	}
	if !strings.Contains(err.Error(), "built without TensorRT: rebuild with -tags tensorrt") {
		t.Errorf("message %q does not say how to get TensorRT", err)
	}
	if _, err := Probe(0); !errors.Is(err, ErrNoTensorRT) {
		t.Errorf("Probe: %v", err)
	}
	if _, err := NewBackend(Options{Precision: "int8"}); err == nil || errors.Is(err, ErrNoTensorRT) {
		t.Errorf("invalid options: %v, want a validation error first", err)
	}
}
