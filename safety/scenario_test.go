package safety

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
)

// Synthetic energy traces (no evaluation traces exist yet): the in-
// distribution score is μ + σ·z with z an AR(1) process (ρ = 0.6, successive
// ticks re-score overlapping chunks) driven by Student-t (ν = 4) innovations
// scaled to unit variance — heavier tails than a Gaussian, as energies of
// sampled actions are. The threshold is calibrated as the bundle's calibrate
// step does: quantile 99.9 of 512 independent held-out windows.
type traceGen struct {
	rng       *rand.Rand
	mu, sigma float64
	rho       float64
	z         float64
}

func newTraceGen(seed uint64) *traceGen {
	return &traceGen{rng: rand.New(rand.NewPCG(seed, 42)), mu: 2, sigma: 0.5, rho: 0.6}
}

// studentT returns a Student-t(4) sample scaled to unit variance.
func (g *traceGen) studentT() float64 {
	const nu = 4
	chi := 0.0
	for i := 0; i < nu; i++ {
		n := g.rng.NormFloat64()
		chi += n * n
	}
	return g.rng.NormFloat64() / math.Sqrt(chi/nu) / math.Sqrt(nu/(nu-2.0))
}

// next returns the next in-distribution score.
func (g *traceGen) next() float64 {
	g.z = g.rho*g.z + math.Sqrt(1-g.rho*g.rho)*g.studentT()
	return g.mu + g.sigma*g.z
}

// calibrate returns the calibration block computed from n independent windows.
func (g *traceGen) calibrate(n int) *Calibration {
	xs := make([]float64, n)
	sum, sum2 := 0.0, 0.0
	for i := range xs {
		xs[i] = g.mu + g.sigma*g.studentT()
		sum += xs[i]
		sum2 += xs[i] * xs[i]
	}
	slices.Sort(xs)
	q := func(p float64) float64 { // linear interpolation, as numpy's default
		h := p * float64(n-1)
		i := int(h)
		if i+1 >= n {
			return xs[n-1]
		}
		return xs[i] + (h-float64(i))*(xs[i+1]-xs[i])
	}
	mean := sum / float64(n)
	std := math.Sqrt(sum2/float64(n) - mean*mean)
	st := calibration.ScoreStats{Mean: mean, Std: std, Quantiles: map[string]float64{"50": q(.5), "90": q(.9), "99": q(.99), "99.9": q(.999), "99.99": q(.9999)}}
	return &Calibration{Block: calibration.Block{NWindows: n, Scores: map[string]calibration.ScoreStats{"energy": st, "centered_energy": st},
		Recommended: calibration.Recommendation{Score: "energy", Threshold: q(.999), Rule: "quantile 99.9 of held-out windows"}}}
}

type studyRule struct {
	name string
	rule RuleConfig
}

func studyRules() []studyRule {
	return []studyRule{
		{"n_of_m 1/1 (plain threshold)", RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 1, M: 1}}},
		{"n_of_m 2/3", RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 2, M: 3}}},
		{"n_of_m 3/5 (default)", DefaultConfig().Energy.Rule},
		{"n_of_m 4/5", RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 4, M: 5}}},
		{"cusum drift 0 limit 2", RuleConfig{Kind: RuleCUSUM, CUSUM: CUSUMConfig{Drift: 0, Limit: 2}}},
		{"cusum drift 0.5 limit 3", RuleConfig{Kind: RuleCUSUM, CUSUM: CUSUMConfig{Drift: 0.5, Limit: 3}}},
	}
}

func newStudyRule(r RuleConfig, cal *Calibration) rule {
	th := cal.Recommended.Threshold
	if r.Kind == RuleCUSUM {
		return newCUSUM(th, cal.Scores["energy"].Std, r.CUSUM.Drift, r.CUSUM.Limit)
	}
	return newNOfM(th, r.NOfM.N, r.NOfM.M)
}

type scenario struct {
	name  string
	shift func(k int) float64 // mean shift in σ, k ticks after onset
}

var scenarios = []scenario{
	{"step +6σ", func(int) float64 { return 6 }}, // the q99.9 threshold of t(4) noise is ≈ +5σ
	{"step +8σ", func(int) float64 { return 8 }},
	{"step +12σ", func(int) float64 { return 12 }},
	{"ramp +1σ/s", func(k int) float64 { return float64(k) / 10 }},
}

type studyResult struct {
	falseTrips  int
	hours       float64
	glitchTrips int // isolated single-sample glitches (μ+10σ) that tripped
	glitches    int
	delay       [][]int // per scenario: ticks from onset to trip (−1: missed in 100 ticks)
}

// runStudy replays in-distribution traces (counting false trips; the rule
// is reset after each, as an operator would), isolated glitches, and OOD
// onsets (ticks from onset to the trip) for a rule. 10 Hz ticks.
func runStudy(rc RuleConfig, rho float64, seeds int, hoursPerSeed float64) *studyResult {
	res := &studyResult{delay: make([][]int, len(scenarios))}
	for seed := 0; seed < seeds; seed++ {
		g := newTraceGen(uint64(seed) + 1)
		g.rho = rho
		cal := g.calibrate(512)
		r := newStudyRule(rc, cal)
		n := int(hoursPerSeed * 36000)
		for i := 0; i < n; i++ {
			if r.observe(g.next()) {
				res.falseTrips++
				r.reset()
			}
		}
		res.hours += hoursPerSeed
		quiet := func() {
			r.reset()
			for k := 0; k < 20; k++ {
				r.observe(g.next())
			}
			r.reset() // start from a quiet rule: the delay is the rule's, not the noise's
		}
		for i := 0; i < 100; i++ {
			quiet()
			tripped := r.observe(g.mu + 10*g.sigma)
			for k := 0; k < 10 && !tripped; k++ {
				tripped = r.observe(g.next())
			}
			res.glitches++
			if tripped {
				res.glitchTrips++
			}
		}
		for si, s := range scenarios {
			for rep := 0; rep < 100; rep++ {
				quiet()
				d := -1
				for k := 0; k < 100; k++ {
					if r.observe(g.next() + s.shift(k)*g.sigma) {
						d = k
						break
					}
				}
				res.delay[si] = append(res.delay[si], d)
			}
		}
	}
	return res
}

func delayStats(ds []int) (median, p95 int, missed int) {
	var ok []int
	for _, d := range ds {
		if d < 0 {
			missed++
		} else {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return -1, -1, missed
	}
	slices.Sort(ok)
	return ok[len(ok)/2], ok[len(ok)*95/100], missed
}

// TestRuleStudy measures the false-trip rate and detection delay of the
// rules on the synthetic traces and holds the default rule to its promises.
// With -v it prints the whole comparison table (go test -v -run RuleStudy
// ./safety/); without, it checks only the default on the reference model.
func TestRuleStudy(t *testing.T) {
	const seeds, hoursPerSeed = 8, 0.25
	rhos, rules := []float64{0, 0.6, 0.9}, studyRules()
	if !testing.Verbose() {
		rhos, rules = []float64{0.6}, rules[2:3]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "synthetic traces at 10 Hz, threshold = q99.9 of 512 calibration windows; %g h in distribution per row (%d calibrations);\n", seeds*hoursPerSeed, seeds)
	fmt.Fprintf(&b, "delay = ticks from onset to trip: median / p95 (missed within 100 ticks) over %d onsets; glitch = isolated μ+10σ sample\n", seeds*100)
	fmt.Fprintf(&b, "%-4s %-28s %8s %7s", "rho", "rule", "false/h", "glitch")
	for _, s := range scenarios {
		fmt.Fprintf(&b, " %14s", s.name)
	}
	b.WriteString("\n")
	for _, rho := range rhos {
		for _, sr := range rules {
			r := runStudy(sr.rule, rho, seeds, hoursPerSeed)
			fmt.Fprintf(&b, "%-4.1f %-28s %8.2f %6.0f%%", rho, sr.name, float64(r.falseTrips)/r.hours, 100*float64(r.glitchTrips)/float64(r.glitches))
			for si := range scenarios {
				m, p, miss := delayStats(r.delay[si])
				fmt.Fprintf(&b, " %14s", fmt.Sprintf("%d / %d (%d)", m, p, miss))
			}
			b.WriteString("\n")
			if sr.rule != DefaultConfig().Energy.Rule || rho != 0.6 {
				continue
			}
			// The default's promises on the reference model (ρ = 0.6).
			if rate := float64(r.falseTrips) / r.hours; rate > 3 {
				t.Errorf("default rule: %.2f false trips per hour in distribution", rate)
			}
			if r.glitchTrips != 0 {
				t.Errorf("default rule tripped on %d isolated glitches", r.glitchTrips)
			}
			for si, s := range scenarios[1:3] {
				if m, p, miss := delayStats(r.delay[si+1]); miss > 0 || m > 2 || p > 4 {
					t.Errorf("default rule on %s: median %d p95 %d missed %d", s.name, m, p, miss)
				}
			}
		}
	}
	t.Log("\n" + b.String())
}

// Scenario replay through the whole gate, threshold from a calibration
// block (q99.9 of 20000 windows: well estimated, unlike 512): ten minutes of
// in-distribution noise do not trip, a spike does, and the halt is on the
// wire in the tick that sees the tripping score.
func TestScenarioReplay(t *testing.T) {
	gen := newTraceGen(99)
	cal := gen.calibrate(20000)
	cfg := testConfig()
	cfg.Energy.Scores = nil // the bundle's recommended score and threshold
	cfg.Energy.Rule = DefaultConfig().Energy.Rule
	r := newRigCal(t, cfg, cal)
	if th := r.g.Thresholds(); len(th) != 1 || th[0].Value != cal.Recommended.Threshold || th[0].Source != "calibration.recommended" {
		t.Fatalf("thresholds %+v", th)
	}
	r.armGate()
	for i := 0; i < 6000; i++ {
		x := gen.next()
		if d := r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = x }); d.State != Running {
			t.Fatalf("in-distribution trace tripped at tick %d: %s", i, d.Reason.Message)
		}
	}
	// A spike: the score jumps 8σ and stays (3 of 5: trips on the third).
	var d Decision
	onset := r.n + 1
	for i := 0; i < 10; i++ {
		x := gen.next() + 8*gen.sigma
		_, halts, _ := r.arm.counts()
		if d = r.tick(func(in *Inputs) { in.Scores[ScoreEnergy] = x }); d.State == Stopped {
			if _, h, _ := r.arm.counts(); h != halts+1 || r.arm.lastOp() != "halt" {
				t.Fatal("trip tick did not write the halt")
			}
			break
		}
	}
	if d.State != Stopped || d.Reason.Kind != KindEnergy {
		t.Fatalf("spike not detected: %+v", d)
	}
	if delay := r.n - onset; delay > 3 {
		t.Fatalf("spike detected %d ticks after onset", delay)
	}
	evs := r.drain()
	if len(evs) == 0 || evs[0].Type != EventTrip || evs[0].Reason.Threshold != cal.Recommended.Threshold {
		t.Fatalf("events %+v", evs)
	}
}
