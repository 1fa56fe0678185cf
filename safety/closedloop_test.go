package safety

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
)

// closedLoopCal is a two-band calibration for the gate tests: threshold 10
// for the first 20 fresh scores since arming, 100 from then on, certified
// for the default 3 of 5 (the recommendation, 7, must not be used). It has
// no band_unit, as bundles calibrated before it: the bands count fresh
// scores.
func closedLoopCal() *Calibration { return closedLoopCalIn("") }

// closedLoopCalIn is closedLoopCal with its bands counted in unit.
func closedLoopCalIn(unit calibration.BandUnit) *Calibration {
	return &Calibration{Block: calibration.Block{
		Recommended: calibration.Recommendation{Score: "energy", Threshold: 7},
		ClosedLoop: &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: calibration.Rule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2, BandUnit: unit,
			Bands: []calibration.Band{{From: 0, Mean: 6, Std: 2, Threshold: 10}, {From: 20, Mean: 90, Std: 5, Threshold: 100}}},
	}}
}

func closedLoopConfig() Config {
	cfg := testConfig()
	cfg.Energy.Scores = nil
	cfg.Energy.Rule = DefaultConfig().Energy.Rule // 3 of 5
	return cfg
}

// The gate switches bands with the time since arming — running ticks, or
// fresh scores for a calibration in fresh scores or without band_unit: a
// score between band 0's threshold and band 1's trips early in an episode
// and not later, and each n-of-m bit keeps the band of its own score. With
// ticks lacking a fresh score, ticks advance the band and fresh scores lag.
func TestClosedLoopBandSwitching(t *testing.T) {
	low := func(k int) []float64 { return repeat(1, k) }
	cat := func(s ...[]float64) []float64 { return slices.Concat(s...) }
	gaps := func(k int) []float64 { return slices.Repeat([]float64{1, nan()}, k) } // 2k ticks, k fresh scores
	const none, ticks, fresh = calibration.BandUnit(""), calibration.BandTicks, calibration.BandFreshScores
	cases := []struct {
		name   string
		unit   calibration.BandUnit // the calibration's band_unit ("": absent)
		scores []float64            // scores of the ticks after arming (NaN: none that tick)
		trip   int                  // index into scores of the tripping tick; −1: none
		thr    float64              // Reason.Threshold at the trip
	}{
		{"above band 0 trips at the 3rd fresh score", none, repeat(50, 3), 2, 10},
		{"the same score from fresh score 20 on does not trip", none, cat(low(20), repeat(50, 10)), -1, 0},
		{"from fresh score 25 on neither", none, cat(low(25), repeat(50, 10)), -1, 0},
		{"band 1 trips above its own threshold", none, cat(low(20), repeat(150, 3)), 22, 100},
		{"bits keep their band across the switch", none, cat(low(18), []float64{50, 50, 50, 50}), -1, 0},
		{"mixed across the switch", none, cat(low(18), []float64{50, 50, 150}), 20, 100},
		{"NaN ticks are not fresh scores", none, cat(gaps(17), repeat(50, 3)), 36, 10},
		{"no band_unit: 20 ticks with gaps are 10 fresh scores, band 0", none, cat(gaps(10), repeat(50, 3)), 22, 10},
		{"fresh_scores: the same", fresh, cat(gaps(10), repeat(50, 3)), 22, 10},
		{"ticks: 20 ticks with gaps reach band 1", ticks, cat(gaps(10), repeat(50, 10)), -1, 0},
		{"ticks: band 1 trips above its own threshold after gaps", ticks, cat(gaps(10), repeat(150, 3)), 22, 100},
		{"ticks: band 0 with gaps", ticks, cat(gaps(3), slices.Repeat([]float64{nan(), 50}, 3)), 11, 10},
		{"ticks: bits keep their band across the switch", ticks, cat(gaps(9), []float64{50, nan(), 50, 50, 50}), -1, 0},
		{"ticks: mixed across the switch", ticks, cat(gaps(8), []float64{50, nan(), 50, nan(), 150}), 20, 100},
		{"fresh_scores: the same scores all in band 0", fresh, cat(gaps(8), []float64{50, nan(), 50, nan(), 150}), 20, 10},
		{"ticks without gaps count as fresh scores", ticks, cat(low(20), repeat(150, 3)), 22, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cal := closedLoopCalIn(tc.unit)
			r := newRigCal(t, closedLoopConfig(), cal)
			r.armGate()
			trip := -1
			var d Decision
			n := 0 // ticks or fresh scores since arming, as the unit counts
			for i, x := range tc.scores {
				d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = x })
				if want := cal.ClosedLoop.Bands[calibration.BandAt(cal.ClosedLoop.Bands, n)].Threshold; d.State == Running && r.g.ThresholdNow() != want {
					t.Fatalf("tick %d (%d %s): ThresholdNow %v, want %v", i, n, cal.ClosedLoop.Unit(), r.g.ThresholdNow(), want)
				}
				if tc.unit == calibration.BandTicks || !math.IsNaN(x) {
					n++
				}
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
			u := "fresh scores since arming"
			if tc.unit == calibration.BandTicks {
				u = "running ticks since arming"
			}
			if d.Reason.Kind != KindEnergy || d.Reason.Threshold != tc.thr || !strings.Contains(d.Reason.Message, "closed-loop band from") || !strings.Contains(d.Reason.Message, u) {
				t.Fatalf("reason %+v, want the band in %s", d.Reason, u)
			}
			if evs := r.drain(); len(evs) == 0 || evs[0].Type != EventTrip || evs[0].Reason.Threshold != tc.thr {
				t.Fatalf("events %+v", evs)
			}
		})
	}
}

// While stopped — before arming, after a trip or a stop — the gate uses the
// start band, for its rule and for the reset check; an accepted reset
// starts counting ticks (or fresh scores) again.
func TestClosedLoopStoppedUsesStartBand(t *testing.T) {
	for _, unit := range []calibration.BandUnit{"", calibration.BandTicks} {
		t.Run(fmt.Sprintf("band_unit %q", unit), func(t *testing.T) { testClosedLoopStoppedUsesStartBand(t, unit) })
	}
}

func testClosedLoopStoppedUsesStartBand(t *testing.T, unit calibration.BandUnit) {
	r := newRigCal(t, closedLoopConfig(), closedLoopCalIn(unit))
	if th := r.g.Thresholds(); len(th) != 1 || th[0].Source != "calibration.closed_loop" || th[0].Value != 10 || len(th[0].Bands) != 2 {
		t.Fatalf("thresholds %+v", th)
	}
	if got := r.g.ThresholdNow(); got != 10 {
		t.Fatalf("before the first tick: ThresholdNow %v, want 10", got)
	}
	r.armGate()
	for range 25 {
		r.tick(nil)
	}
	if got := r.g.ThresholdNow(); got != 100 {
		t.Fatalf("after 25 ticks with fresh scores: ThresholdNow %v, want 100", got)
	}
	if err := r.g.Stop(context.Background(), "tester", "test"); err != nil {
		t.Fatal(err)
	}
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	if got := r.g.ThresholdNow(); got != 10 {
		t.Fatalf("stopped: ThresholdNow %v, want 10", got)
	}
	// 50 is below band 1's threshold but above the start band's: refused.
	err := r.resetAt(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	if !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), "still above the threshold") || !strings.Contains(err.Error(), "threshold 10") {
		t.Fatalf("reset at 50: %v", err)
	}
	var refused Event
	for _, e := range r.drain() {
		if e.Type == EventResetRefused {
			refused = e
		}
	}
	if refused.Reason.Threshold != 10 {
		t.Fatalf("refusal reason %+v", refused.Reason)
	}
	// Two more scores of 50 seen while stopped fill the window against the
	// start band: the rule is in alarm and the reset is refused even on a
	// low score, until the window clears.
	r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	if err := r.resetAt(nil); !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), "threshold 10 (closed-loop start band") {
		t.Fatalf("reset with the window in alarm: %v", err)
	}
	for range 5 {
		r.tick(nil)
	}
	if err := r.resetAt(nil); err != nil {
		t.Fatal(err)
	}
	// Counting restarted at the accepted reset: band 0 again.
	var d Decision
	for i := 0; i < 3; i++ {
		d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = 50 })
	}
	if d.State != Stopped || d.Reason.Threshold != 10 {
		t.Fatalf("after the reset: %+v", d.Reason)
	}
}

func TestThresholdAt(t *testing.T) {
	bands := []calibration.Band{{From: 0, Threshold: 1}, {From: 10, Threshold: 2}, {From: 30, Threshold: 3}}
	cases := []struct {
		th   Threshold
		n    int
		want float64
	}{
		{Threshold{Value: 5}, 0, 5},
		{Threshold{Value: 5}, 1000, 5},
		{Threshold{Value: 1, Bands: bands}, 0, 1},
		{Threshold{Value: 1, Bands: bands}, 9, 1},
		{Threshold{Value: 1, Bands: bands}, 10, 2},
		{Threshold{Value: 1, Bands: bands}, 29, 2},
		{Threshold{Value: 1, Bands: bands}, 30, 3},
		{Threshold{Value: 1, Bands: bands}, 1 << 40, 3},
	}
	for _, tc := range cases {
		if got := tc.th.At(tc.n); got != tc.want {
			t.Errorf("At(%d) with %d bands = %v, want %v", tc.n, len(tc.th.Bands), got, tc.want)
		}
	}
}

// Replay with bands counts fresh scores (ticks, for bands in ticks) from the
// start and from each trip.
func TestReplayBands(t *testing.T) {
	th := Threshold{Score: ScoreEnergy, Value: math.NaN(), // not used with bands
		Bands: []calibration.Band{{From: 0, Mean: 1, Std: 1, Threshold: 10}, {From: 3, Mean: 1, Std: 1, Threshold: 100}}}
	rc := RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 2, M: 3}}
	cases := []struct {
		name  string
		trace []float64
		want  []int
	}{
		{"band 0 trips", []float64{50, 50}, []int{1}},
		{"band 1 does not", []float64{1, 1, 1, 50, 50, 50}, nil},
		{"NaN does not advance", []float64{1, nan(), nan(), 1, 50, 50}, nil},
		{"NaN does not advance, band 0", []float64{nan(), 1, nan(), 50, 50}, []int{4}},
		{"restart after a trip", []float64{50, 50, 1, 50, 50, 1, 1, 1, 50, 50}, []int{1, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replay(rc, th, tc.trace)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("trips %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	// In ticks every entry counts, NaN or not.
	ticks := th
	ticks.BandUnit = calibration.BandTicks
	tickCases := []struct {
		name  string
		trace []float64
		want  []int
	}{
		{"band 0 trips", []float64{50, 50}, []int{1}},
		{"NaN advances: band 1", []float64{1, nan(), nan(), 1, 50, 50}, nil},
		{"a NaN tick moves the second 50 into band 1", []float64{nan(), 1, 50, 50}, nil},
		{"band 0 with a gap", []float64{50, nan(), 50}, []int{2}},
		{"restart after a trip, the gap counted", []float64{50, 50, nan(), 50, 50}, []int{1, 4}},
	}
	for _, tc := range tickCases {
		t.Run("ticks: "+tc.name, func(t *testing.T) {
			got, err := Replay(rc, ticks, tc.trace)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("trips %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	ticks.BandUnit = "seconds"
	if _, err := Replay(rc, ticks, nil); err == nil || !strings.Contains(err.Error(), `threshold.band_unit: got "seconds"`) {
		t.Fatalf("bad unit: %v", err)
	}
	bad := th
	bad.Bands = []calibration.Band{{From: 1, Std: 1, Threshold: 10}}
	if _, err := Replay(rc, bad, nil); err == nil || !strings.Contains(err.Error(), "threshold.bands[0].from") {
		t.Fatalf("bad bands: %v", err)
	}
}

// Thresholds hands out copies: changing them does not change the gate.
func TestThresholdsCopyBands(t *testing.T) {
	r := newRigCal(t, closedLoopConfig(), closedLoopCal())
	th := r.g.Thresholds()
	th[0].Bands[0].Threshold = -1
	if got := r.g.Thresholds()[0].Bands[0].Threshold; got != 10 {
		t.Fatalf("the gate's band changed to %v", got)
	}
}

func TestClosedLoopTickAllocatesNothing(t *testing.T) {
	for _, unit := range []calibration.BandUnit{"", calibration.BandTicks, calibration.BandFreshScores} {
		t.Run(fmt.Sprintf("band_unit %q", unit), func(t *testing.T) { testClosedLoopTickAllocatesNothing(t, unit) })
	}
}

func testClosedLoopTickAllocatesNothing(t *testing.T, unit calibration.BandUnit) {
	r := newRigCal(t, closedLoopConfig(), closedLoopCalIn(unit))
	r.arm.record = false
	r.armGate()
	in := r.next()
	k := 0
	sum := 0.0
	allocs := testing.AllocsPerRun(1000, func() {
		k++
		r.advance(in)
		in.Scores[ScoreEnergy] = float64(k % 7)
		if _, err := r.g.Tick(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		sum += r.g.ThresholdNow()
	})
	if r.g.Status().State != Running || r.g.ThresholdNow() != 100 {
		t.Fatalf("state %v, threshold %v", r.g.Status().State, r.g.ThresholdNow())
	}
	if allocs != 0 {
		t.Fatalf("running tick with closed-loop bands allocates %v times", allocs)
	}
	_ = sum
}

// A closed-loop calibration the stop cannot use is a warning only when its
// score is watched (a config threshold or another rule overrides it); when
// the default watch set leaves that score out, as it does the policy energy
// of a bundle with the state term, the gate says so at info level.
func TestClosedLoopUnusedLogLevel(t *testing.T) {
	five := 5.0
	cases := []struct {
		name   string
		scores []ScoreConfig
		want   string // the level of the line about calibration.closed_loop
	}{
		{"default watch set: state_energy alone", nil, "INFO"},
		{"energy with a config threshold", []ScoreConfig{{Name: "energy", Threshold: &five}}, "WARN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cal := closedLoopCalIn(calibration.BandTicks)
			cal.StateEnergy = &calibration.ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 4}}
			cfg := closedLoopConfig()
			cfg.Energy.Scores = c.scores
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			if _, err := New(newFakeArm(), cfg, cal, Options{Logger: log}); err != nil {
				t.Fatal(err)
			}
			var got string
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.Contains(line, "closed_loop_score=energy") {
					got = strings.TrimPrefix(strings.Fields(line)[1], "level=")
				}
			}
			if got != c.want {
				t.Errorf("line about the unused calibration at level %q, want %q; log:\n%s", got, c.want, buf.String())
			}
		})
	}
}

// The gate refuses a closed-loop calibration that does not validate
// (calibration.ClosedLoop.Validate), one line per problem in its own words.
func TestGateRefusesAnInvalidClosedLoop(t *testing.T) {
	for _, unit := range []calibration.BandUnit{"seconds", "Ticks"} {
		cal := closedLoopCalIn(unit)
		_, err := New(newFakeArm(), closedLoopConfig(), cal, Options{})
		want := fmt.Sprintf(`safety: calibration.closed_loop.band_unit: got %q, expected "ticks" (running control ticks since arming) or "fresh_scores"`, unit)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("band_unit %q: %v, want one line starting %q", unit, err, want)
		}
	}
	cal := closedLoopCal()
	cal.ClosedLoop.Alpha, cal.ClosedLoop.Bands[1].Std = 2, 0
	_, err := New(newFakeArm(), closedLoopConfig(), cal, Options{})
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "safety: calibration.closed_loop.alpha: got 2") ||
		!strings.HasPrefix(lines[1], "safety: calibration.closed_loop.bands[1].std: got 0") {
		t.Fatalf("two problems: %v", err)
	}
	var ke *calibration.KeyError
	if !errors.As(err, &ke) || ke.Key != "calibration.closed_loop.alpha" {
		t.Fatalf("the problems do not unwrap to calibration.KeyError: %v", err)
	}
}

// The gate trips exactly where Replay does, with closed-loop bands in
// either unit, on random per-tick traces with ticks lacking a fresh score:
// Replay, which the offline calibration and research scripts judge traces
// with, is the gate's own rule.
func TestGateAgreesWithReplayOnBands(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	cfg := closedLoopConfig()
	trips := 0
	for trial := range 200 {
		unit := []calibration.BandUnit{calibration.BandTicks, calibration.BandFreshScores}[trial%2]
		cal := closedLoopCalIn(unit)
		xs := make([]float64, 20+rng.IntN(40))
		for i := range xs {
			switch {
			case rng.IntN(5) == 0 && (i == 0 || !math.IsNaN(xs[i-1])):
				xs[i] = nan() // never two in a row: the score watchdog would stop
			case i < 20: // about band 0's mean and std (threshold at 2 std)
				xs[i] = 6 + 1.5*2*rng.NormFloat64()
			default: // about band 1's
				xs[i] = 90 + 1.5*5*rng.NormFloat64()
			}
		}
		r := newRigCal(t, cfg, cal)
		r.armGate()
		trip := -1
		for i, x := range xs {
			if d := r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = x }); d.State == Stopped {
				if d.Reason.Kind != KindEnergy {
					t.Fatalf("trial %d: stopped at %d for %v: %s", trial, i, d.Reason.Kind, d.Reason.Message)
				}
				trip = i
				break
			}
		}
		replayed, err := Replay(cfg.Energy.Rule, r.g.Thresholds()[0], xs)
		if err != nil {
			t.Fatal(err)
		}
		first := -1
		if len(replayed) > 0 {
			first = replayed[0]
		}
		if first != trip {
			t.Fatalf("trial %d (%s): the gate tripped at %d, Replay at %d (−1: never); trace %v", trial, unit, trip, first, xs)
		}
		if trip >= 0 {
			trips++
		}
	}
	t.Logf("%d of 200 traces tripped", trips)
	if trips < 20 || trips > 180 {
		t.Fatalf("%d of 200 traces tripped: the traces do not test both sides", trips)
	}
}
