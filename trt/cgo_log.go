//go:build tensorrt

package trt

/*
#include "shim/efx_trt.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"runtime/cgo"
)

// efxGoLog receives TensorRT's log messages from the shim's logger; the shim
// serializes calls, but they may come from any thread.
//
//export efxGoLog
func efxGoLog(user C.uintptr_t, severity C.int32_t, msg *C.char) {
	lg, ok := cgo.Handle(user).Value().(*slog.Logger)
	if !ok || lg == nil {
		return
	}
	lvl := slog.LevelDebug
	switch severity {
	case C.EFX_LOG_INTERNAL_ERROR, C.EFX_LOG_ERROR:
		lvl = slog.LevelError
	case C.EFX_LOG_WARNING:
		lvl = slog.LevelWarn
	case C.EFX_LOG_INFO:
		lvl = slog.LevelInfo
	}
	lg.Log(context.Background(), lvl, C.GoString(msg), "source", "tensorrt")
}
