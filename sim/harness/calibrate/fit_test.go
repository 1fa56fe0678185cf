package calibrate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/safety"
)

// Fit on traces small enough to compute by hand.
func TestFitClosedLoopHandComputed(t *testing.T) {
	cases := []struct {
		name   string
		traces [][]float64
		o      FitOptions
		q      float64
		bands  []calibration.Band
		fit    int
	}{
		{
			// One band: mean 2, std 1 (population). Conformal z: episode
			// [2, 4] → 0, 2 (score 2); [3, NaN, 2.5] → 1, 0.5 (score 1).
			// k = ⌈3·0.5⌉ = 2: q = 2, threshold 2 + 2·1.
			name:   "1 of 1, one band",
			traces: [][]float64{{1, 3}, {3, 1}, {2, 4}, {3, nan(), 2.5}},
			o:      FitOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1},
			q:      2, bands: []calibration.Band{{From: 0, Mean: 2, Std: 1, Threshold: 4}}, fit: 2,
		},
		{
			// Bands in fresh scores. calibration.Band 0 (scores 0–1): 10, 12, 12, 10 →
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
			o: FitOptions{Alpha: 0.25, N: 2, M: 3, FitEpisodes: 2, BandUnit: calibration.BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 2, bands: []calibration.Band{{From: 0, Mean: 11, Std: 1, Threshold: 13}, {From: 2, Mean: 103, Std: 2, Threshold: 107}}, fit: 2,
		},
		{
			// As above with q from the 2nd of 3 conformal scores (alpha 0.5:
			// k = ⌈4·0.5⌉ = 2): q = 1.
			name: "2 of 3, q below the largest",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: FitOptions{Alpha: 0.5, N: 2, M: 3, FitEpisodes: 2, BandUnit: calibration.BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 1, bands: []calibration.Band{{From: 0, Mean: 11, Std: 1, Threshold: 12}, {From: 2, Mean: 103, Std: 2, Threshold: 105}}, fit: 2,
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
			o: FitOptions{Alpha: 0.5, N: 2, M: 3, FitEpisodes: 2, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q: 0.5, bands: []calibration.Band{{From: 0, Mean: 11, Std: 1, Threshold: 11.5}, {From: 2, Mean: 103, Std: 2, Threshold: 104}}, fit: 2,
		},
		{
			// NaN ticks in the fit episodes, 1 of 1, bands from 0 and 2. In
			// ticks, 101 and 105 sit at ticks 2 and 3: band 0 is 10, 12
			// (mean 11, std 1), band 1 is 101, 105, 105, 101 (mean 103,
			// std 2). Conformal max z: [11 NaN 107] → 0, 2: 2;
			// [12 NaN 104] → 1, 0.5: 1. k = ⌈3·0.5⌉ = 2: q = 2.
			name:   "ticks: fit scores fall in their tick's band",
			traces: [][]float64{{10, nan(), 101, 105}, {12, nan(), 105, 101}, {11, nan(), 107}, {12, nan(), 104}},
			o:      FitOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q:      2, bands: []calibration.Band{{From: 0, Mean: 11, Std: 1, Threshold: 13}, {From: 2, Mean: 103, Std: 2, Threshold: 107}}, fit: 2,
		},
		{
			// The same traces in fresh scores: 101 and 105 are fresh scores
			// 1, so band 0 is 10, 101, 12, 105 (mean 57, population std
			// s = √2118.5) and band 1 is 105, 101 (mean 103, std 2). Both
			// conformal episodes have two fresh scores, both in band 0:
			// max z 50/s and 47/s. q = 50/s.
			name:   "fresh scores: the same traces, NaN ticks not counted",
			traces: [][]float64{{10, nan(), 101, 105}, {12, nan(), 105, 101}, {11, nan(), 107}, {12, nan(), 104}},
			o:      FitOptions{Alpha: 0.5, N: 1, M: 1, BandUnit: calibration.BandFreshScores, BandStarts: []int{0, 2}, MinBandSamples: 1},
			q:      50 / math.Sqrt(2118.5),
			bands: []calibration.Band{{From: 0, Mean: 57, Std: math.Sqrt(2118.5), Threshold: 107},
				{From: 2, Mean: 103, Std: 2, Threshold: 103 + 100/math.Sqrt(2118.5)}}, fit: 2,
		},
		{
			// calibration.Band 0 has 4 fit samples, fewer than 5: it absorbs band 1, one
			// band of 10, 12, 101, 105 twice: mean 57, population std
			// s = √2118.5. Conformal x − 57 and the 2nd largest of the last 3:
			//   [11 13 103 107 99] → −46 −44 46 50 42 → −46, −44, 46, 46
			//   [12 NaN 12 104]    → −45 −45 47       → −45, −45
			// k = 3: q = 46/s, threshold 57 + 46.
			name: "thin band merged",
			traces: [][]float64{{10, 12, 101, 105}, {12, 10, 105, 101},
				{11, 13, 103, 107, 99}, {12, nan(), 12, 104}, {14}},
			o: FitOptions{Alpha: 0.25, N: 2, M: 3, FitEpisodes: 2, BandStarts: []int{0, 2}, MinBandSamples: 5},
			q: 46 / math.Sqrt(2118.5), bands: []calibration.Band{{From: 0, Mean: 57, Std: math.Sqrt(2118.5), Threshold: 103}}, fit: 2,
		},
		{
			// Constant fit scores: the std floor 1e-6·|mean| + 1e-12.
			// Default split: 2 of 4 episodes fit.
			name:   "std floor",
			traces: [][]float64{{5, 5}, {5, 5}, {5, 5}, {5, 5.00001}},
			o:      FitOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1},
			q:      (5.00001 - 5) / (5e-6 + 1e-12), bands: []calibration.Band{{From: 0, Mean: 5, Std: 5e-6 + 1e-12, Threshold: 5.00001}}, fit: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := Fit(tc.traces, tc.o)
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
				unit = calibration.BandTicks
			}
			if cl.Score != "energy" || cl.Alpha != tc.o.Alpha || cl.Rule != (calibration.Rule{Kind: calibration.RuleNOfM, N: n, M: m}) || cl.BandUnit != unit ||
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
	cl, err := Fit(traces, FitOptions{Alpha: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var from []int
	for _, b := range cl.Bands {
		from = append(from, b.From)
	}
	if !slices.Equal(from, DefaultBandStarts()) || cl.Rule != (calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5}) || cl.FitEpisodes != 20 || cl.ConformalEpisodes != 20 {
		t.Fatalf("defaults: bands from %v, rule %+v, fit %d, conformal %d", from, cl.Rule, cl.FitEpisodes, cl.ConformalEpisodes)
	}
	// 20 fit episodes of 12 scores: band 0 has 200 samples, band 10–29
	// only 40 (< 50): merged, one band left.
	short := make([][]float64, 40)
	for e := range short {
		short[e] = traces[e][:12]
	}
	if cl, err = Fit(short, FitOptions{Alpha: 0.1}); err != nil || len(cl.Bands) != 1 {
		t.Fatalf("short episodes: %+v, %v", cl, err)
	}
	// calibration.Band 0 absorbs the bands after it while it is too thin.
	if cl, err = Fit(short, FitOptions{Alpha: 0.1, BandStarts: []int{0, 1, 5}, MinBandSamples: 50}); err != nil || len(cl.Bands) != 2 || cl.Bands[1].From != 5 {
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
		o      FitOptions
		want   string
	}{
		{"alpha 0", ok(40, 60), FitOptions{}, "alpha 0 is not in (0, 1)"},
		{"alpha 1", ok(40, 60), FitOptions{Alpha: 1}, "alpha 1 is not in (0, 1)"},
		{"alpha NaN", ok(40, 60), FitOptions{Alpha: math.NaN()}, "alpha NaN is not in (0, 1)"},
		{"too few conformal episodes", ok(18, 60), FitOptions{Alpha: 0.05},
			"safety: 9 conformal episodes cannot certify alpha 0.05: need at least 19 (38 episodes in all, 19 fit + 19 conformal, or a larger alpha)"},
		{"too few with a fit count", ok(30, 60), FitOptions{Alpha: 0.05, FitEpisodes: 25},
			"safety: 5 conformal episodes cannot certify alpha 0.05: need at least 19 (44 episodes in all, 25 fit + 19 conformal, or a larger alpha)"},
		{"infinite score", withInf, FitOptions{Alpha: 0.1}, "trace 3, entry 17 is +Inf"},
		{"rule", ok(40, 60), FitOptions{Alpha: 0.1, N: 6, M: 5}, "rule 6 of 5"},
		{"band starts", ok(40, 60), FitOptions{Alpha: 0.1, BandStarts: []int{5, 10}}, "band starts [5 10]"},
		{"band starts order", ok(40, 60), FitOptions{Alpha: 0.1, BandStarts: []int{0, 10, 10}}, "strictly increasing"},
		{"band unit", ok(40, 60), FitOptions{Alpha: 0.1, BandUnit: "seconds"}, `band unit "seconds": expected "ticks" (running control ticks since arming) or "fresh_scores"`},
		{"one episode", ok(1, 60), FitOptions{Alpha: 0.1}, "need at least 2"},
		{"fit all", ok(40, 60), FitOptions{Alpha: 0.1, FitEpisodes: 40}, "40 fit episodes of 40"},
		{"too few fit samples", ok(40, 2), FitOptions{Alpha: 0.1}, "fewer than the 50 one band needs"},
		{"conformal episodes too short", short, FitOptions{Alpha: 0.1}, "20 of 20 conformal episodes have fewer than 3 fresh scores"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := Fit(tc.traces, tc.o)
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
		unit := []calibration.BandUnit{calibration.BandTicks, calibration.BandFreshScores}[rng.IntN(2)]
		bands := []calibration.Band{{From: 0, Mean: 10 * rng.NormFloat64(), Std: 0.5 + rng.Float64()}}
		for nb := 1 + rng.IntN(4); len(bands) < nb; {
			b := bands[len(bands)-1]
			bands = append(bands, calibration.Band{From: b.From + 1 + rng.IntN(6), Mean: 10 * rng.NormFloat64(), Std: 0.5 + 2*rng.Float64()})
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
			if unit == calibration.BandTicks {
				k = i
			}
			b := bands[calibration.BandAt(bands, k)]
			trace[i] = b.Mean + b.Std*(rng.NormFloat64()+0.5*rng.NormFloat64())
			xs, at = append(xs, trace[i]), append(at, k)
		}
		s := episodeScore(xs, at, bands, n, m, make([]float64, m))
		q := 3 * rng.NormFloat64()
		if math.Abs(s-q) < 1e-9 {
			continue // a tie up to rounding: either answer is right
		}
		th := safety.Threshold{Score: safety.ScoreEnergy, Bands: slices.Clone(bands), BandUnit: unit}
		for i := range th.Bands {
			th.Bands[i].Threshold = th.Bands[i].Mean + q*th.Bands[i].Std
		}
		trips, err := safety.Replay(safety.RuleConfig{Kind: calibration.RuleNOfM, NOfM: safety.NOfMConfig{N: n, M: m}}, th, trace)
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
// episodes judged by Replay, the gate's own rule with the bands the gate
// resolves from the calibration (safety's TestGateAgreesWithReplayOnBands
// checks that the gate trips exactly where Replay does): the fraction that
// trips is about alpha — at most alpha plus the sampling margin, and not
// trivially below it (a threshold far too loose fails too).
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
	rule := safety.DefaultConfig().Energy.Rule
	trips, total := 0, 0
	for c := 0; c < calibrations; c++ {
		traces := make([][]float64, 40)
		for e := range traces {
			traces[e] = gen.episode()
		}
		cl, err := Fit(traces, FitOptions{Alpha: alpha})
		if err != nil {
			t.Fatal(err)
		}
		if cl.BandUnit != calibration.BandTicks {
			t.Fatalf("fitted in %q, want ticks", cl.BandUnit)
		}
		if c == 0 {
			t.Logf("calibration 0: q %.3f, bands %+v", cl.Q, cl.Bands)
		}
		th := safety.Threshold{Score: safety.ScoreEnergy, Value: cl.Bands[0].Threshold, Bands: cl.Bands, BandUnit: cl.Unit()}
		for e := 0; e < fresh; e++ {
			replayed, err := safety.Replay(rule, th, gen.episode())
			if err != nil {
				t.Fatal(err)
			}
			if len(replayed) > 0 {
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
	rule := safety.RuleConfig{Kind: calibration.RuleNOfM, NOfM: safety.NOfMConfig{N: 2, M: 5}}
	trips, hours := 0, 0.0
	for c := 0; c < calibrations; c++ {
		cl, err := Fit(drive(0.52), FitOptions{TripsPerHour: rate, RateHz: hz, Standardized: true, N: 2, M: 5, Score: safety.ScoreStateEnergy})
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.Bands) != 1 || cl.Bands[0] != (calibration.Band{From: 0, Mean: 0, Std: 1, Threshold: cl.Q}) || cl.FitEpisodes != 0 {
			t.Fatalf("standardized fit: bands %+v, %d fit episodes", cl.Bands, cl.FitEpisodes)
		}
		if cl.TripsPerHour != rate || cl.ConformalHours < 0.52 || cl.Alpha != rate*cl.ConformalHours/float64(cl.ConformalEpisodes) {
			t.Fatalf("provenance: trips_per_hour %v conformal_hours %v alpha %v over %d episodes", cl.TripsPerHour, cl.ConformalHours, cl.Alpha, cl.ConformalEpisodes)
		}
		if err := cl.Validate(); err != nil {
			t.Fatal(err)
		}
		th := safety.Threshold{Score: safety.ScoreStateEnergy, Value: cl.Q, Bands: cl.Bands, BandUnit: cl.Unit()}
		for _, xs := range drive(1) {
			got, err := safety.Replay(rule, th, xs)
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
		o      FitOptions
		want   string
	}{
		// 40 episodes of 100 ticks at 20 Hz: 200 s, 0.0556 h
		{"too short", eps(40, 100), FitOptions{TripsPerHour: 1, RateHz: 20, Standardized: true},
			"safety: 40 conformal episodes with 0.0556 h of running cannot certify a false-trip rate of 1 per hour: need at least 1 h of conformal level-0 driving (about 680 more episodes like these), or a higher rate"},
		{"every episode", eps(40, 100), FitOptions{TripsPerHour: 1000, RateHz: 20, Standardized: true}, "lets every episode trip"},
		{"no episodes", nil, FitOptions{TripsPerHour: 1, RateHz: 20, Standardized: true}, "no closed-loop episodes"},
		{"no rate", eps(40, 100), FitOptions{TripsPerHour: 1, Standardized: true}, "needs the traces' control rate"},
		{"negative", eps(40, 100), FitOptions{TripsPerHour: -1, RateHz: 20}, "false trips per hour -1"},
		{"fresh scores", eps(40, 100), FitOptions{TripsPerHour: 1, RateHz: 20, BandUnit: calibration.BandFreshScores}, "one entry per running tick"},
		{"standardized with fit episodes", eps(40, 100), FitOptions{Alpha: 0.1, Standardized: true, FitEpisodes: 5}, "it fits no bands"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := Fit(tc.traces, tc.o)
			if err == nil {
				t.Fatalf("accepted: %+v", cl)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "safety: ") {
				t.Fatalf("error %q, want one line with %q", msg, tc.want)
			}
		})
	}
}

// Fit's one-tick ceiling on standardized traces small enough to
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
			cl, err := Fit(traces, FitOptions{Alpha: tc.alpha, N: 2, M: 3, Standardized: true, Score: safety.ScoreStateEnergy, CeilingAlpha: tc.ceil})
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
	cl, err := Fit(traces, FitOptions{Alpha: 0.5, N: 2, M: 3, Standardized: true})
	if err != nil || cl.Ceiling != nil {
		t.Fatalf("no ceiling alpha: ceiling %+v (%v), want none", cl.Ceiling, err)
	}
}

// Bands: the ceiling is a z-score, applied as each band's Mean + Q·Std.
func TestFitClosedLoopCeilingBands(t *testing.T) {
	// Fit: mean 2, std 1. Conformal z: [2 4] → 0 2, [3 NaN 12] → 1 10.
	// 1 of 1, alpha 0.5: k = ⌈3·0.5⌉ = 2: q = 10 (2nd of 2, 10).
	// Ceiling alpha 0.5: the same, 10.
	cl, err := Fit([][]float64{{1, 3}, {3, 1}, {2, 4}, {3, nan(), 12}},
		FitOptions{Alpha: 0.5, N: 1, M: 1, BandStarts: []int{0}, MinBandSamples: 1, CeilingAlpha: 0.5})
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
		o    FitOptions
		want string
	}{
		{"ceiling alpha above 1", FitOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: 1.5}, "ceiling alpha 1.5 is not in (0, 1)"},
		{"negative ceiling alpha", FitOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: -0.1}, "ceiling alpha -0.1 is not in (0, 1)"},
		{"too few episodes for the ceiling", FitOptions{Alpha: 0.5, Standardized: true, CeilingAlpha: 0.1}, "5 conformal episodes cannot certify the ceiling's alpha 0.1: need at least 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Fit(traces, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.want)
			}
		})
	}
}

// FitCeiling adds a ceiling to a calibration fitted earlier: its own
// episodes, the calibration's bands and unit, at least its q.
func TestFitCeiling(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5}, Q: 2, BandUnit: calibration.BandTicks,
		Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 14}, {From: 2, Mean: 100, Std: 10, Threshold: 120}}}
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
	fresh.BandUnit = calibration.BandFreshScores
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
	} else if err := (&calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: cl.Rule, Q: 2, Bands: cl.Bands, Ceiling: c}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		traces [][]float64
		cl     *calibration.ClosedLoop
		alpha  float64
		want   string
	}{
		{traces, cl, 0.1, "3 episodes cannot certify the ceiling's alpha 0.1: need at least 9"},
		{traces, cl, 0, "ceiling alpha 0 is not in (0, 1)"},
		{traces, &calibration.ClosedLoop{Score: "energy"}, 0.5, "calibration.closed_loop"},
		{[][]float64{{nan()}, {nan()}, {nan()}}, cl, 0.5, "no fresh score"},
		{[][]float64{{math.Inf(1)}, {1}, {1}}, cl, 0.5, "entry 0 is +Inf"},
	} {
		if _, err := FitCeiling(tc.traces, tc.cl, tc.alpha, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FitCeiling: %v, want %q", err, tc.want)
		}
	}
}

// Fit writes the score its traces hold.
func TestFitClosedLoopScoreName(t *testing.T) {
	traces := make([][]float64, 20)
	for e := range traces {
		traces[e] = make([]float64, 60)
		for i := range traces[e] {
			traces[e][i] = math.Sin(float64(e*7+i)) + 0.1*float64(e%3)
		}
	}
	for _, tc := range []struct {
		score safety.Score
		want  string
	}{{0, "energy"}, {safety.ScoreCentered, "centered_energy"}, {safety.ScoreStateEnergy, "state_energy"}} {
		cl, err := Fit(traces, FitOptions{Alpha: 0.2, Score: tc.score})
		if err != nil {
			t.Fatal(err)
		}
		if cl.Score != tc.want || cl.Validate() != nil {
			t.Errorf("Score %v: closed loop score %q (%v), want %q", tc.score, cl.Score, cl.Validate(), tc.want)
		}
	}
	if _, err := Fit(traces, FitOptions{Alpha: 0.2, Score: safety.NumScores}); err == nil || !strings.Contains(err.Error(), "state_energy") {
		t.Errorf("unknown score: %v", err)
	}
}

func nan() float64 { return math.NaN() }

// Fit counts bands in running ticks and writes so: band_unit "ticks" in the
// manifest.
func TestFitWritesTicks(t *testing.T) {
	fitted, err := Fit([][]float64{{1, 3}, {3, 1}, {2, 4}, {3, 2.5}}, FitOptions{Alpha: 0.5, N: 1, M: 1, MinBandSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(fitted); !strings.Contains(string(data), `"band_unit":"ticks"`) {
		t.Fatalf("Fit writes %s", data)
	}
}
