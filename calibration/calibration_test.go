package calibration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The manifest's closed_loop block decodes into ClosedLoop as written.
func TestClosedLoopJSON(t *testing.T) {
	const js = `{"score": "energy", "alpha": 0.1, "rule": {"kind": "n_of_m", "n": 3, "m": 5}, "q": 2.31,
	 "bands": [{"from": 0, "mean": 123.4, "std": 10.2, "threshold": 147.0}, {"from": 20, "mean": 110, "std": 8, "threshold": 128.5}],
	 "task": "button-press", "level": "0", "rate_hz": 20, "steps_k": 20, "max_steps": 500,
	 "episodes": 40, "fit_episodes": 20, "conformal_episodes": 20, "seeds": [1000, 1039]}`
	var cl ClosedLoop
	if err := jsonUnmarshalStrict([]byte(js), &cl); err != nil {
		t.Fatal(err)
	}
	want := ClosedLoop{Score: "energy", Alpha: 0.1, Rule: Rule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2.31,
		Bands: []Band{{From: 0, Mean: 123.4, Std: 10.2, Threshold: 147}, {From: 20, Mean: 110, Std: 8, Threshold: 128.5}},
		Task:  "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20, Seeds: [2]int{1000, 1039}}
	if !reflect.DeepEqual(cl, want) {
		t.Fatalf("decoded %+v", cl)
	}
	if err := cl.Validate(); err != nil {
		t.Fatal(err)
	}
	cl.Bands[1].From, cl.Bands[0].Std, cl.Alpha, cl.Rule.Kind = 0, 0, 2, "cusum"
	err := cl.Validate()
	for _, k := range []string{"closed_loop.bands[1].from", "closed_loop.bands[0].std", "closed_loop.alpha", "closed_loop.rule.kind"} {
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("Validate does not name %s: %v", k, err)
		}
	}
}

// band_unit: absent (a bundle calibrated before the key) means fresh
// scores, and Validate refuses anything but the two units with one line
// naming the value and the choices.
func TestClosedLoopBandUnit(t *testing.T) {
	const head = `{"score": "energy", "alpha": 0.1, "rule": {"kind": "n_of_m", "n": 3, "m": 5}, "q": 2, `
	const bands = `"bands": [{"from": 0, "mean": 6, "std": 2, "threshold": 10}]}`
	cases := []struct {
		name string
		json string
		unit BandUnit // Unit(); "" when Validate must refuse
	}{
		{"absent", head + bands, BandFreshScores},
		{"ticks", head + `"band_unit": "ticks", ` + bands, BandTicks},
		{"fresh_scores", head + `"band_unit": "fresh_scores", ` + bands, BandFreshScores},
		{"unknown", head + `"band_unit": "seconds", ` + bands, ""},
		{"wrong case", head + `"band_unit": "Ticks", ` + bands, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cl ClosedLoop
			if err := jsonUnmarshalStrict([]byte(tc.json), &cl); err != nil {
				t.Fatal(err)
			}
			err := cl.Validate()
			if tc.unit == "" {
				want := fmt.Sprintf(`calibration.closed_loop.band_unit: got %q, expected "ticks" (running control ticks since arming) or "fresh_scores"`, cl.BandUnit)
				if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Validate: %v, want one line starting %q", err, want)
				}
				return
			}
			if err != nil || cl.Unit() != tc.unit {
				t.Fatalf("Unit() %q, Validate %v; want %q", cl.Unit(), err, tc.unit)
			}
			data, err := json.Marshal(&cl)
			if err != nil || strings.Contains(string(data), "band_unit") != (cl.BandUnit != "") {
				t.Fatalf("written back as %s (%v)", data, err)
			}
		})
	}
}

func jsonUnmarshalStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func TestClosedLoopCeilingValidate(t *testing.T) {
	base := func() *ClosedLoop {
		return &ClosedLoop{Score: "state_energy", Alpha: 0.05, Rule: Rule{Kind: RuleNOfM, N: 2, M: 5}, Q: 100,
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

// Validate collects every problem, each a *KeyError naming its key: the
// manifest loader and the safety gate report them under those keys.
func TestClosedLoopValidateKeys(t *testing.T) {
	valid := func() *ClosedLoop {
		return &ClosedLoop{Score: "energy", Alpha: 0.1, Rule: Rule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2,
			Bands: []Band{{From: 0, Mean: 6, Std: 2, Threshold: 10}, {From: 20, Mean: 90, Std: 5, Threshold: 100}}}
	}
	cases := []struct {
		name string
		edit func(*ClosedLoop)
		keys []string // every key reported, in order; nil: valid
	}{
		{"valid", func(*ClosedLoop) {}, nil},
		{"score", func(c *ClosedLoop) { c.Score = "vibes" }, []string{"score"}},
		{"rule", func(c *ClosedLoop) { c.Rule = Rule{Kind: "cusum", N: 0, M: 65} }, []string{"rule.kind", "rule.m", "rule.n"}},
		{"q and rates", func(c *ClosedLoop) { c.Q, c.TripsPerHour, c.ConformalHours = math.Inf(1), -1, math.NaN() },
			[]string{"q", "trips_per_hour", "conformal_hours"}},
		{"ceiling", func(c *ClosedLoop) { c.Ceiling = &Ceiling{Alpha: 2, Q: 3, Quantile: 3, Episodes: -1} },
			[]string{"ceiling.alpha", "ceiling.episodes"}},
		{"plan latency", func(c *ClosedLoop) {
			c.PlanLatency = &PlanLatency{P50Ms: 40, P90Ms: 60, Plans: 10, Episodes: 2, Measured: "guessed"}
		}, []string{"plan_latency.measured"}},
		{"bands", func(c *ClosedLoop) {
			c.Bands[0].From, c.Bands[1].From, c.Bands[1].Std, c.Bands[1].Mean = 1, 1, 0, math.NaN()
		},
			[]string{"bands[0].from", "bands[1].from", "bands[1].mean", "bands[1].std"}},
		{"no bands", func(c *ClosedLoop) { c.Bands = nil }, []string{"bands"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(c)
			var keys []string
			for _, err := range unwrap(c.Validate()) {
				var ke *KeyError
				if !errors.As(err, &ke) || !strings.HasPrefix(ke.Key, "calibration.closed_loop.") || ke.Problem == "" {
					t.Fatalf("%v: want a *KeyError under calibration.closed_loop", err)
				}
				keys = append(keys, strings.TrimPrefix(ke.Key, "calibration.closed_loop."))
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %q, want %q", keys, tc.keys)
			}
		})
	}
}

// Block.Validate holds the closed loops to one score and one calibration
// per rate and K, and checks the recommendation unless the block is
// calibrated in closed loop only.
func TestBlockValidate(t *testing.T) {
	cl := func(rate float64, k int) *ClosedLoop {
		return &ClosedLoop{Score: "energy", Alpha: 0.1, Rule: Rule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2, RateHz: rate, StepsK: k,
			Bands: []Band{{From: 0, Mean: 6, Std: 2, Threshold: 10}}}
	}
	rec := Recommendation{Score: "energy", Threshold: 3.7}
	cases := []struct {
		name string
		b    Block
		keys []string
	}{
		{"held-out only", Block{Recommended: rec}, nil},
		{"closed loop only, no recommendation", Block{ClosedLoop: cl(20, 20)}, nil},
		{"bad recommendation", Block{Recommended: Recommendation{Score: "state_energy", Threshold: math.NaN()}},
			[]string{"calibration.recommended.score", "calibration.recommended.threshold"}},
		{"others without closed_loop", Block{Recommended: rec, ClosedLoopOthers: []*ClosedLoop{cl(10, 20)}}, []string{"calibration.closed_loop_others"}},
		{"another rate", Block{Recommended: rec, ClosedLoop: cl(20, 20), ClosedLoopOthers: []*ClosedLoop{cl(10, 20)}}, nil},
		{"the same rate and K twice", Block{Recommended: rec, ClosedLoop: cl(20, 20), ClosedLoopOthers: []*ClosedLoop{cl(20, 20)}},
			[]string{"calibration.closed_loop_others[0]"}},
		{"an other of another score, invalid", Block{Recommended: rec, ClosedLoop: cl(20, 20),
			ClosedLoopOthers: []*ClosedLoop{{Score: "state_energy", Alpha: 0.1, Rule: Rule{Kind: RuleNOfM, N: 3, M: 5}, RateHz: 10, StepsK: 20}}},
			[]string{"calibration.closed_loop_others[0].bands", "calibration.closed_loop_others[0].score"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			for _, err := range unwrap(tc.b.Validate()) {
				var ke *KeyError
				if !errors.As(err, &ke) {
					t.Fatalf("%v: not a *KeyError", err)
				}
				keys = append(keys, ke.Key)
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %q, want %q", keys, tc.keys)
			}
		})
	}
}

func TestBandAt(t *testing.T) {
	bands := []Band{{From: 0}, {From: 10}, {From: 30}}
	for _, tc := range []struct{ i, want int }{{-1, 0}, {0, 0}, {9, 0}, {10, 1}, {29, 1}, {30, 2}, {1 << 40, 2}} {
		if got := BandAt(bands, tc.i); got != tc.want {
			t.Errorf("BandAt(%d) = %d, want %d", tc.i, got, tc.want)
		}
	}
	if got := BandAt(bands[:1], 100); got != 0 {
		t.Errorf("one band: BandAt(100) = %d, want 0", got)
	}
}

func unwrap(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
