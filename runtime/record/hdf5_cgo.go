//go:build cgo

package record

/*
#cgo pkg-config: hdf5
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>

static hid_t ef_native_float(void) { return H5T_NATIVE_FLOAT; }
static hid_t ef_native_uchar(void) { return H5T_NATIVE_UCHAR; }
static hid_t ef_native_int64(void) { return H5T_NATIVE_INT64; }
static hid_t ef_plist_default(void) { return H5P_DEFAULT; }
static void ef_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static hid_t ef_group(hid_t parent, const char *name) {
	return H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

static int ef_dataset(hid_t parent, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data) {
	hid_t space = H5Screate_simple(rank, dims, NULL);
	if (space < 0) return -1;
	hid_t ds = H5Dcreate2(parent, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (ds < 0) { H5Sclose(space); return -1; }
	herr_t rc = H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
	H5Dclose(ds); H5Sclose(space);
	return rc < 0 ? -1 : 0;
}

static int ef_attr_str(hid_t obj, const char *name, const char *value) {
	hid_t type = H5Tcopy(H5T_C_S1);
	size_t n = strlen(value);
	H5Tset_size(type, n > 0 ? n : 1);
	H5Tset_strpad(type, H5T_STR_NULLPAD);
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
	herr_t rc = a < 0 ? -1 : H5Awrite(a, type, n > 0 ? value : "");
	if (a >= 0) H5Aclose(a);
	H5Sclose(space); H5Tclose(type);
	return rc < 0 ? -1 : 0;
}

static int ef_attr_i64(hid_t obj, const char *name, long long v) {
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t a = H5Acreate2(obj, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
	herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT64, &v);
	if (a >= 0) H5Aclose(a);
	H5Sclose(space);
	return rc < 0 ? -1 : 0;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"strconv"
	"unsafe"
)

// writeHDF5 writes e to path with libhdf5. HDF5's C library is not
// thread-safe in Debian's serial build, so the calling goroutine is locked
// and callers must not write two files at once (Save is called from one
// recorder goroutine).
func writeHDF5(path string, e *Episode, eventsJSON string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.ef_quiet()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	f := C.H5Fcreate(cpath, C.H5F_ACC_TRUNC, C.ef_plist_default(), C.ef_plist_default())
	if f < 0 {
		return fmt.Errorf("record: create %s: HDF5 error", path)
	}
	w := &h5w{path: path}
	data := w.group(f, "data")
	demo := w.group(data, "demo_0")
	obs := w.group(demo, "obs")
	for _, k := range sortedKeys(e.Obs) {
		w.series(obs, k, e.Obs[k])
	}
	w.series(demo, "actions", e.Actions)
	scores := w.group(demo, "scores")
	for _, k := range sortedKeys(e.Scores) {
		w.series(scores, k, e.Scores[k])
	}
	w.attrStr(data, "env", e.Env)
	w.attrStr(data, "source", "energyflow-runtime")
	w.attrI64(data, "total", int64(e.Actions.Steps()))
	w.attrI64(demo, "num_samples", int64(e.Actions.Steps()))
	w.attrI64(demo, "success", b2i(e.Success))
	w.attrStr(demo, "stop_reason", e.StopReason)
	w.attrStr(demo, "safety_events", eventsJSON)
	for _, g := range []C.hid_t{scores, obs, demo, data} {
		if g >= 0 {
			C.H5Gclose(g)
		}
	}
	if C.H5Fclose(f) < 0 && w.err == nil {
		w.err = fmt.Errorf("record: close %s: HDF5 error", path)
	}
	return w.err
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// h5w remembers the first error so the writer reads straight through.
type h5w struct {
	path string
	err  error
}

func (w *h5w) fail(what string) {
	if w.err == nil {
		w.err = fmt.Errorf("record: %s: writing %s failed (HDF5 error)", w.path, what)
	}
}

func (w *h5w) group(parent C.hid_t, name string) C.hid_t {
	if w.err != nil {
		return -1
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	g := C.ef_group(parent, cn)
	if g < 0 {
		w.fail("group " + name)
	}
	return g
}

func (w *h5w) series(parent C.hid_t, name string, s *Series) {
	if w.err != nil {
		return
	}
	dims := []C.hsize_t{C.hsize_t(s.Steps())}
	for _, d := range s.Shape {
		dims = append(dims, C.hsize_t(d))
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var rc C.int
	cdims := (*C.hsize_t)(C.malloc(C.size_t(len(dims)) * C.size_t(unsafe.Sizeof(C.hsize_t(0)))))
	defer C.free(unsafe.Pointer(cdims))
	copy(unsafe.Slice(cdims, len(dims)), dims)
	switch {
	case s.U8 != nil && len(s.U8) > 0:
		rc = C.ef_dataset(parent, cn, C.ef_native_uchar(), C.int(len(dims)), cdims, unsafe.Pointer(&s.U8[0]))
	case len(s.F32) > 0:
		rc = C.ef_dataset(parent, cn, C.ef_native_float(), C.int(len(dims)), cdims, unsafe.Pointer(&s.F32[0]))
	default:
		w.fail(name + " (empty)")
		return
	}
	if rc < 0 {
		w.fail("dataset " + name + " " + strconv.Itoa(len(dims)) + "-d")
	}
}

func (w *h5w) attrStr(obj C.hid_t, name, value string) {
	if w.err != nil {
		return
	}
	cn, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cv))
	if C.ef_attr_str(obj, cn, cv) < 0 {
		w.fail("attribute " + name)
	}
}

func (w *h5w) attrI64(obj C.hid_t, name string, v int64) {
	if w.err != nil {
		return
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	if C.ef_attr_i64(obj, cn, C.longlong(v)) < 0 {
		w.fail("attribute " + name)
	}
}

// Supported reports whether this build writes HDF5 (a cgo build with libhdf5).
func Supported() bool { return true }
