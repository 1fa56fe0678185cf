package safety

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FitClosedLoop on traces small enough to compute by hand.
func TestFitClosedLoopHandComputed(t *testing.T) {
	cases := []struct {
		name   string
		traces [][]float64
		o      ClosedLoopOptions
		q      float64
		bands  []Band
		fit    int
	}{
		{
			// One band: mean 2, std 1 (population). Conformal z: episode
			// [2, 4] → 0, 2 (score 2); [3, NaN, 2.5] → 1, 0.5 (score 1).
			// k = ⌈3·0.5⌉ = 2: q = 2, threshold 2 + 2·1.
			name:   "1 of 1, one band",
			traces: [][]float64{{1, 3}, {3, 1}, {2, 4}, {3, nan(), 2.5}},
			o:      ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1},
			q:      2, bands: []Band{{From: 0, Mean: 2, Std: 1, Threshold: 4}}, fit: 2,
		},
		{
			// Bands in fresh scores. Band 0 (scores 0–1): 10, 12, 12, 10 →
			// mean 11, std 1; band 1 (2 on): 101, 105, 105, 101 → mean 103,
			// std 2. Conformal z and the 2nd largest of the last 3 (from 2
			// scores on):
			//   [11 13 103 107 99] → z 0 2 0 2 −2 → 0, 0, 2, 0: score 2
			//   [12 NaN 12 104]    → z 1 1 0.5    → 1, 1:       score 1
			//   [14]               → one score:                  −Inf
			// k = ⌈4·0.75⌉ = 3: q = 2, thresholds 11 + 2·1 and 103 + 2·2.
			name: "2 of 3, two bands, a short conformal episode",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: ClosedLoopOptions{Alpha: 0.25, N: 2, M: 3, FitEpisodes: 2, BandUnit: BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 2, bands: []Band{{From: 0, Mean: 11, Std: 1, Threshold: 13}, {From: 2, Mean: 103, Std: 2, Threshold: 107}}, fit: 2,
		},
		{
			// As above with q from the 2nd of 3 conformal scores (alpha 0.5:
			// k = ⌈4·0.5⌉ = 2): q = 1.
			name: "2 of 3, q below the largest",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: ClosedLoopOptions{Alpha: 0.5, N: 2, M: 3, FitEpisodes: 2, BandUnit: BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 1, bands: []Band{{From: 0, Mean: 11, Std: 1, Threshold: 12}, {From: 2, Mean: 103, Std: 2, Threshold: 105}}, fit: 2,
		},
		{
			// The same traces in ticks (the default): the fit traces have
			// no NaN, so the bands are the same, but the NaN tick of
			// [12 NaN 12 104] puts its second 12 at tick 2, in band 1,
			// while the 2-of-3 window still runs over its three fresh
			// scores: z 1 −45.5 0.5 → −45.5, 0.5: score 0.5. The other
			// conformal scores stay 2 and −Inf; k = 2: q = 0.5.
			name: "2 of 3 in ticks: a NaN tick moves the next score into band 1",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: ClosedLoopOptions{Alpha: 0.5, N: 2, M: 3, FitEpisodes: 2, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 0.5, bands: []Band{{From: 0, Mean: 11, Std: 1, Threshold: 11.5}, {From: 2, Mean: 103, Std: 2, Threshold: 104}}, fit: 2,
		},
		{
			// NaN ticks in the fit episodes, 1 of 1, bands from 0 and 2. In
			// ticks, 101 and 105 sit at ticks 2 and 3: band 0 is 10, 12
			// (mean 11, std 1), band 1 is 101, 105, 105, 101 (mean 103,
			// std 2). Conformal max z: [11 NaN 107] → 0, 2: 2;
			// [12 NaN 104] → 1, 0.5: 1. k = ⌈3·0.5⌉ = 2: q = 2.
			name:   "ticks: fit scores fall in their tick's band",
			traces: [][]float64{{10, nan(), 101, 105}, {12, nan(), 105, 101}, {11, nan(), 107}, {12, nan(), 104}},
			o:      ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q:      2, bands: []Band{{From: 0, Mean: 11, Std: 1, Threshold: 13}, {From: 2, Mean: 103, Std: 2, Threshold: 107}}, fit: 2,
		},
		{
			// The same traces in fresh scores: 101 and 105 are fresh scores
			// 1, so band 0 is 10, 101, 12, 105 (mean 57, population std
			// s = √2118.5) and band 1 is 105, 101 (mean 103, std 2). Both
			// conformal episodes have two fresh scores, both in band 0:
			// max z 50/s and 47/s. q = 50/s.
			name:   "fresh scores: the same traces, NaN ticks not counted",
			traces: [][]float64{{10, nan(), 101, 105}, {12, nan(), 105, 101}, {11, nan(), 107}, {12, nan(), 104}},
			o:      ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, BandUnit: BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q:      50 / math.Sqrt(2118.5),
			bands: []Band{{From: 0, Mean: 57, Std: math.Sqrt(2118.5), Threshold: 107},
				{From: 2, Mean: 103, Std: 2, Threshold: 103 + 100/math.Sqrt(2118.5)}}, fit: 2,
		},
		{
			// Band 0 has 4 fit samples, fewer than 5: it absorbs band 1, one
			// band of 10, 12, 101, 105 twice: mean 57, population std
			// s = √2118.5. Conformal x − 57 and the 2nd largest of the last 3:
			//   [11 13 103 107 99] → −46 −44 46 50 42 → −46, −44, 46, 46
			//   [12 NaN 12 104]    → −45 −45 47       → −45, −45
			// k = 3: q = 46/s, threshold 57 + 46.
			name: "thin band merged",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: ClosedLoopOptions{Alpha: 0.25, N: 2, M: 3, FitEpisodes: 2, BandStarts: []int{0, 2}, MinBandSamples: 5},
			q: 46 / math.Sqrt(2118.5), bands: []Band{{From: 0, Mean: 57, Std: math.Sqrt(2118.5), Threshold: 103}}, fit: 2,
		},
		{
			// Constant fit scores: the std floor 1e-6·|mean| + 1e-12.
			// Default split: 2 of 4 episodes fit.
			name:   "std floor",
			traces: [][]float64{{5, 5}, {5, 5}, {5, 5}, {5, 5.00001}},
			o:      ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1},
			q:      (5.00001 - 5) / (5e-6 + 1e-12), bands: []Band{{From: 0, Mean: 5, Std: 5e-6 + 1e-12, Threshold: 5.00001}}, fit: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := FitClosedLoop(tc.traces, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !near(cl.Q, tc.q) {
				t.Fatalf("q = %v, want %v", cl.Q, tc.q)
			}
			if len(cl.Bands) != len(tc.bands) {
				t.Fatalf("bands %+v, want %+v", cl.Bands, tc.bands)
			}
			for i, b := range cl.Bands {
				w := tc.bands[i]
				if b.From != w.From || !near(b.Mean, w.Mean) || !near(b.Std, w.Std) || !near(b.Threshold, w.Threshold) {
					t.Fatalf("band %d = %+v, want %+v", i, b, w)
				}
			}
			n, m := tc.o.N, tc.o.M
			unit := tc.o.BandUnit
			if unit == "" {
				unit = BandTicks
			}
			if cl.Score != "energy" || cl.Alpha != tc.o.Alpha || cl.Rule != (ClosedLoopRule{Kind: RuleNOfM, N: n, M: m}) || cl.BandUnit != unit ||
				cl.Episodes != len(tc.traces) || cl.FitEpisodes != tc.fit || cl.ConformalEpisodes != len(tc.traces)-tc.fit {
				t.Fatalf("header %+v", cl)
			}
			if err := cl.Validate(); err != nil {
				t.Fatalf("the fit does not validate: %v", err)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// Zero options take the documented defaults.
func TestFitClosedLoopDefaults(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	traces := make([][]float64, 40)
	for e := range traces {
		traces[e] = make([]float64, 200)
		for i := range traces[e] {
			traces[e][i] = 100 + 10*rng.NormFloat64()
		}
	}
	cl, err := FitClosedLoop(traces, ClosedLoopOptions{Alpha: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var from []int
	for _, b := range cl.Bands {
		from = append(from, b.From)
	}
	if !slices.Equal(from, DefaultBandStarts()) || cl.Rule != (ClosedLoopRule{Kind: RuleNOfM, N: 3, M: 5}) || cl.FitEpisodes != 20 || cl.ConformalEpisodes != 20 {
		t.Fatalf("defaults: bands from %v, rule %+v, fit %d, conformal %d", from, cl.Rule, cl.FitEpisodes, cl.ConformalEpisodes)
	}
	// 20 fit episodes of 12 scores: band 0 has 200 samples, band 10–29
	// only 40 (< 50): merged, one band left.
	short := make([][]float64, 40)
	for e := range short {
		short[e] = traces[e][:12]
	}
	if cl, err = FitClosedLoop(short, ClosedLoopOptions{Alpha: 0.1}); err != nil || len(cl.Bands) != 1 {
		t.Fatalf("short episodes: %+v, %v", cl, err)
	}
	// Band 0 absorbs the bands after it while it is too thin.
	if cl, err = FitClosedLoop(short, ClosedLoopOptions{Alpha: 0.1, BandStarts: []int{0, 1, 5}, MinBandSamples: 50}); err != nil || len(cl.Bands) != 2 || cl.Bands[1].From != 5 {
		t.Fatalf("thin band 0: %+v, %v", cl.Bands, err)
	}
	if MinConformalEpisodes(0.1) != 9 || MinConformalEpisodes(0.05) != 19 || MinConformalEpisodes(0.3) != 3 || MinConformalEpisodes(0.5) != 1 || MinConformalEpisodes(0) != math.MaxInt {
		t.Fatal("MinConformalEpisodes")
	}
}

// Every refusal is one line that says what to change.
func TestFitClosedLoopErrors(t *testing.T) {
	ok := func(n, length int) [][]float64 {
		tr := make([][]float64, n)
		for e := range tr {
			tr[e] = make([]float64, length)
			for i := range tr[e] {
				tr[e][i] = float64((e*7 + i*3) % 11)
			}
		}
		return tr
	}
	withInf := ok(40, 60)
	withInf[3][17] = math.Inf(1)
	short := ok(40, 60)
	for e := 20; e < 40; e++ {
		short[e] = short[e][:2]
	}
	cases := []struct {
		name   string
		traces [][]float64
		o      ClosedLoopOptions
		want   string
	}{
		{"alpha 0", ok(40, 60), ClosedLoopOptions{}, "alpha 0 is not in (0, 1)"},
		{"alpha 1", ok(40, 60), ClosedLoopOptions{Alpha: 1}, "alpha 1 is not in (0, 1)"},
		{"alpha NaN", ok(40, 60), ClosedLoopOptions{Alpha: math.NaN()}, "alpha NaN is not in (0, 1)"},
		{"too few conformal episodes", ok(18, 60), ClosedLoopOptions{Alpha: 0.05},
			"safety: 9 conformal episodes cannot certify alpha 0.05: need at least 19 (38 episodes in all, 19 fit + 19 conformal, or a larger alpha)"},
		{"too few with a fit count", ok(30, 60), ClosedLoopOptions{Alpha: 0.05, FitEpisodes: 25},
			"safety: 5 conformal episodes cannot certify alpha 0.05: need at least 19 (44 episodes in all, 25 fit + 19 conformal, or a larger alpha)"},
		{"infinite score", withInf, ClosedLoopOptions{Alpha: 0.1}, "trace 3, entry 17 is +Inf"},
		{"rule", ok(40, 60), ClosedLoopOptions{Alpha: 0.1, N: 6, M: 5}, "rule 6 of 5"},
		{"band starts", ok(40, 60), ClosedLoopOptions{Alpha: 0.1, BandStarts: []int{5, 10}}, "band starts [5 10]"},
		{"band starts order", ok(40, 60), ClosedLoopOptions{Alpha: 0.1, BandStarts: []int{0, 10, 10}}, "strictly increasing"},
		{"band unit", ok(40, 60), ClosedLoopOptions{Alpha: 0.1, BandUnit: "seconds"}, `band unit "seconds": expected "ticks" (running control ticks since arming) or "fresh_scores"`},
		{"one episode", ok(1, 60), ClosedLoopOptions{Alpha: 0.1}, "need at least 2"},
		{"fit all", ok(40, 60), ClosedLoopOptions{Alpha: 0.1, FitEpisodes: 40}, "40 fit episodes of 40"},
		{"too few fit samples", ok(40, 2), ClosedLoopOptions{Alpha: 0.1}, "fewer than the 50 one band needs"},
		{"conformal episodes too short", short, ClosedLoopOptions{Alpha: 0.1}, "20 of 20 conformal episodes have fewer than 3 fresh scores"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := FitClosedLoop(tc.traces, tc.o)
			if err == nil {
				t.Fatalf("accepted: %+v", cl)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "safety: ") {
				t.Fatalf("error %q, want one line with %q", msg, tc.want)
			}
		})
	}
}

// The conformal score is exactly the statistic the n-of-m rule trips on:
// with band thresholds mean + q·std, Replay trips on an episode iff its
// score exceeds q (for random per-tick traces with ticks lacking a fresh
// score, bands in either unit, rules and q).
func TestClosedLoopScoreMatchesTheRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	trials := 0
	for trial := 0; trial < 3000; trial++ {
		m := 1 + rng.IntN(8)
		n := 1 + rng.IntN(m)
		unit := []BandUnit{BandTicks, BandFreshScores}[rng.IntN(2)]
		bands := []Band{{From: 0, Mean: 10 * rng.NormFloat64(), Std: 0.5 + rng.Float64()}}
		for nb := 1 + rng.IntN(4); len(bands) < nb; {
			b := bands[len(bands)-1]
			bands = append(bands, Band{From: b.From + 1 + rng.IntN(6), Mean: 10 * rng.NormFloat64(), Std: 0.5 + 2*rng.Float64()})
		}
		trace := make([]float64, rng.IntN(40))
		var xs []float64 // the fresh scores
		var at []int     // where each falls in the bands' unit
		for i := range trace {
			if rng.IntN(4) == 0 {
				trace[i] = nan() // a tick without a fresh score
				continue
			}
			k := len(xs)
			if unit == BandTicks {
				k = i
			}
			b := bands[bandAt(bands, k)]
			trace[i] = b.Mean + b.Std*(rng.NormFloat64()+0.5*rng.NormFloat64())
			xs, at = append(xs, trace[i]), append(at, k)
		}
		s := episodeScore(xs, at, bands, n, m, make([]float64, m))
		q := 3 * rng.NormFloat64()
		if math.Abs(s-q) < 1e-9 {
			continue // a tie up to rounding: either answer is right
		}
		th := Threshold{Score: ScoreEnergy, Bands: slices.Clone(bands), BandUnit: unit}
		for i := range th.Bands {
			th.Bands[i].Threshold = th.Bands[i].Mean + q*th.Bands[i].Std
		}
		trips, err := Replay(RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: n, M: m}}, th, trace)
		if err != nil {
			t.Fatal(err)
		}
		trials++
		if (len(trips) > 0) != (s > q) {
			t.Fatalf("%d of %d in %s, bands %+v, q %v, trace %v: score %v but trips %v", n, m, unit, th.Bands, q, trace, s, trips)
		}
	}
	if trials < 2900 {
		t.Fatalf("only %d trials", trials)
	}
}

// episodeGen draws exchangeable synthetic level-0 episodes, one entry per
// running tick: a start transient that decays over the first ~10 ticks, a
// slow drift, a per-episode offset, AR(1) noise, a random length, and ticks
// without a fresh score (NaN; never two in a row, which the score watchdog
// would stop) with probability gap.
type episodeGen struct {
	rng *rand.Rand
	gap float64
}

func (g episodeGen) episode() []float64 {
	r := g.rng
	xs := make([]float64, 80+r.IntN(160))
	offset := 4 * r.NormFloat64()
	z := r.NormFloat64()
	for i := range xs {
		z = 0.6*z + 0.8*r.NormFloat64()
		xs[i] = 100 + offset + 60*math.Exp(-float64(i)/4) + 0.05*float64(i) + 8*z
		if i > 0 && !math.IsNaN(xs[i-1]) && r.Float64() < g.gap {
			xs[i] = math.NaN()
		}
	}
	return xs
}

// Coverage: closed-loop thresholds fitted on 20 + 20 episodes, then fresh
// episodes driven through the real gate (and Replay, which must agree): the
// fraction that trips is about alpha — at most alpha plus the sampling
// margin, and not trivially below it (a threshold far too loose fails too).
// The guarantee is marginal over the calibration draw, so it averages over
// 20 independent calibrations of 100 fresh episodes each. About one tick in
// five has no fresh score; the bands count ticks.
func TestClosedLoopCoverage(t *testing.T) {
	const (
		alpha        = 0.1
		calibrations = 20
		fresh        = 100
	)
	gen := episodeGen{rand.New(rand.NewPCG(2026, 11)), 0.25}
	cfg := testConfig()
	cfg.Energy.Scores = nil // the calibration's closed-loop score and bands
	cfg.Energy.Rule = DefaultConfig().Energy.Rule
	trips, total := 0, 0
	for c := 0; c < calibrations; c++ {
		traces := make([][]float64, 40)
		for e := range traces {
			traces[e] = gen.episode()
		}
		cl, err := FitClosedLoop(traces, ClosedLoopOptions{Alpha: alpha})
		if err != nil {
			t.Fatal(err)
		}
		if cl.BandUnit != BandTicks {
			t.Fatalf("fitted in %q, want ticks", cl.BandUnit)
		}
		if c == 0 {
			t.Logf("calibration 0: q %.3f, bands %+v", cl.Q, cl.Bands)
		}
		cal := &Calibration{ClosedLoop: cl, Recommended: Recommendation{Score: "energy", Threshold: 1e9}}
		for e := 0; e < fresh; e++ {
			xs := gen.episode()
			r := newRigCal(t, cfg, cal)
			r.armGate()
			tripped := false
			for i, x := range xs {
				d := r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = x })
				if d.State == Stopped {
					if d.Reason.Kind != KindEnergy || d.Reason.Threshold != cl.Bands[bandAt(cl.Bands, i)].Threshold {
						t.Fatalf("stopped at tick %d: %+v", i, d.Reason)
					}
					tripped = true
					break
				}
			}
			th := r.g.Thresholds()[0]
			if th.Source != "calibration.closed_loop" || th.BandUnit != BandTicks {
				t.Fatalf("threshold source %q, unit %q", th.Source, th.BandUnit)
			}
			replayed, err := Replay(cfg.Energy.Rule, th, xs)
			if err != nil || (len(replayed) > 0) != tripped {
				t.Fatalf("the gate tripped: %v, Replay: %v (%v)", tripped, replayed, err)
			}
			if tripped {
				trips++
			}
			total++
		}
	}
	// The expected trip rate is 1 − k/(n_c+1) = 2/21 ≈ 0.095; the spread of
	// the mean comes from the calibrations (each one's rate is Beta(2, 19)
	// distributed, variance ≈ 0.0039) and from the fresh episodes.
	rate := float64(trips) / float64(total)
	sd := math.Sqrt(0.0039/calibrations + alpha*(1-alpha)/float64(total))
	t.Logf("%d of %d fresh episodes tripped (%.3f; alpha %.2f, sd %.4f)", trips, total, rate, alpha, sd)
	if rate > alpha+3*sd {
		t.Errorf("trip rate %.3f exceeds alpha %.2f by more than 3 sd (%.3f): the closed-loop threshold is too tight", rate, alpha, 3*sd)
	}
	if rate < alpha/4 {
		t.Errorf("trip rate %.3f is below alpha/4: the closed-loop threshold is far looser than certified", rate)
	}
}

// closedLoopCal is a two-band calibration for the gate tests: threshold 10
// for the first 20 fresh scores since arming, 100 from then on, certified
// for the default 3 of 5 (the recommendation, 7, must not be used). It has
// no band_unit, as bundles calibrated before it: the bands count fresh
// scores.
func closedLoopCal() *Calibration { return closedLoopCalIn("") }

// closedLoopCalIn is closedLoopCal with its bands counted in unit.
func closedLoopCalIn(unit BandUnit) *Calibration {
	return &Calibration{
		Recommended: Recommendation{Score: "energy", Threshold: 7},
		ClosedLoop: &ClosedLoop{Score: "energy", Alpha: 0.1, Rule: ClosedLoopRule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2, BandUnit: unit,
			Bands: []Band{{From: 0, Mean: 6, Std: 2, Threshold: 10}, {From: 20, Mean: 90, Std: 5, Threshold: 100}}},
	}
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
	const none, ticks, fresh = BandUnit(""), BandTicks, BandFreshScores
	cases := []struct {
		name   string
		unit   BandUnit  // the calibration's band_unit ("": absent)
		scores []float64 // scores of the ticks after arming (NaN: none that tick)
		trip   int       // index into scores of the tripping tick; −1: none
		thr    float64   // Reason.Threshold at the trip
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
				if want := cal.ClosedLoop.Bands[bandAt(cal.ClosedLoop.Bands, n)].Threshold; d.State == Running && r.g.ThresholdNow() != want {
					t.Fatalf("tick %d (%d %s): ThresholdNow %v, want %v", i, n, cal.ClosedLoop.Unit(), r.g.ThresholdNow(), want)
				}
				if tc.unit == BandTicks || !math.IsNaN(x) {
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
			if tc.unit == BandTicks {
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
	for _, unit := range []BandUnit{"", BandTicks} {
		t.Run(fmt.Sprintf("band_unit %q", unit), func(t *testing.T) { testClosedLoopStoppedUsesStartBand(t, unit) })
	}
}

func testClosedLoopStoppedUsesStartBand(t *testing.T, unit BandUnit) {
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
	bands := []Band{{From: 0, Threshold: 1}, {From: 10, Threshold: 2}, {From: 30, Threshold: 3}}
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
		Bands: []Band{{From: 0, Mean: 1, Std: 1, Threshold: 10}, {From: 3, Mean: 1, Std: 1, Threshold: 100}}}
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
	ticks.BandUnit = BandTicks
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
	bad.Bands = []Band{{From: 1, Std: 1, Threshold: 10}}
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
	for _, unit := range []BandUnit{"", BandTicks, BandFreshScores} {
		t.Run(fmt.Sprintf("band_unit %q", unit), func(t *testing.T) { testClosedLoopTickAllocatesNothing(t, unit) })
	}
}

func testClosedLoopTickAllocatesNothing(t *testing.T, unit BandUnit) {
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
	want := ClosedLoop{Score: "energy", Alpha: 0.1, Rule: ClosedLoopRule{Kind: RuleNOfM, N: 3, M: 5}, Q: 2.31,
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
// scores, FitClosedLoop writes ticks, and Validate refuses anything else
// with one line naming the value and the choices.
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
				want := fmt.Sprintf(`safety: calibration.closed_loop.band_unit: got %q, expected "ticks" (running control ticks since arming) or "fresh_scores"`, cl.BandUnit)
				if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Validate: %v, want one line starting %q", err, want)
				}
				if _, err := New(newFakeArm(), closedLoopConfig(), &Calibration{ClosedLoop: &cl}, Options{}); err == nil || !strings.Contains(err.Error(), "band_unit") {
					t.Fatalf("New accepted band_unit %q: %v", cl.BandUnit, err)
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
	fitted, err := FitClosedLoop([][]float64{{1, 3}, {3, 1}, {2, 4}, {3, 2.5}}, ClosedLoopOptions{Alpha: 0.5, N: 1, M: 1, MinBandSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(fitted); !strings.Contains(string(data), `"band_unit":"ticks"`) {
		t.Fatalf("FitClosedLoop writes %s", data)
	}
}

func jsonUnmarshalStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Per hour: thresholds certified for a false-trip rate (TripsPerHour) on
// conformal episodes of half an hour at 20 Hz, then an hour of fresh
// episodes each: the trips per running hour average about the rate — at
// most it plus the sampling margin, and not trivially below it. The score is
// standardized (one band, every episode conformal), as the state term's is.
func TestClosedLoopPerHour(t *testing.T) {
	const (
		rate         = 2.0 // false trips per hour to certify
		hz           = 20.0
		calibrations = 10
	)
	gen := episodeGen{rand.New(rand.NewPCG(2026, 12)), 0.2}
	z := func(xs []float64) []float64 { // standardize the generator's score
		for i := range xs {
			xs[i] = (xs[i] - 100) / 10
		}
		return xs
	}
	// episodes until their running ticks reach h hours
	drive := func(h float64) [][]float64 {
		var out [][]float64
		for ticks := 0; float64(ticks) < h*3600*hz; {
			xs := z(gen.episode())
			out = append(out, xs)
			ticks += len(xs)
		}
		return out
	}
	rule := RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 2, M: 5}}
	trips, hours := 0, 0.0
	for c := 0; c < calibrations; c++ {
		cl, err := FitClosedLoop(drive(0.52), ClosedLoopOptions{TripsPerHour: rate, RateHz: hz, Standardized: true, N: 2, M: 5, Score: ScoreStateEnergy})
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.Bands) != 1 || cl.Bands[0] != (Band{From: 0, Mean: 0, Std: 1, Threshold: cl.Q}) || cl.FitEpisodes != 0 {
			t.Fatalf("standardized fit: bands %+v, %d fit episodes", cl.Bands, cl.FitEpisodes)
		}
		if cl.TripsPerHour != rate || cl.ConformalHours < 0.52 || cl.Alpha != rate*cl.ConformalHours/float64(cl.ConformalEpisodes) {
			t.Fatalf("provenance: trips_per_hour %v conformal_hours %v alpha %v over %d episodes", cl.TripsPerHour, cl.ConformalHours, cl.Alpha, cl.ConformalEpisodes)
		}
		if err := cl.Validate(); err != nil {
			t.Fatal(err)
		}
		th := Threshold{Score: ScoreStateEnergy, Value: cl.Q, Bands: cl.Bands, BandUnit: cl.Unit()}
		for _, xs := range drive(1) {
			got, err := Replay(rule, th, xs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) > 0 {
				trips++
			}
			hours += float64(len(xs)) / hz / 3600
		}
	}
	// Each calibration's per-episode trip probability is about Beta(1, n_c)
	// (q is the largest of n_c ≈ 230 conformal scores): its per-hour rate has
	// an sd about equal to the rate itself; plus the fresh episodes' count.
	per := float64(trips) / hours
	sd := math.Sqrt(rate*rate/calibrations + rate/hours)
	t.Logf("%d trips in %.2f h of fresh episodes: %.2f per hour (certified %.1f, sd %.2f)", trips, hours, per, rate, sd)
	if per > rate+3*sd {
		t.Errorf("%.2f false trips per hour exceeds the certified %.1f by more than 3 sd (%.2f)", per, rate, 3*sd)
	}
	if per < rate/5 {
		t.Errorf("%.2f false trips per hour is below a fifth of the certified %.1f: the threshold is far looser than certified", per, rate)
	}
}

func TestFitClosedLoopPerHourErrors(t *testing.T) {
	eps := func(n, length int) [][]float64 {
		tr := make([][]float64, n)
		for e := range tr {
			tr[e] = make([]float64, length)
			for i := range tr[e] {
				tr[e][i] = float64((e*7+i*3)%11) / 3
			}
		}
		return tr
	}
	cases := []struct {
		name   string
		traces [][]float64
		o      ClosedLoopOptions
		want   string
	}{
		// 40 episodes of 100 ticks at 20 Hz: 200 s, 0.0556 h
		{"too short", eps(40, 100), ClosedLoopOptions{TripsPerHour: 1, RateHz: 20, Standardized: true},
			"safety: 40 conformal episodes with 0.0556 h of running cannot certify a false-trip rate of 1 per hour: need at least 1 h of conformal level-0 driving (about 680 more episodes like these), or a higher rate"},
		{"every episode", eps(40, 100), ClosedLoopOptions{TripsPerHour: 1000, RateHz: 20, Standardized: true}, "lets every episode trip"},
		{"no episodes", nil, ClosedLoopOptions{TripsPerHour: 1, RateHz: 20, Standardized: true}, "no closed-loop episodes"},
		{"no rate", eps(40, 100), ClosedLoopOptions{TripsPerHour: 1, Standardized: true}, "needs the traces' control rate"},
		{"negative", eps(40, 100), ClosedLoopOptions{TripsPerHour: -1, RateHz: 20}, "false trips per hour -1"},
		{"fresh scores", eps(40, 100), ClosedLoopOptions{TripsPerHour: 1, RateHz: 20, BandUnit: BandFreshScores}, "one entry per running tick"},
		{"standardized with fit episodes", eps(40, 100), ClosedLoopOptions{Alpha: 0.1, Standardized: true, FitEpisodes: 5}, "it fits no bands"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := FitClosedLoop(tc.traces, tc.o)
			if err == nil {
				t.Fatalf("accepted: %+v", cl)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "safety: ") {
				t.Fatalf("error %q, want one line with %q", msg, tc.want)
			}
		})
	}
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
			cal := closedLoopCalIn(BandTicks)
			cal.StateEnergy = &ScoreStats{Mean: 0, Std: 1, Quantiles: map[string]float64{"99.9": 4}}
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
