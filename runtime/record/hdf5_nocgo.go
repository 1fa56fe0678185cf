//go:build !cgo

package record

func writeHDF5(string, *Episode, string) error { return ErrNoHDF5 }

// Supported reports whether this build writes HDF5 (a cgo build with libhdf5).
func Supported() bool { return false }
