package runtime

import (
	"reflect"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
)

// The bundle's calibration block reaches the gate as it is: the manifest
// and the gate share calibration.Block, so there is nothing to convert and
// nothing a conversion could drop.
func TestSafetyCalibrationIsTheBundles(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: calibration.Rule{Kind: "n_of_m", N: 3, M: 5}, Q: 2.31,
		Bands: []calibration.Band{{From: 0, Mean: 123.4, Std: 10.2, Threshold: 146.962}, {From: 20, Mean: 110, Std: 8, Threshold: 128.48}},
		Task:  "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{1000, 1039}, BandUnit: calibration.BandTicks,
		Ceiling: &calibration.Ceiling{Alpha: 0.02, Q: 4.5, Episodes: 60, Seeds: [2]int{75000, 75059}, SuccessfulOnly: true}}
	cases := []struct {
		name string
		cal  *calibration.Block
	}{
		{"with closed_loop", &calibration.Block{Steps: 20, Recommended: calibration.Recommendation{Score: "energy", Threshold: 432}, ClosedLoop: cl}},
		{"without closed_loop", &calibration.Block{Steps: 20, Recommended: calibration.Recommendation{Score: "energy", Threshold: 432}}},
		{"no calibration block", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := safetyCalibration(&engines.Manifest{Calibration: tc.cal})
			if tc.cal == nil {
				if got != nil {
					t.Fatalf("%+v from a bundle without calibration or state term", got)
				}
				return
			}
			if got == nil || !reflect.DeepEqual(got.Block, *tc.cal) || got.ClosedLoop != tc.cal.ClosedLoop || got.StateEnergy != nil {
				t.Fatalf("the gate gets %+v, want the bundle's block %+v", got, tc.cal)
			}
		})
	}
}
