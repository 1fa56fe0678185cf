package harness_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
)

// The Meta-World arm's tracking block: on, one step per command of 1 cm per
// unit, the task's mocap box, a response of four steps and a window of one
// at the loop's period, the default tolerance, the sustained rule; a valid configuration for
// the bridge's three axes.
func TestMetaWorldTracking(t *testing.T) {
	tests := []struct {
		task   string
		period time.Duration
		floor  float64 // the box's z floor
	}{
		{"button-press", 100 * time.Millisecond, 0.05},
		{"drawer-open", 50 * time.Millisecond, 0.05},
		{"bin-picking", 100 * time.Millisecond, 0.07},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			tr := harness.MetaWorldTracking(tt.task, tt.period)
			if !tr.Enabled || tr.Per != safety.TrackingPerTick || !slices.Equal(tr.Scale, []float64{0.01, 0.01, 0.01}) ||
				tr.Window != tt.period || tr.Response != 4*tt.period || tr.Tolerance != safety.DefaultTracking().Tolerance {
				t.Errorf("tracking %+v", tr)
			}
			// the sustained rule: 1.5 cm beyond 6 mm a step, whatever the rate
			if tr.Sustained != 0.015 || math.Abs(tr.Drift*tt.period.Seconds()-0.006) > 1e-12 {
				t.Errorf("sustained %v, drift %v per second at %v", tr.Sustained, tr.Drift, tt.period)
			}
			if !slices.Equal(tr.Lower, []float64{-0.5, 0.40, tt.floor}) || !slices.Equal(tr.Upper, []float64{0.5, 1, 0.5}) {
				t.Errorf("box %v – %v", tr.Lower, tr.Upper)
			}
			c := safety.DefaultConfig()
			c.Limits.MaxVelocity = []float64{1, 1, 1}
			c.Tracking = tr
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}
