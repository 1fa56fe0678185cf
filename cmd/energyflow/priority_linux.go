package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// setNice gives every thread of this process the niceness nice (the
// systemd unit's Nice=, for the demo): Linux keeps a niceness per thread,
// and threads started later inherit their creator's, so each existing one
// is set. Children started afterwards (the simulator) inherit it too. It
// fails without root or CAP_SYS_NICE for a negative nice.
func setNice(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("set niceness %d: %w", nice, err)
	}
	var errs []error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("set niceness %d: %w — run as root, or grant CAP_SYS_NICE", nice, errs[0])
	}
	return nil
}
