package safety

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/energyflow/edge/calibration"
)

// rule decides from a stream of fresh scores whether the energy is out of
// distribution. Implementations allocate nothing per observation.
type rule interface {
	// observe feeds one fresh, finite score and reports whether the rule is
	// in alarm after it.
	observe(x float64) bool
	// alarmed reports the current alarm state without feeding a score.
	alarmed() bool
	// reset forgets the history (after an accepted reset).
	reset()
	// setThreshold sets the threshold the next observations are compared
	// with (the closed-loop band in effect); the history is kept.
	setThreshold(x float64)
}

// nOfM is in alarm while at least n of the last m scores exceeded the
// threshold. A single noisy sample never trips it (n ≥ 2); a sustained
// excursion trips it n−1 ticks after it starts.
type nOfM struct {
	threshold float64
	n, m      int
	window    uint64 // bit i: sample i ticks ago was over the threshold
}

func newNOfM(threshold float64, n, m int) *nOfM {
	return &nOfM{threshold: threshold, n: n, m: m}
}

func (r *nOfM) observe(x float64) bool {
	r.window <<= 1
	if x > r.threshold {
		r.window |= 1
	}
	if r.m < 64 {
		r.window &= 1<<uint(r.m) - 1
	}
	return r.alarmed()
}

func (r *nOfM) count() int {
	c := 0
	for w := r.window; w != 0; w &= w - 1 {
		c++
	}
	return c
}

func (r *nOfM) alarmed() bool          { return r.count() >= r.n }
func (r *nOfM) reset()                 { r.window = 0 }
func (r *nOfM) setThreshold(x float64) { r.threshold = x }

// cusum is a one-sided CUSUM of the scaled exceedance over the threshold:
// S ← max(0, S + (x − threshold)/scale − drift), alarm while S > limit.
type cusum struct {
	threshold, scale, drift, limit float64
	s                              float64
}

func newCUSUM(threshold, scale, drift, limit float64) *cusum {
	return &cusum{threshold: threshold, scale: scale, drift: drift, limit: limit}
}

func (r *cusum) observe(x float64) bool {
	r.s += (x-r.threshold)/r.scale - r.drift
	if !(r.s > 0) { // also maps NaN to 0
		r.s = 0
	}
	return r.alarmed()
}

func (r *cusum) alarmed() bool          { return r.s > r.limit }
func (r *cusum) reset()                 { r.s = 0 }
func (r *cusum) setThreshold(x float64) { r.threshold = x }

// Replay runs a decision rule over a recorded trace of one score (NaN: no
// score at that tick, skipped) against th (th.Scale is needed by the CUSUM
// rule; th.NOfM, when set, is the score's own n_of_m window) and returns the indices at which it trips. After each trip the rule
// restarts, as after an accepted reset. Use it to measure the false-trip
// rate on in-distribution episodes and the detection delay on OOD ones, and
// to pick a threshold for the rule rather than for single samples.
//
// With th.Bands (a closed-loop calibration) the trace starts at arming, one
// entry per running tick: a fresh score is compared with th.At(k), k being
// the ticks (th.BandUnit BandTicks) or the fresh scores (BandFreshScores)
// before it since the start or since the last trip, as the running gate
// does; th.Value is then not used. With th.Ceiling too, one fresh score
// above th.CeilingAt(k) trips as well (the one-tick ceiling).
func Replay(rc RuleConfig, th Threshold, trace []float64) ([]int, error) {
	cfg := Config{Energy: EnergyConfig{Rule: rc}}
	v := th.Value
	if th.Bands != nil {
		v = 0 // not used: the bands are checked below
	}
	cfg.Energy.Scores = []ScoreConfig{{Name: th.Score.String(), Threshold: &v}}
	if rc.Kind == RuleCUSUM {
		cfg.Energy.Scores[0].Scale = &th.Scale
	}
	var errs []error
	for _, e := range unwrapJoin(cfg.Validate()) {
		if strings.Contains(e.Error(), "safety: energy.") {
			errs = append(errs, e)
		}
	}
	if th.Bands != nil {
		errs = append(errs, inPackage(calibration.CheckBands("threshold.bands", th.Bands))...)
		if th.BandUnit != "" && !th.BandUnit.Valid() {
			errs = append(errs, fmt.Errorf("safety: threshold.band_unit: got %q, expected %q or %q", th.BandUnit, calibration.BandTicks, calibration.BandFreshScores))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var r rule
	if rc.Kind == RuleCUSUM {
		r = newCUSUM(th.Value, th.Scale, rc.CUSUM.Drift, rc.CUSUM.Limit)
	} else {
		w := rc.NOfM
		if th.NOfM.M > 0 { // the score's own window
			w = th.NOfM
		}
		r = newNOfM(th.Value, w.N, w.M)
	}
	var trips []int
	ticks := th.BandUnit == calibration.BandTicks
	k := 0 // ticks or fresh scores since the start or the last trip
	for i, x := range trace {
		if math.IsNaN(x) {
			if ticks {
				k++
			}
			continue
		}
		r.setThreshold(th.At(k))
		c := th.CeilingAt(k)
		k++
		if r.observe(x) || x > c {
			trips = append(trips, i)
			r.reset()
			k = 0
		}
	}
	return trips, nil
}

func unwrapJoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
