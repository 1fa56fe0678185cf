// Package lograte decides when to log a condition that can repeat on every
// tick of a control loop (a refused reset retried, a failing write, a
// failing evaluation): when it starts, when it changes, and at most once
// per interval while it lasts, with the count of the repeats that were not
// logged. Everything else is counted as metrics by the caller.
//
// It sits under telemetry (logs are what the runtime tells its operator)
// but imports only the standard library, so that the safety gate (which
// otherwise imports only actuators), the runtime, telemetry and the
// drivers can all use it without importing one another: safety must not
// import runtime or telemetry, and the hardware packages know nothing of
// either.
//
// # Concepts
//
// A Repeat tracks one condition, identified by a comparable key (a stop
// reason, a static message). Observe reports whether this occurrence is to
// be logged and how many were not logged since the previous line; End
// marks the condition over, so that its next occurrence is logged at once.
// A Repeat allocates nothing and is not safe for concurrent use: its owner
// serializes it (the loop's goroutine, or a lock it already holds).
package lograte

import "time"

// DefaultEvery is the interval a zero Repeat.Every stands for: at most one
// line every 5 s while a condition lasts.
const DefaultEvery = 5 * time.Second

// Repeat rate-limits the log lines of one repeating condition. The zero
// value is ready to use (with DefaultEvery).
type Repeat[K comparable] struct {
	// Every is the least time between two lines of the same condition
	// (0: DefaultEvery).
	Every time.Duration

	key  K
	on   bool      // the condition is present (observed since the last End)
	last time.Time // when its last line was logged
	n    int       // occurrences not logged since then
}

// Observe records one occurrence of the condition key at now. It reports
// whether to log it: the first occurrence, one whose key differs from the
// previous one's (the condition changed), or the first at least Every after
// the last line. suppressed is the number of occurrences not logged since
// the previous line (of whichever key): log it with this line ("repeated",
// suppressed). A clock that went backwards counts as the interval elapsed.
func (r *Repeat[K]) Observe(now time.Time, key K) (log bool, suppressed int) {
	every := r.Every
	if every <= 0 {
		every = DefaultEvery
	}
	if r.on && key == r.key && now.Sub(r.last) < every && !now.Before(r.last) {
		r.n++
		return false, 0
	}
	suppressed = r.n
	r.key, r.on, r.last, r.n = key, true, now, 0
	return true, suppressed
}

// End marks the condition over. It reports whether it was present and how
// many of its occurrences were not logged since its last line (for an
// "ended" line, if the caller writes one). The next Observe logs at once.
func (r *Repeat[K]) End() (was bool, suppressed int) {
	was, suppressed = r.on, r.n
	r.on, r.n = false, 0
	return was, suppressed
}

// Active reports whether the condition is present (observed since the
// last End).
func (r *Repeat[K]) Active() bool { return r.on }
