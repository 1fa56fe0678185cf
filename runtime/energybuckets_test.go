package runtime

import (
	"math"
	"slices"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/telemetry"
)

func TestEnergyBucketsFollowTheCalibration(t *testing.T) {
	// The shipped ButtonPress bundle's calibration: 2749 of 3208 live samples
	// fell in +Inf with the fixed −10…20 buckets.
	bp := &engines.Calibration{Scores: map[string]engines.ScoreStats{"energy": {Mean: 168.3, Std: 150.4,
		Quantiles: map[string]float64{"50": 161.1, "99": 423.7, "99.9": 432.0}}},
		Recommended: engines.Recommendation{Score: "energy", Threshold: 432.0}}
	centered := &engines.Calibration{Scores: bp.Scores, Recommended: engines.Recommendation{Score: "centered_energy", Threshold: -3}}
	closedLoop := *bp
	closedLoop.ClosedLoop = &engines.ClosedLoop{Score: "energy", Bands: []engines.ClosedLoopBand{{From: 0, Threshold: 610}, {From: 10, Threshold: 480}}}
	closedLoopHigh := *bp // a band above q99.9 and the recommendation stretches the span
	closedLoopHigh.ClosedLoop = &engines.ClosedLoop{Score: "energy", Bands: []engines.ClosedLoopBand{{From: 0, Threshold: 700}, {From: 10, Threshold: 480}}}
	cases := []struct {
		name        string
		cal         *engines.Calibration
		lo, hi      float64 // first and last bound
		wantBound   float64 // a bound that must be present (NaN: none)
		wantDefault bool
	}{
		{"calibrated energy stop", bp, 168.3 - 4*150.4, 168.3 + 7*150.4, 432.0, false},
		{"closed-loop bands: the largest is a bound", &closedLoop, 168.3 - 4*150.4, 168.3 + 7*150.4, 610, false},
		{"closed-loop bands keep the recommendation a bound", &closedLoopHigh, 168.3 - 4*150.4, 700 + 4*150.4, 432.0, false},
		{"threshold on another score", centered, 168.3 - 4*150.4, 168.3 + 7*150.4, math.NaN(), false},
		{"no calibration", nil, 0, 0, math.NaN(), true},
		{"no energy statistics", &engines.Calibration{}, 0, 0, math.NaN(), true},
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
