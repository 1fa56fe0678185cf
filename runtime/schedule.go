package runtime

import (
	"context"
	"time"
)

// Scheduler produces ticks at absolute deadlines start + n·period. A late
// tick is not made up: the scheduler skips to the next deadline still in the
// future, counts the missed ones, and never lets the phase drift.
type Scheduler struct {
	clock  Clock
	period time.Duration
	start  time.Time
	next   int64 // index of the next deadline
	missed int64
}

// Tick describes one wake-up of the loop.
type Tick struct {
	N        int64         // deadline index since start
	Deadline time.Time     // the deadline this tick runs for
	Due      time.Time     // when the loop was first due: the earliest skipped deadline, else Deadline
	Woke     time.Time     // when the loop actually woke
	Jitter   time.Duration // Woke - Deadline
	Missed   int64         // deadlines skipped before this one
}

// NewScheduler starts a schedule whose first deadline is one period from now.
func NewScheduler(clock Clock, period time.Duration) *Scheduler {
	return &Scheduler{clock: clock, period: period, start: clock.Now(), next: 1}
}

// Period returns the tick period.
func (s *Scheduler) Period() time.Duration { return s.period }

// Missed returns how many deadlines have been skipped so far.
func (s *Scheduler) Missed() int64 { return s.missed }

// Wait sleeps until the next deadline and returns it. If the caller is so
// late that deadlines have passed, those are skipped and counted.
func (s *Scheduler) Wait(ctx context.Context) (Tick, error) {
	now := s.clock.Now()
	due := s.start.Add(time.Duration(s.next) * s.period)
	firstDue := due
	var skipped int64
	if late := now.Sub(due); late > s.period {
		skipped = int64(late / s.period)
		s.next += skipped
		s.missed += skipped
		due = s.start.Add(time.Duration(s.next) * s.period)
	}
	if err := s.clock.SleepUntil(ctx, due); err != nil {
		return Tick{}, err
	}
	woke := s.clock.Now()
	t := Tick{N: s.next, Deadline: due, Due: firstDue, Woke: woke, Jitter: woke.Sub(due), Missed: skipped}
	s.next++
	return t, nil
}
