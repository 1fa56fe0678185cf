package engines

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The first two members of OrtApiBase (onnxruntime_c_api.h), stable since 1.0.
typedef struct {
	const void* (*GetApi)(uint32_t version);
	const char* (*GetVersionString)(void);
} ef_ort_api_base;
typedef ef_ort_api_base* (*ef_get_api_base)(void);

// ef_probe loads name, resolves its absolute path, reads its version and
// asks for C API version api. Returns 0 on success; 1 when dlopen fails,
// 2 when OrtGetApiBase is missing. The library stays loaded when it offers
// the API (onnxruntime_go opens it again), and is closed otherwise.
static int ef_probe(const char* name, uint32_t api, char* path, size_t pathlen,
                    char* ver, size_t verlen, int* api_ok, char* err, size_t errlen) {
	void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		const char* e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		return 1;
	}
	void* sym = dlsym(h, "OrtGetApiBase");
	if (sym == NULL) {
		const char* e = dlerror();
		strncpy(err, e ? e : "no OrtGetApiBase", errlen - 1);
		dlclose(h);
		return 2;
	}
	Dl_info info;
	if (dladdr(sym, &info) != 0 && info.dli_fname != NULL) {
		strncpy(path, info.dli_fname, pathlen - 1);
	}
	ef_ort_api_base* base = ((ef_get_api_base)sym)();
	const char* v = base->GetVersionString();
	strncpy(ver, v ? v : "unknown", verlen - 1);
	*api_ok = base->GetApi(api) != NULL;
	if (!*api_ok) {
		dlclose(h);
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// ortAPIVersion is the C API version onnxruntime_go v1.27.0 asks for
// (ORT_API_VERSION in its header); ONNX Runtime 1.24 or newer provides it.
const (
	ortAPIVersion  = 24
	ortMinVersion  = "1.24"
	ortInstallHint = "run `make deps` (scripts/install-onnxruntime.sh installs ONNX Runtime 1.30 into .deps/), or set ONNXRUNTIME_LIB to the absolute path of libonnxruntime.so.1"
)

// ErrNoORT reports that no usable ONNX Runtime library was found.
var ErrNoORT = errors.New("engines: ONNX Runtime library not found or too old")

// ortLib is a probed library: its absolute path and version.
type ortLib struct {
	Path    string
	Version string
	Source  string // "config", "ONNXRUNTIME_LIB", "system", "project"
}

// probeORT loads name (a path or a bare soname searched by the dynamic
// loader) and checks that it provides the C API onnxruntime_go needs.
func probeORT(name string) (ortLib, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var path, ver, msg [4096]C.char
	var apiOK C.int
	rc := C.ef_probe(cname, C.uint32_t(ortAPIVersion), &path[0], C.size_t(len(path)), &ver[0], C.size_t(len(ver)), &apiOK, &msg[0], C.size_t(len(msg)))
	switch rc {
	case 1:
		return ortLib{}, fmt.Errorf("cannot load %s: %s", name, C.GoString(&msg[0]))
	case 2:
		return ortLib{}, fmt.Errorf("%s is not ONNX Runtime (no OrtGetApiBase)", name)
	}
	lib := ortLib{Path: C.GoString(&path[0]), Version: C.GoString(&ver[0])}
	if lib.Path == "" {
		lib.Path = name
	}
	if abs, err := filepath.Abs(lib.Path); err == nil {
		lib.Path = abs
	}
	if apiOK == 0 {
		return lib, fmt.Errorf("%s is ONNX Runtime %s, too old: need %s or newer (C API %d)", lib.Path, lib.Version, ortMinVersion, ortAPIVersion)
	}
	return lib, nil
}

// findORT finds the ONNX Runtime library in the documented order:
//  1. configured (the path given in ORTOptions.LibraryPath),
//  2. the ONNXRUNTIME_LIB environment variable,
//  3. the system's library search path (LD_LIBRARY_PATH, ld.so.cache, /usr/lib…),
//  4. the project's own install location, .deps/onnxruntime/linux-<arch>/
//     under $ENERGYFLOW_ROOT, or under the executable's or the working
//     directory's ancestors.
//
// A configured or ONNXRUNTIME_LIB path is authoritative: if it is unusable
// the search stops with its error. Unusable system or project copies are
// skipped and reported if nothing else works.
func findORT(configured string) (ortLib, error) {
	if configured != "" {
		lib, err := probeORT(configured)
		if err != nil {
			return lib, fmt.Errorf("%w: configured library: %v", ErrNoORT, err)
		}
		lib.Source = "config"
		return lib, nil
	}
	if env := os.Getenv("ONNXRUNTIME_LIB"); env != "" {
		lib, err := probeORT(env)
		if err != nil {
			return lib, fmt.Errorf("%w: ONNXRUNTIME_LIB: %v — unset it or point it at ONNX Runtime ≥ %s", ErrNoORT, err, ortMinVersion)
		}
		lib.Source = "ONNXRUNTIME_LIB"
		return lib, nil
	}
	var tried []string
	for _, name := range []string{"libonnxruntime.so.1", "libonnxruntime.so"} {
		lib, err := probeORT(name)
		if err == nil {
			lib.Source = "system"
			return lib, nil
		}
		tried = append(tried, "system "+name+": "+err.Error())
	}
	for _, p := range projectLibCandidates() {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		lib, err := probeORT(p)
		if err == nil {
			lib.Source = "project"
			return lib, nil
		}
		tried = append(tried, err.Error())
	}
	return ortLib{}, fmt.Errorf("%w (looked at ONNXRUNTIME_LIB, the system library path and %s): %s — %s",
		ErrNoORT, filepath.Join(".deps", "onnxruntime", ortArchDir(), "libonnxruntime.so.1"), strings.Join(tried, "; "), ortInstallHint)
}

func ortArchDir() string {
	switch runtime.GOARCH {
	case "amd64":
		return "linux-x64"
	default:
		return "linux-" + runtime.GOARCH
	}
}

// projectLibCandidates lists where `make deps` may have installed the
// library: under $ENERGYFLOW_ROOT, then under the ancestors of the
// executable and of the working directory.
func projectLibCandidates() []string {
	rel := filepath.Join(".deps", "onnxruntime", ortArchDir(), "libonnxruntime.so.1")
	var roots []string
	if r := os.Getenv("ENERGYFLOW_ROOT"); r != "" {
		roots = append(roots, r)
	}
	ancestors := func(dir string, n int) {
		for i := 0; i < n && dir != ""; i++ {
			roots = append(roots, dir)
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		ancestors(filepath.Dir(exe), 4)
	}
	if wd, err := os.Getwd(); err == nil {
		ancestors(wd, 6)
	}
	out := make([]string, 0, len(roots))
	seen := map[string]bool{}
	for _, r := range roots {
		p := filepath.Join(r, rel)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// CheckORTLibrary reports whether path is a loadable ONNX Runtime of a
// supported version (for `energyflow bundle verify` and tests). The error
// wraps ErrNoORT.
func CheckORTLibrary(path string) error {
	if _, err := probeORT(path); err != nil {
		return fmt.Errorf("%w: %v — %s", ErrNoORT, err, ortInstallHint)
	}
	return nil
}
