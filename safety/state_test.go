package safety

import (
	"math"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
)

// The state term's score is watched like any other: it trips the n-of-m
// rule on its own threshold (here the state_energy block's held-out
// q99.9), goes stale when NaN, and the stop's message names it.
func TestStateEnergyScoreTrips(t *testing.T) {
	cfg := testConfig()
	cfg.Energy.Scores = []ScoreConfig{{Name: "state_energy"}}
	cal := &Calibration{StateEnergy: &calibration.ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 4}}}
	cases := []struct {
		name  string
		state float64 // state_energy fed every tick after arming
		kind  Kind
	}{
		{"above the threshold", 7, KindEnergy},
		{"not evaluated", math.NaN(), KindScoreStale},
		{"infinite", math.Inf(1), KindNaN},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigCal(t, cfg, cal)
			if th := r.g.Thresholds(); len(th) != 1 || th[0].Score != ScoreStateEnergy || th[0].Value != 4 || th[0].Source != "state_energy.calibration.quantiles[99.9]" {
				t.Fatalf("thresholds %+v", th)
			}
			fresh := func(in *Inputs) { in.Scores[ScoreStateEnergy] = 1 }
			r.tick(fresh)
			if err := r.resetAt(fresh); err != nil {
				t.Fatal(err)
			}
			var d Decision
			for i := 0; i < 5; i++ {
				// The energy scores are high: they are not watched.
				if d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy], in.Scores[ScoreStateEnergy] = 1e9, tc.state }); d.State == Stopped {
					break
				}
			}
			if d.State != Stopped || d.Reason.Kind != tc.kind || d.Reason.Score != ScoreStateEnergy {
				t.Fatalf("decision %v %v (score %v): %s; want stopped by %v on state_energy", d.State, d.Reason.Kind, d.Reason.Score, d.Reason.Message, tc.kind)
			}
			if !strings.Contains(d.Reason.Message, "state_energy") {
				t.Errorf("message %q does not name the score", d.Reason.Message)
			}
			if tc.kind == KindEnergy && (d.Reason.Threshold != 4 || d.Reason.Scores[ScoreStateEnergy] != 7) {
				t.Errorf("reason %+v", d.Reason)
			}
		})
	}
}

// With energy.scores empty, a bundle with the state term is watched on
// state_energy alone (its held-out quantile here), whatever its energy
// calibration: an unseen state trips, a high energy in a seen state does
// not. Without the state term the calibration's score is watched.
func TestDefaultWatchSetIsTheStateTerm(t *testing.T) {
	cfg := testConfig()
	cfg.Energy.Scores = nil
	stats := &calibration.ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 4}}
	energyCL := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: calibration.Rule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2,
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 6, Std: 2, Threshold: 10}}}
	cases := []struct {
		name          string
		cal           *Calibration
		energy, state float64 // fed every tick after arming
		want          Score   // the stop's score; NumScores: no stop
		watch         string  // the one watched score and its threshold's source
		source        string
	}{
		{"unseen state, quiet energy", &Calibration{Block: calibration.Block{Recommended: calibration.Recommendation{Score: "energy", Threshold: 10}}, StateEnergy: stats},
			1, 7, ScoreStateEnergy, "state_energy", "state_energy.calibration.quantiles[99.9]"},
		{"high energy, seen state", &Calibration{Block: calibration.Block{Recommended: calibration.Recommendation{Score: "energy", Threshold: 10}}, StateEnergy: stats},
			50, 1, NumScores, "state_energy", "state_energy.calibration.quantiles[99.9]"},
		{"the energy's closed loop does not add it", &Calibration{Block: calibration.Block{ClosedLoop: energyCL}, StateEnergy: stats},
			50, 1, NumScores, "state_energy", "state_energy.calibration.quantiles[99.9]"},
		{"no state term: the calibration's score", &Calibration{Block: calibration.Block{Recommended: calibration.Recommendation{Score: "energy", Threshold: 10}}},
			50, 1, ScoreEnergy, "energy", "calibration.recommended"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigCal(t, cfg, tc.cal)
			th := r.g.Thresholds()
			if len(th) != 1 || th[0].Score.String() != tc.watch || th[0].Source != tc.source {
				t.Fatalf("thresholds %+v, want %s alone from %s", th, tc.watch, tc.source)
			}
			quiet := func(in *Inputs) { in.Scores[ScoreEnergy], in.Scores[ScoreStateEnergy] = 1, 1 }
			r.tick(quiet)
			if err := r.resetAt(quiet); err != nil {
				t.Fatal(err)
			}
			var d Decision
			for i := 0; i < 5; i++ {
				if d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy], in.Scores[ScoreStateEnergy] = tc.energy, tc.state }); d.State == Stopped {
					break
				}
			}
			if tc.want == NumScores {
				if d.State == Stopped {
					t.Fatalf("stopped (%v on %v): %s; want no stop", d.Reason.Kind, d.Reason.Score, d.Reason.Message)
				}
				return
			}
			if d.State != Stopped || d.Reason.Kind != KindEnergy || d.Reason.Score != tc.want {
				t.Fatalf("decision %v %v on %v: %s; want an energy stop on %v", d.State, d.Reason.Kind, d.Reason.Score, d.Reason.Message, tc.want)
			}
		})
	}
}

// Each score is judged with its own n_of_m window: state_energy 2 of the
// last 5 by default (a push lifts it for 1–3 ticks), the energies the
// rule's 3 of 5, and a score entry's n_of_m overrides either.
func TestScoreWindows(t *testing.T) {
	cal := &Calibration{Block: calibration.Block{Recommended: calibration.Recommendation{Score: "energy", Threshold: 10}},
		StateEnergy: &calibration.ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 4}}}
	three := &NOfMConfig{N: 3, M: 5}
	cases := []struct {
		name     string
		scores   []ScoreConfig
		feed     [][2]float64 // energy, state_energy per tick after arming
		stopTick int          // index in feed of the stopping tick, -1: none
		want     Score
		window   string // the trip message names the window that judged the score
	}{
		{"state: two spikes in five trip", nil, [][2]float64{{1, 9}, {1, 9}, {1, 1}, {1, 1}, {1, 1}}, 1, ScoreStateEnergy, "2 of the last 5 scores"},
		{"state: one spike does not", nil, [][2]float64{{1, 9}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 9}}, -1, 0, ""},
		{"energy: two of five do not", nil, [][2]float64{{50, 1}, {50, 1}, {1, 1}, {1, 1}, {1, 1}}, -1, 0, ""},
		{"energy: three of five trip", []ScoreConfig{{Name: "energy"}, {Name: "state_energy"}}, [][2]float64{{50, 1}, {1, 1}, {50, 1}, {50, 1}, {1, 1}}, 3, ScoreEnergy, "3 of the last 5 scores"},
		{"energy: not watched by default", nil, [][2]float64{{50, 1}, {1, 1}, {50, 1}, {50, 1}, {1, 1}}, -1, 0, ""},
		{"state: its entry's 3 of 5", []ScoreConfig{{Name: "energy"}, {Name: "state_energy", NOfM: three}},
			[][2]float64{{1, 9}, {1, 9}, {1, 1}, {1, 1}, {1, 9}}, 4, ScoreStateEnergy, "3 of the last 5 scores"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Energy.Rule = RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 3, M: 5}}
			cfg.Energy.Scores = tc.scores
			r := newRigCal(t, cfg, cal)
			quiet := func(in *Inputs) { in.Scores[ScoreEnergy], in.Scores[ScoreStateEnergy] = 1, 1 }
			r.tick(quiet)
			if err := r.resetAt(quiet); err != nil {
				t.Fatal(err)
			}
			stop := -1
			var d Decision
			for i, f := range tc.feed {
				d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy], in.Scores[ScoreStateEnergy] = f[0], f[1] })
				if d.State == Stopped {
					stop = i
					break
				}
			}
			if stop != tc.stopTick {
				t.Fatalf("stopped at %d (%v %s), want %d", stop, d.Reason.Kind, d.Reason.Message, tc.stopTick)
			}
			if stop >= 0 && (d.Reason.Kind != KindEnergy || d.Reason.Score != tc.want) {
				t.Fatalf("reason %v on %v, want the energy stop on %v", d.Reason.Kind, d.Reason.Score, tc.want)
			}
			if stop >= 0 && !strings.Contains(d.Reason.Message, tc.window) {
				t.Errorf("message %q does not name the window %q", d.Reason.Message, tc.window)
			}
		})
	}
}
