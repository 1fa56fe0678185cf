//go:build tensorrt && trtfake

package trt

// Controls of the CPU fake of the C ABI (fake/trt_fake.h), for this
// package's tests. Present only in builds with the "trtfake" tag.

/*
#include <stdlib.h>
#include "fake/trt_fake.h"
*/
import "C"

import "unsafe"

// fakeStats mirrors efx_fake_stats.
type fakeStats struct {
	LiveRuntimes, LiveEngines, LiveAllocs, LiveGraphs int64
	Captures, CaptureFailures, Launches               int64
	EagerEnqueues, CapturedEnqueues, EulerSteps       int64
	H2D, D2H, Syncs                                   int64
}

func fakeReset() { C.efx_fake_reset() }

func fakeConfigure(gpu string, integrated bool, trtVersion int) {
	cs := C.CString(gpu)
	defer C.free(unsafe.Pointer(cs))
	in := C.int32_t(0)
	if integrated {
		in = 1
	}
	C.efx_fake_configure(cs, in, C.int32_t(trtVersion))
}

func fakeFailNext(op string, status int) {
	cs := C.CString(op)
	defer C.free(unsafe.Pointer(cs))
	C.efx_fake_fail_next(cs, C.int32_t(status))
}

func fakeGetStats() fakeStats {
	var s C.efx_fake_stats
	C.efx_fake_get_stats(&s)
	return fakeStats{
		LiveRuntimes: int64(s.live_runtimes), LiveEngines: int64(s.live_engines),
		LiveAllocs: int64(s.live_allocs), LiveGraphs: int64(s.live_graphs),
		Captures: int64(s.captures), CaptureFailures: int64(s.capture_failures), Launches: int64(s.launches),
		EagerEnqueues: int64(s.eager_enqueues), CapturedEnqueues: int64(s.captured_enqueues),
		EulerSteps: int64(s.euler_steps), H2D: int64(s.h2d), D2H: int64(s.d2h), Syncs: int64(s.syncs),
	}
}
