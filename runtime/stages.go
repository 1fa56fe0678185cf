package runtime

import (
	"slices"
	"sync"
	"time"

	"github.com/energyflow/edge/telemetry"
)

// Stage is one stage of the control path whose latency the runtime
// records (docs/telemetry.md, "Stage latency"). A stage the bundle does
// not have (no camera, no state term, no re-score) is never recorded.
type Stage uint8

// The stages, in the order a camera frame and a plan pass through them.
const (
	StageCameraDecode Stage = iota // one camera frame JPEG/YUV → RGB (App.cameraLoop)
	StagePreprocess                // resize, crop and normalisation of one frame (visionPipeline.Encode)
	StageEncoder                   // the vision graph on one frame (visionPipeline.Encode)
	StageSample                    // one whole plan: all K sampler steps (the inference goroutine)
	StageSampleStep                // StageSample divided by its step count K, one per plan
	StageRescore                   // the energy re-score of the committed chunk (the re-scoring goroutine)
	StageStateTerm                 // the state term on the newest observation (Loop.scoreState)
	StageCommandWrite              // the arm command write of the safety gate (timedArm.Command)
	StageArmRead                   // the arm state read that opens each tick (Loop.tick)
	numStages
)

// String returns the stage's name as /metrics and the live view label it.
func (s Stage) String() string {
	switch s {
	case StageCameraDecode:
		return "camera_decode"
	case StagePreprocess:
		return "preprocess"
	case StageEncoder:
		return "encoder"
	case StageSample:
		return "sample"
	case StageSampleStep:
		return "sample_step"
	case StageRescore:
		return "rescore"
	case StageStateTerm:
		return "state_term"
	case StageCommandWrite:
		return "command_write"
	case StageArmRead:
		return "arm_read"
	}
	return "unknown"
}

// StageWindow is how many recent durations StageTimes keeps per stage:
// at 30 camera frames or 20 ticks a second, the last 17 to 25 seconds; for
// a plan every few ticks, a few minutes.
const StageWindow = 512

// StageObserver receives every duration StageTimes records, as it is
// recorded (telemetry.Metrics: the stage latency histogram). It must not
// block or allocate.
type StageObserver interface {
	ObserveStage(stage string, d time.Duration)
}

// StageStats are a stage's recorded durations: how many since the start,
// and the median and 90th percentile (nearest rank) of the last
// StageWindow of them; zero when none.
type StageStats struct {
	Stage    Stage
	Count    uint64
	P50, P90 time.Duration
}

// StageTimes keeps, per stage, the last StageWindow durations in a fixed
// ring, and answers their median and 90th percentile. Record allocates
// nothing; it and the reads are safe for concurrent use (the camera
// reader, the inference and re-scoring goroutines and the loop record,
// the live view reads). The zero value is ready; a nil *StageTimes
// records nothing.
type StageTimes struct {
	mu    sync.Mutex
	rings [numStages]stageRing
	obs   StageObserver
}

// stageRing is one stage's recent durations; n counts every Record, so the
// next slot is n % StageWindow.
type stageRing struct {
	d [StageWindow]time.Duration
	n uint64
}

var _ telemetry.StageSource = (*StageTimes)(nil)

// SetObserver passes every later Record to o as well (nil: to nothing).
// The App sets the live view's metrics once they exist: they are built
// after the parts that record.
func (t *StageTimes) SetObserver(o StageObserver) {
	t.mu.Lock()
	t.obs = o
	t.mu.Unlock()
}

// Record stores one duration of stage s.
func (t *StageTimes) Record(s Stage, d time.Duration) {
	if t == nil || s >= numStages {
		return
	}
	t.mu.Lock()
	r := &t.rings[s]
	r.d[r.n%StageWindow] = d
	r.n++
	obs := t.obs
	t.mu.Unlock()
	if obs != nil {
		obs.ObserveStage(s.String(), d)
	}
}

// Since records the time from t0 to now as one duration of stage s.
func (t *StageTimes) Since(s Stage, t0 time.Time) { t.Record(s, time.Since(t0)) }

// Stats returns stage s's count and quantiles.
func (t *StageTimes) Stats(s Stage) StageStats {
	var buf [StageWindow]time.Duration
	return t.stats(s, buf[:0])
}

// stats is Stats with the sort's scratch given (capacity StageWindow).
func (t *StageTimes) stats(s Stage, scratch []time.Duration) StageStats {
	st := StageStats{Stage: s}
	if t == nil || s >= numStages {
		return st
	}
	t.mu.Lock()
	r := &t.rings[s]
	st.Count = r.n
	w := scratch[:min(r.n, StageWindow)]
	copy(w, r.d[:len(w)])
	t.mu.Unlock()
	if len(w) == 0 {
		return st
	}
	slices.Sort(w)
	st.P50, st.P90 = nearestRank(w, 50), nearestRank(w, 90)
	return st
}

// nearestRank is the smallest of the sorted durations with at least pct %
// of them at or below it.
func nearestRank(sorted []time.Duration, pct int) time.Duration {
	k := (pct*len(sorted) + 99) / 100 // ⌈pct·n/100⌉
	return sorted[max(k, 1)-1]
}

// StageLatencies implements telemetry.StageSource: every stage recorded
// at least once, in pipeline order.
func (t *StageTimes) StageLatencies() []telemetry.StageLatency {
	var out []telemetry.StageLatency
	scratch := make([]time.Duration, 0, StageWindow)
	for s := range numStages {
		st := t.stats(s, scratch)
		if st.Count == 0 {
			continue
		}
		out = append(out, telemetry.StageLatency{Stage: s.String(), Count: st.Count, P50: st.P50, P90: st.P90})
	}
	return out
}
