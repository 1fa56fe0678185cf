package safety

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
)

// ceilingCal is a state-score calibration with one band: 2 of 5 above 10,
// or one score above the ceiling 30.
func ceilingCal(ceiling *calibration.Ceiling) *Calibration {
	return &Calibration{
		StateEnergy: &calibration.ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 5}},
		Block: calibration.Block{ClosedLoop: &calibration.ClosedLoop{Score: "state_energy", Alpha: 0.05, Rule: calibration.Rule{Kind: RuleNOfM, N: 2, M: 5}, Q: 10, BandUnit: calibration.BandTicks,
			Bands: []calibration.Band{{From: 0, Mean: 0, Std: 1, Threshold: 10}}, Ceiling: ceiling}},
	}
}

// The gate trips on one score above the ceiling at once, and the window
// rule alone lets the same single spike pass; under the ceiling the rule
// is unchanged.
func TestGateCeiling(t *testing.T) {
	cases := []struct {
		name    string
		ceiling *calibration.Ceiling
		scores  []float64
		trip    int     // index of the tripping tick, −1: none
		thr     float64 // Reason.Threshold at the trip
		message string
	}{
		{"one spike over the ceiling trips at once", &calibration.Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 1, 7000, 1, 1}, 2, 30, "above the one-tick ceiling 30"},
		{"without a ceiling the spike passes 2 of 5", nil, []float64{1, 1, 7000, 1, 1}, -1, 0, ""},
		{"a spike between threshold and ceiling passes", &calibration.Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 20, 1, 1, 1, 1, 20}, -1, 0, ""},
		{"two scores over the threshold: the rule trips", &calibration.Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 20, 20, 1}, 2, 10, "2 of the last 5 scores over it"},
		{"NaN ticks do not trip the ceiling", &calibration.Ceiling{Alpha: 0.02, Q: 30}, []float64{1, nan(), nan(), 1}, -1, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigCal(t, closedLoopConfig(), ceilingCal(tc.ceiling))
			if th := r.g.Thresholds(); len(th) != 1 || th[0].Score != ScoreStateEnergy || (th[0].Ceiling != nil) != (tc.ceiling != nil) {
				t.Fatalf("thresholds %+v", th)
			}
			r.armGate()
			trip := -1
			var d Decision
			for i, x := range tc.scores {
				d = r.tick(func(in *Inputs) { in.Scores[ScoreStateEnergy] = x })
				if d.State == Stopped {
					trip = i
					break
				}
			}
			if trip != tc.trip {
				t.Fatalf("tripped at %d, want %d (%s)", trip, tc.trip, d.Reason.Message)
			}
			if trip < 0 {
				return
			}
			if d.Reason.Kind != KindEnergy || d.Reason.Threshold != tc.thr || !strings.Contains(d.Reason.Message, tc.message) {
				t.Fatalf("reason %+v, want threshold %v and %q", d.Reason, tc.thr, tc.message)
			}
		})
	}
}

// A config threshold replaces the closed-loop calibration, its ceiling too.
func TestCeilingNotAppliedWithConfigThreshold(t *testing.T) {
	cfg := closedLoopConfig()
	v := 10.0
	cfg.Energy.Scores = []ScoreConfig{{Name: "state_energy", Threshold: &v, NOfM: &NOfMConfig{N: 2, M: 5}}}
	r := newRigCal(t, cfg, ceilingCal(&calibration.Ceiling{Alpha: 0.02, Q: 30}))
	if th := r.g.Thresholds(); len(th) != 1 || th[0].Ceiling != nil || th[0].Source != "config" {
		t.Fatalf("thresholds %+v, want the config's without a ceiling", th)
	}
}

func TestReplayCeiling(t *testing.T) {
	th := Threshold{Score: ScoreStateEnergy, Bands: []calibration.Band{{From: 0, Mean: 0, Std: 1, Threshold: 10}}, BandUnit: calibration.BandTicks,
		Ceiling: &calibration.Ceiling{Alpha: 0.02, Q: 30}}
	rc := RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 2, M: 5}}
	for _, tc := range []struct {
		name  string
		trace []float64
		want  []int
	}{
		{"a spike over the ceiling", []float64{1, 50, 1, 1}, []int{1}},
		{"a spike under it", []float64{1, 20, 1, 1}, nil},
		{"the rule, then the ceiling after the restart", []float64{20, 20, 1, 50}, []int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replay(rc, th, tc.trace)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("trips %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	if c := (Threshold{Value: 3}).CeilingAt(0); !math.IsInf(c, 1) {
		t.Fatalf("CeilingAt without a ceiling: %v, want +Inf", c)
	}
}
