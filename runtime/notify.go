package runtime

import (
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks systemd's sd_notify protocol (Type=notify units): READY,
// STATUS, WATCHDOG and STOPPING. Without NOTIFY_SOCKET every call is a no-op.
// The loop pings the watchdog only from healthy ticks, so a hung or faulted
// loop stops the pings and systemd restarts the service.
type Notifier struct {
	mu       sync.Mutex
	interval time.Duration // watchdog ping interval (half of WatchdogSec), 0 = disabled
	last     time.Time
}

// NewNotifier reads the watchdog settings systemd passed in the environment.
func NewNotifier() *Notifier {
	n := &Notifier{}
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		n.interval = d / 2
	}
	return n
}

// WatchdogInterval returns how often Healthy pings (0 when disabled).
func (n *Notifier) WatchdogInterval() time.Duration { return n.interval }

// Ready tells systemd that start-up finished.
func (n *Notifier) Ready(status string) {
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady+"\nSTATUS="+status)
}

// Status updates the one-line status shown by systemctl status.
func (n *Notifier) Status(status string) { _, _ = daemon.SdNotify(false, "STATUS="+status) }

// Stopping tells systemd that shutdown began.
func (n *Notifier) Stopping() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) }

// Healthy is called by the loop after every healthy tick; it pings the
// watchdog at most once per interval.
func (n *Notifier) Healthy(now time.Time) {
	if n.interval == 0 {
		return
	}
	n.mu.Lock()
	due := now.Sub(n.last) >= n.interval
	if due {
		n.last = now
	}
	n.mu.Unlock()
	if due {
		_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
	}
}
