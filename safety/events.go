package safety

import (
	"math"
	"time"
)

// Scores are the policy's out-of-distribution scores for one tick, indexed
// by Score. NaN means "no fresh score this tick" (e.g. the scorer has not
// finished); it is never compared with a threshold, and a score missing for
// longer than watchdog.score_max_age trips KindScoreStale. ±Inf trips KindNaN.
type Scores [NumScores]float64

// NoScores is the value for a tick without any fresh score.
func NoScores() Scores {
	var s Scores
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Reason says why the gate stopped.
type Reason struct {
	Kind      Kind      // which monitor or watchdog
	Score     Score     // for KindEnergy and score faults: which score
	Scores    Scores    // the scores of the tripping tick (NaN: none)
	Threshold float64   // for KindEnergy: the threshold of Score (NaN otherwise)
	Tick      int64     // the tick that tripped (the last tick seen, for operator stops)
	Time      time.Time // when it tripped (tick time, or the clock for operator stops)
	Actor     string    // for KindOperator: who stopped it
	Message   string    // human-readable detail with a hint
}

// ScoreSample is one entry of the score trace.
type ScoreSample struct {
	Tick   int64
	Time   time.Time
	Scores Scores
}

// EventType is the type of an Event.
type EventType uint8

// Event types.
const (
	EventTrip            EventType = iota + 1 // the gate latched a stop
	EventReset                                // a reset was accepted; the gate runs again
	EventResetRefused                         // a reset was refused because a cause persists
	EventTrace                                // the score trace around a trip, trace_after ticks after it
	EventRecoveryStart                        // a recovery was accepted; the gate is Recovering
	EventRecoveryEnd                          // a recovery ended (Event.End says how)
	EventRecoveryRefused                      // a recovery was refused (a fault other than the energy monitor's, or nothing to recover from)
)

func (t EventType) String() string {
	switch t {
	case EventTrip:
		return "trip"
	case EventReset:
		return "reset"
	case EventResetRefused:
		return "reset_refused"
	case EventTrace:
		return "trace"
	case EventRecoveryStart:
		return "recovery_start"
	case EventRecoveryEnd:
		return "recovery_end"
	case EventRecoveryRefused:
		return "recovery_refused"
	}
	return "unknown"
}

// Event is published on Options.Events for every trip and reset attempt.
type Event struct {
	Type EventType
	Time time.Time
	Tick int64
	// Reason: for a trip and its trace, why it stopped; for a reset, the stop
	// that was cleared; for a refused reset or recovery, the cause that
	// persists; for a recovery's start, the stop it recovers from; for its
	// end, the stop it cleared (EndRearmed) or the one it ended in.
	Reason Reason
	Actor  string // who reset, or asked for the recovery (reset and recovery events)
	// Recovery is the mode of recovery events; End says how a recovery
	// ended and Duration how long it ran (EventRecoveryEnd).
	Recovery RecoveryMode
	End      RecoveryEnd
	Duration time.Duration
	// Repeated counts, for a refused reset or recovery, the identical
	// refusals (same type, cause and actor) since the previous one that
	// were neither logged nor published: a refusal repeated every tick (a
	// retrying auto start) is logged and published at most every 5 s.
	Repeated int
	// Trace holds the scores up to and including the tripping tick (trip
	// events) or around it (trace events: trace_before before, trace_after
	// after). The slice belongs to the receiver.
	Trace []ScoreSample
}

// ring is the score trace: a fixed ring buffer of the last samples.
type ring struct {
	buf  []ScoreSample
	next int
	n    int
}

func newRing(size int) ring { return ring{buf: make([]ScoreSample, size)} }

func (r *ring) push(s ScoreSample) {
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next = 0
	}
	if r.n < len(r.buf) {
		r.n++
	}
}

// last appends the newest k samples (oldest first) to dst.
func (r *ring) last(dst []ScoreSample, k int) []ScoreSample {
	if k > r.n {
		k = r.n
	}
	start := r.next - k
	if start < 0 {
		start += len(r.buf)
	}
	for i := 0; i < k; i++ {
		dst = append(dst, r.buf[(start+i)%len(r.buf)])
	}
	return dst
}

// Counters are the gate's cumulative counts since it was built, for the
// metrics layer (label trips by Kind.String and clamps by Limit.String).
type Counters struct {
	Ticks         uint64
	Trips         [NumKinds]uint64  // latched stops by reason (KindStartup is never counted)
	Resets        uint64            // accepted resets (including the first arming)
	ResetsRefused uint64            // resets refused because a cause persisted
	Clamps        [NumLimits]uint64 // clamped values by limit
	StoppedTicks  uint64            // ticks spent stopped
	ArmErrors     uint64            // failed Command, Halt or Enable calls
	EventsDropped uint64            // events not delivered because Options.Events was full
	// Recoveries counts accepted recoveries, RecoveryEnds how they ended
	// (by RecoveryEnd), RecoveriesRefused the refused ones.
	Recoveries        uint64
	RecoveryEnds      [NumRecoveryEnds]uint64
	RecoveriesRefused uint64
}
