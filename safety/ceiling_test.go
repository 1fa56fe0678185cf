package safety

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// FitClosedLoop's one-tick ceiling on standardized traces small enough to
// compute by hand: its conformal score is an episode's largest score.
func TestFitClosedLoopCeiling(t *testing.T) {
	// Conformal episodes (every one: standardized). 2-of-3 scores (the 2nd
	// largest of the last 3): 1, 2, 3, 4, 5; largest scores: 9, 2, 8, 4, 5.
	traces := [][]float64{{1, 1, 9}, {2, 2}, {3, 8, 3}, {4, nan(), 4}, {5, 5, 1}}
	cases := []struct {
		name        string
		alpha, ceil float64
		q, cq       float64
	}{
		// k = ⌈6·0.5⌉ = 3: q = 3 (of 1..5); ceiling: 3rd of 2, 4, 5, 8, 9 = 5.
		{"alpha 0.5, ceiling 0.5", 0.5, 0.5, 3, 5},
		// ceiling k = ⌈6·(1−0.2)⌉ = 5: the largest, 9.
		{"ceiling 0.2: the largest", 0.5, 0.2, 3, 9},
		// q k = 5: 5; ceiling k = 1: 2, under q: raised to q.
		{"a ceiling under the rule's q is raised to it", 0.2, 0.9, 5, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := FitClosedLoop(traces, ClosedLoopOptions{Alpha: tc.alpha, N: 2, M: 3, Standardized: true, Score: ScoreStateEnergy, CeilingAlpha: tc.ceil})
			if err != nil {
				t.Fatal(err)
			}
			if cl.Q != tc.q || cl.Ceiling == nil || cl.Ceiling.Q != tc.cq || cl.Ceiling.Alpha != tc.ceil {
				t.Fatalf("q %v ceiling %+v, want q %v ceiling q %v alpha %v", cl.Q, cl.Ceiling, tc.q, tc.cq, tc.ceil)
			}
			if err := cl.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	cl, err := FitClosedLoop(traces, ClosedLoopOptions{Alpha: 0.5, N: 2, M: 3, Standardized: true})
	if err != nil || cl.Ceiling != nil {
		t.Fatalf("no ceiling alpha: ceiling %+v (%v), want none", cl.Ceiling, err)
	}
}

// Bands: the ceiling is a z-score, applied as each band's Mean + Q·Std.
func TestFitClosedLoopCeilingBands(t *testing.T) {
	// Fit: mean 2, std 1. Conformal z: [2 4] → 0 2, [3 NaN 12] → 1 10.
	// 1 of 1, alpha 0.5: k = ⌈3·0.5⌉ = 2: q = 10 (2nd of 2, 10).
	// Ceiling alpha 0.5: the same, 10.
	cl, err := FitClosedLoop([][]float64{{1, 3}, {3, 1}, {2, 4}, {3, nan(), 12}},
		ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1, CeilingAlpha: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Ceiling == nil || cl.Ceiling.Q != 10 || cl.Ceiling.Level(cl.Bands[0]) != 12 {
		t.Fatalf("ceiling %+v, bands %+v: want q 10, level 12", cl.Ceiling, cl.Bands)
	}
}

func TestFitClosedLoopCeilingErrors(t *testing.T) {
	traces := [][]float64{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}
	cases := []struct {
		name string
		o    ClosedLoopOptions
		want string
	}{
		{"ceiling alpha above 1", ClosedLoopOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: 1.5}, "ceiling alpha 1.5 is not in (0, 1)"},
		{"negative ceiling alpha", ClosedLoopOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: -0.1}, "ceiling alpha -0.1 is not in (0, 1)"},
		{"too few episodes for the ceiling", ClosedLoopOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: 0.1}, "5 conformal episodes cannot certify the ceiling's alpha 0.1: need at least 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FitClosedLoop(traces, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.want)
			}
		})
	}
}

func TestClosedLoopCeilingValidate(t *testing.T) {
	base := func() *ClosedLoop {
		return &ClosedLoop{Score: "state_energy", Alpha: 0.05, Rule: ClosedLoopRule{Kind: RuleNOfM, N: 2, M: 5}, Q: 100,
			Bands: []Band{{From: 0, Mean: 0, Std: 1, Threshold: 100}}}
	}
	cases := []struct {
		name string
		c    *Ceiling
		want string // "" valid
	}{
		{"none", nil, ""},
		{"valid", &Ceiling{Alpha: 0.02, Q: 300, Quantile: 300}, ""},
		{"at q", &Ceiling{Alpha: 0.02, Q: 100, Quantile: 40}, ""},
		{"a floor", &Ceiling{Alpha: 0.02, Q: 3000, Quantile: 40, Min: 3000}, ""},
		{"alpha 0", &Ceiling{Alpha: 0, Q: 300}, "ceiling.alpha: got 0"},
		{"NaN q", &Ceiling{Alpha: 0.02, Q: math.NaN()}, "ceiling.q: got NaN"},
		{"below the rule's q", &Ceiling{Alpha: 0.02, Q: 50}, "ceiling.q: got 50, below the rule's q 100"},
		{"quantile above q", &Ceiling{Alpha: 0.02, Q: 300, Quantile: 400}, "ceiling.quantile: got 400"},
		{"floor above q", &Ceiling{Alpha: 0.02, Q: 300, Min: 400}, "ceiling.min: got 400"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.Ceiling = tc.c
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// ceilingCal is a state-score calibration with one band: 2 of 5 above 10,
// or one score above the ceiling 30.
func ceilingCal(ceiling *Ceiling) *Calibration {
	return &Calibration{
		StateEnergy: &ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 5}},
		ClosedLoop: &ClosedLoop{Score: "state_energy", Alpha: 0.05, Rule: ClosedLoopRule{Kind: RuleNOfM, N: 2, M: 5}, Q: 10, BandUnit: BandTicks,
			Bands: []Band{{From: 0, Mean: 0, Std: 1, Threshold: 10}}, Ceiling: ceiling},
	}
}

// The gate trips on one score above the ceiling at once, and the window
// rule alone lets the same single spike pass; under the ceiling the rule
// is unchanged.
func TestGateCeiling(t *testing.T) {
	cases := []struct {
		name    string
		ceiling *Ceiling
		scores  []float64
		trip    int     // index of the tripping tick, −1: none
		thr     float64 // Reason.Threshold at the trip
		message string
	}{
		{"one spike over the ceiling trips at once", &Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 1, 7000, 1, 1}, 2, 30, "above the one-tick ceiling 30"},
		{"without a ceiling the spike passes 2 of 5", nil, []float64{1, 1, 7000, 1, 1}, -1, 0, ""},
		{"a spike between threshold and ceiling passes", &Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 20, 1, 1, 1, 1, 20}, -1, 0, ""},
		{"two scores over the threshold: the rule trips", &Ceiling{Alpha: 0.02, Q: 30}, []float64{1, 20, 20, 1}, 2, 10, "2 of the last 5 scores over it"},
		{"NaN ticks do not trip the ceiling", &Ceiling{Alpha: 0.02, Q: 30}, []float64{1, nan(), nan(), 1}, -1, 0, ""},
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
	r := newRigCal(t, cfg, ceilingCal(&Ceiling{Alpha: 0.02, Q: 30}))
	if th := r.g.Thresholds(); len(th) != 1 || th[0].Ceiling != nil || th[0].Source != "config" {
		t.Fatalf("thresholds %+v, want the config's without a ceiling", th)
	}
}

func TestReplayCeiling(t *testing.T) {
	th := Threshold{Score: ScoreStateEnergy, Bands: []Band{{From: 0, Mean: 0, Std: 1, Threshold: 10}}, BandUnit: BandTicks,
		Ceiling: &Ceiling{Alpha: 0.02, Q: 30}}
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

// FitCeiling adds a ceiling to a calibration fitted earlier: its own
// episodes, the calibration's bands and unit, at least its q.
func TestFitCeiling(t *testing.T) {
	cl := &ClosedLoop{Score: "energy", Alpha: 0.1, Rule: ClosedLoopRule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2, BandUnit: BandTicks,
		Bands: []Band{{From: 0, Mean: 10, Std: 2, Threshold: 14}, {From: 2, Mean: 100, Std: 10, Threshold: 120}}}
	// Largest z per episode, each score in its tick's band: [12 NaN 150] → 1, 5: 5;
	// [20 100] (ticks 0 and 1, band 0) → 5, 45: 45; [10 10 130] → 0, 0, 3: 3.
	// k = ⌈4·0.5⌉ = 2nd of 3, 5, 45: 5.
	traces := [][]float64{{12, nan(), 150}, {20, 100}, {10, 10, 130}}
	c, err := FitCeiling(traces, cl, 0.5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Q != 5 || c.Quantile != 5 || c.Episodes != 3 || c.Alpha != 0.5 || c.Level(cl.Bands[1]) != 150 {
		t.Fatalf("ceiling %+v, want q 5 over 3 episodes (level 150 in band 1)", c)
	}
	// In fresh scores the NaN does not advance: 150 is fresh score 1, band 0: z 70.
	fresh := *cl
	fresh.BandUnit = BandFreshScores
	if c, err := FitCeiling(traces, &fresh, 0.5, 0); err != nil || c.Q != 45 {
		t.Fatalf("in fresh scores: %+v (%v), want q 45 (2nd of 3, 45, 70)", c, err)
	}
	// Under the calibration's q: raised to it.
	low := [][]float64{{10}, {10}, {11}}
	if c, err := FitCeiling(low, cl, 0.5, 0); err != nil || c.Q != 2 || c.Quantile != 0 {
		t.Fatalf("low scores: %+v (%v), want quantile 0 (z 0, 0, 0.5: the 2nd) raised to the rule's q 2", c, err)
	}
	// A floor above the quantile: q is the floor, the quantile kept beside it.
	if c, err := FitCeiling(traces, cl, 0.5, 300); err != nil || c.Q != 300 || c.Quantile != 5 || c.Min != 300 {
		t.Fatalf("floor 300: %+v (%v), want q 300, quantile 5", c, err)
	} else if err := (&ClosedLoop{Score: "energy", Alpha: 0.1, Rule: cl.Rule, Q: 2, Bands: cl.Bands, Ceiling: c}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		traces [][]float64
		cl     *ClosedLoop
		alpha  float64
		want   string
	}{
		{traces, cl, 0.1, "3 episodes cannot certify the ceiling's alpha 0.1: need at least 9"},
		{traces, cl, 0, "ceiling alpha 0 is not in (0, 1)"},
		{traces, &ClosedLoop{Score: "energy"}, 0.5, "calibration.closed_loop"},
		{[][]float64{{nan()}, {nan()}, {nan()}}, cl, 0.5, "no fresh score"},
		{[][]float64{{math.Inf(1)}, {1}, {1}}, cl, 0.5, "entry 0 is +Inf"},
	} {
		if _, err := FitCeiling(tc.traces, tc.cl, tc.alpha, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FitCeiling: %v, want %q", err, tc.want)
		}
	}
}
