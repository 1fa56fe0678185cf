//go:build !cgo

package record

func writeHDF5(string, *Episode, string) error { return ErrNoHDF5 }
