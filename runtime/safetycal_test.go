package runtime

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// The bundle's closed-loop calibration reaches the gate whole: the
// conversion copies every field, and the engines and safety types read the
// same JSON (the manifest's calibration.closed_loop) the same way.
func TestSafetyCalibrationCopiesClosedLoop(t *testing.T) {
	cl := &engines.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: engines.ClosedLoopRule{Kind: "n_of_m", N: 3, M: 5}, Q: 2.31,
		Bands: []engines.ClosedLoopBand{{From: 0, Mean: 123.4, Std: 10.2, Threshold: 146.962}, {From: 20, Mean: 110, Std: 8, Threshold: 128.48}},
		Task:  "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{1000, 1039}}
	inTicks := *cl
	inTicks.BandUnit = engines.BandUnitTicks
	withCeiling := inTicks
	withCeiling.Ceiling = &engines.ClosedLoopCeiling{Alpha: 0.02, Q: 4.5, Episodes: 60, Seeds: [2]int{75000, 75059}, SuccessfulOnly: true}
	cases := []struct {
		name string
		cal  *engines.Calibration
	}{
		{"with closed_loop", &engines.Calibration{Steps: 20, Recommended: engines.Recommendation{Score: "energy", Threshold: 432}, ClosedLoop: cl}},
		{"with closed_loop in ticks", &engines.Calibration{Steps: 20, Recommended: engines.Recommendation{Score: "energy", Threshold: 432}, ClosedLoop: &inTicks}},
		{"with a one-tick ceiling", &engines.Calibration{Steps: 20, Recommended: engines.Recommendation{Score: "energy", Threshold: 432}, ClosedLoop: &withCeiling}},
		{"without closed_loop", &engines.Calibration{Steps: 20, Recommended: engines.Recommendation{Score: "energy", Threshold: 432}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := safetyCalibration(&engines.Bundle{Manifest: engines.Manifest{Calibration: tc.cal}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.cal.ClosedLoop == nil {
				if got.ClosedLoop != nil {
					t.Fatalf("closed_loop %+v from a calibration without one", got.ClosedLoop)
				}
				return
			}
			data, err := json.Marshal(tc.cal.ClosedLoop)
			if err != nil {
				t.Fatal(err)
			}
			var want safety.ClosedLoop
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if got.ClosedLoop == nil || !reflect.DeepEqual(*got.ClosedLoop, want) {
				t.Fatalf("converted %+v, want %+v", got.ClosedLoop, want)
			}
			back, err := json.Marshal(got.ClosedLoop)
			if err != nil || string(back) != string(data) {
				t.Fatalf("safety writes %s, engines %s (%v)", back, data, err)
			}
		})
	}
}
