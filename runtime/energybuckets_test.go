package runtime

import (
	"math"
	"slices"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/telemetry"
)

func TestEnergyBucketsFollowTheCalibration(t *testing.T) {
	// The shipped ButtonPress bundle's calibration: 2749 of 3208 live samples
	// fell in +Inf with the fixed −10…20 buckets.
	bp := &calibration.Block{Scores: map[string]calibration.ScoreStats{"energy": {Mean: 168.3, Std: 150.4,
		Quantiles: map[string]float64{"50": 161.1, "99": 423.7, "99.9": 432.0}}},
		Recommended: calibration.Recommendation{Score: "energy", Threshold: 432.0}}
	centered := &calibration.Block{Scores: bp.Scores, Recommended: calibration.Recommendation{Score: "centered_energy", Threshold: -3}}
	closedLoop := *bp
	closedLoop.ClosedLoop = &calibration.ClosedLoop{Score: "energy", Bands: []calibration.Band{{From: 0, Threshold: 610}, {From: 10, Threshold: 480}}}
	closedLoopHigh := *bp // a band above q99.9 and the recommendation stretches the span
	closedLoopHigh.ClosedLoop = &calibration.ClosedLoop{Score: "energy", Bands: []calibration.Band{{From: 0, Threshold: 700}, {From: 10, Threshold: 480}}}
	cases := []struct {
		name        string
		cal         *calibration.Block
		lo, hi      float64 // first and last bound
		wantBound   float64 // a bound that must be present (NaN: none)
		wantDefault bool
	}{
		{"calibrated energy stop", bp, 168.3 - 4*150.4, 168.3 + 7*150.4, 432.0, false},
		{"closed-loop bands: the largest is a bound", &closedLoop, 168.3 - 4*150.4, 168.3 + 7*150.4, 610, false},
		{"closed-loop bands keep the recommendation a bound", &closedLoopHigh, 168.3 - 4*150.4, 700 + 4*150.4, 432.0, false},
		{"threshold on another score", centered, 168.3 - 4*150.4, 168.3 + 7*150.4, math.NaN(), false},
		{"no calibration", nil, 0, 0, math.NaN(), true},
		{"no energy statistics", &calibration.Block{}, 0, 0, math.NaN(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := energyBuckets(c.cal)
			if c.wantDefault {
				if !slices.Equal(b, telemetry.DefaultEnergyBuckets()) {
					t.Fatalf("buckets %v, want the defaults", b)
				}
				return
			}
			if !slices.IsSorted(b) || len(slices.Compact(slices.Clone(b))) != len(b) {
				t.Fatalf("bounds not strictly increasing: %v", b)
			}
			if math.Abs(b[0]-c.lo) > 1e-6 || math.Abs(b[len(b)-1]-c.hi) > 1e-6 {
				t.Fatalf("span %g…%g, want %g…%g", b[0], b[len(b)-1], c.lo, c.hi)
			}
			if !math.IsNaN(c.wantBound) && !slices.Contains(b, c.wantBound) {
				t.Fatalf("threshold %g is not a bound: %v", c.wantBound, b)
			}
			extra := 1 // the recommended threshold
			if c.cal.ClosedLoop != nil {
				extra++ // and the largest band threshold
			}
			if n := len(b); n < energyBucketCount+1 || n > energyBucketCount+1+extra {
				t.Fatalf("%d bounds", n)
			}
		})
	}
}

// Watching the state score, the histogram follows the state_energy block:
// its held-out statistics and q99.9 (the default threshold), or the
// largest band of a closed-loop calibration of that score.
func TestScoreBucketsFollowTheStateTerm(t *testing.T) {
	se := &engines.StateEnergySpec{Calibration: engines.StateEnergyCalibration{Mean: 0.5, Std: 1,
		Quantiles: map[string]float64{"50": 0.3, "99.9": 4.25}}}
	cl := &calibration.Block{ClosedLoop: &calibration.ClosedLoop{Score: "state_energy",
		Bands: []calibration.Band{{From: 0, Threshold: 6.5}, {From: 10, Threshold: 5}}}}
	cases := []struct {
		name      string
		m         *engines.Manifest
		lo, hi    float64
		wantBound float64
	}{
		{"held-out q99.9", &engines.Manifest{StateEnergy: se}, 0.5 - 4, 4.25 + 4, 4.25},
		{"closed loop of the state score", &engines.Manifest{StateEnergy: se, Calibration: cl}, 0.5 - 4, 6.5 + 4, 6.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := scoreBuckets(c.m, engines.ScoreStateEnergy)
			if !slices.IsSorted(b) || math.Abs(b[0]-c.lo) > 1e-9 || math.Abs(b[len(b)-1]-c.hi) > 1e-9 || !slices.Contains(b, c.wantBound) {
				t.Fatalf("buckets %v: want %g…%g with the bound %g", b, c.lo, c.hi, c.wantBound)
			}
		})
	}
	if b := scoreBuckets(&engines.Manifest{}, engines.ScoreStateEnergy); !slices.Equal(b, telemetry.DefaultEnergyBuckets()) {
		t.Errorf("no state term: %v, want the defaults", b)
	}
}
