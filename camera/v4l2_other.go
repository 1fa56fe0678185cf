//go:build !linux

package camera

import (
	"context"
	"fmt"
	"log/slog"
)

// V4L2 is not available off Linux.
type V4L2 struct{}

// OpenV4L2 fails: V4L2 exists only on Linux.
func OpenV4L2(Config, *slog.Logger) (*V4L2, error) {
	return nil, fmt.Errorf("%w: V4L2 capture needs Linux", ErrUnsupported)
}

// Read implements Source.
func (*V4L2) Read(context.Context, *Frame) error { return ErrUnsupported }

// Info implements Source.
func (*V4L2) Info() Info { return Info{} }

// Halt implements Source.
func (*V4L2) Halt(context.Context) error { return nil }

// Close implements io.Closer.
func (*V4L2) Close() error { return nil }

// List fails: V4L2 exists only on Linux.
func List() ([]Device, error) {
	return nil, fmt.Errorf("%w: listing cameras needs Linux", ErrUnsupported)
}
