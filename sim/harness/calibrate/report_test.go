package calibrate

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/safety"
)

// sim calibrate's printout of a closed-loop calibration says what the bands
// count (with the fresh scores per running tick of the traces), in ticks,
// in fresh scores, and without band_unit (calibrated before the key: fresh
// scores). bundle verify's is cmd/energyflow's test.
func TestClosedLoopPrintoutsNameTheUnit(t *testing.T) {
	cases := []struct {
		unit calibration.BandUnit
		noun string // what each band line counts
	}{
		{calibration.BandTicks, "running ticks"},
		{calibration.BandFreshScores, "fresh scores"},
		{"", "fresh scores"},
	}
	for _, tc := range cases {
		t.Run("band_unit="+string(tc.unit), func(t *testing.T) {
			cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
				BandUnit: tc.unit, Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
				Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
				Seeds: [2]int{2000, 2001}}
			var out bytes.Buffer
			nan := math.NaN()
			printClosedLoop(&out, "b", cl, [][]float64{{1, nan, 1, 1}, {nan, 1, 1, 1}}, safety.NOfMConfig{N: 3, M: 5})
			for _, w := range []string{"bands by " + tc.noun + " since arming (band_unit " + string(cl.Unit()) + "); 6 fresh scores on 8 running ticks (0.75 per tick)",
				tc.noun + " 0 to 9 since arming: mean 10", tc.noun + " 10 on since arming: mean 8"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("sim calibrate's printout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// A calibration with a one-tick ceiling: sim calibrate's printout gives
// each band's ceiling beside its threshold, and the episode bound alpha +
// ceiling alpha.
func TestClosedLoopPrintoutsShowTheCeiling(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.05, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
		Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
		Seeds: [2]int{2000, 2001}, Ceiling: &calibration.Ceiling{Alpha: 0.02, Q: 4, Quantile: 3.5, Episodes: 1, Seeds: [2]int{2000, 2001}}}
	var out bytes.Buffer
	printClosedLoop(&out, "b", cl, [][]float64{{1, 1, 1, 1}, {1, 1, 1, 30}}, safety.NOfMConfig{N: 3, M: 5})
	for _, w := range []string{"one-tick ceiling: ceiling alpha 0.02: q = 4 (the window's q: the episodes' quantile, 3.5, is below it", "a fresh episode trips either rule with probability at most 0.07",
		"running ticks 0 to 9 since arming: mean 10 std 2 threshold 13 ceiling 18", "running ticks 10 on since arming: mean 8 std 1 threshold 9.5 ceiling 12",
		"0/1 fit, 1/1 conformal (at most (alpha + ceiling alpha)·(n+1)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("sim calibrate's printout lacks %q:\n%s", w, out.String())
		}
	}
}
