package telemetry

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPUTime is the CPU time of the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID): encode cost independent of how busy the
// machine is. The caller must be locked to its thread.
func threadCPUTime() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
