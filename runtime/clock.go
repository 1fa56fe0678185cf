package runtime

import (
	"context"
	"time"
)

// Clock is the time source of the loop. Tests inject a fake that advances
// time instead of sleeping.
type Clock interface {
	Now() time.Time
	// SleepUntil blocks until t or until ctx is done.
	SleepUntil(ctx context.Context, t time.Time) error
}

// SystemClock is the monotonic wall clock.
type SystemClock struct{}

// Now returns time.Now (which carries a monotonic reading).
func (SystemClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps until t on the monotonic clock.
func (SystemClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
