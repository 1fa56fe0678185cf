package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/telemetry"
)

// fakeArm is a 7-joint arm (position, velocity, gripper: the test bundles'
// 15 state values), or with obs > 0 an arm that reports an observation
// vector of obs values (Meta-World's), whose state moves a little on every
// read (periodically, so that long benchmarks stay near the
// demonstrations' scale), so that consecutive observations differ. It
// allocates nothing after its first read.
type fakeArm struct {
	clk     *fakeClock
	obs     int
	reads   int // read n returns armVector(n); only the loop goroutine reads
	enabled atomic.Bool
}

var _ actuators.Arm = (*fakeArm)(nil)

// armVector is the state observation of the fake arm's read n.
func armVector(n int) []float32 {
	v := make([]float32, 15)
	for i := range 7 {
		v[i] = float32(0.01*float64(n%100) + 0.1*float64(i))
		v[7+i] = 0.1
	}
	v[14] = 0.5
	return v
}

func (a *fakeArm) State(_ context.Context, s *actuators.State) error {
	if len(s.Position) != 7 || len(s.Velocity) != 7 {
		s.Position, s.Velocity = make([]float64, 7), make([]float64, 7)
	}
	if len(s.Observation) != a.obs {
		s.Observation = make([]float64, a.obs)
	}
	a.reads++
	for i := range 7 {
		s.Position[i] = 0.01*float64(a.reads%100) + 0.1*float64(i)
		s.Velocity[i] = 0.1
	}
	for i := range s.Observation {
		s.Observation[i] = 0.01*float64(a.reads%100) + 0.1*float64(i%7)
	}
	s.Gripper = 0.5
	s.Time = a.clk.Now()
	s.Enabled = a.enabled.Load()
	return nil
}

func (a *fakeArm) Command(context.Context, actuators.Command) error { return nil }
func (a *fakeArm) Enable(context.Context) error                     { a.enabled.Store(true); return nil }
func (a *fakeArm) Halt(context.Context) error                       { a.enabled.Store(false); return nil }

// fakeSampler answers with fixed actions; with latency set, each plan
// takes that long on clk (the fake clock moves on while it samples).
type fakeSampler struct {
	actions []float32
	clk     *fakeClock
	latency func() time.Duration
	mu      sync.Mutex
	guides  []engines.Guide // every guide SampleGuided got, copied (under mu)
}

func (s *fakeSampler) Sample(_ []float32, dst *engines.Result) error {
	if s.latency != nil {
		s.clk.Advance(s.latency())
	}
	dst.Actions = s.actions
	return nil
}

// SampleGuided records the guide of the latest plan and answers as Sample.
func (s *fakeSampler) SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error {
	if g != nil {
		s.mu.Lock()
		s.guides = append(s.guides, engines.Guide{Mode: g.Mode, Strength: g.Strength,
			Actions: slices.Clone(g.Actions), Weights: slices.Clone(g.Weights)})
		s.mu.Unlock()
	}
	return s.Sample(cond, dst)
}

// asyncStateEnergy is the state energy fakeScorer reports: no state term of
// these tests gives it.
const asyncStateEnergy = 1e6

// fakeScorer answers every re-score at once, with fixed energies and
// asyncStateEnergy.
type fakeScorer struct{}

func (fakeScorer) Score(_, _ []float32) (engines.Score, error) {
	return engines.Score{Energy: 5, RefEnergyMean: 4, CenteredEnergy: 1, CenteredReward: -1, StateEnergy: asyncStateEnergy}, nil
}

var errStateTerm = errors.New("fake state term: session failed")

// fakeStateTerm is a double of engines.StateTerm: its call n (from 1)
// returns n, or errStateTerm when fail(n); it keeps a copy of every cond.
type fakeStateTerm struct {
	fail  func(n int) bool
	n     int
	conds [][]float32
}

func (f *fakeStateTerm) Energy(cond []float32) (float32, error) {
	f.n++
	f.conds = append(f.conds, slices.Clone(cond))
	if f.fail != nil && f.fail(f.n) {
		return 0, errStateTerm
	}
	return float32(f.n), nil
}

// harnessOptions choose what a loopHarness drives.
type harnessOptions struct {
	bundle string
	scorer PolicyScorer       // nil: no re-scoring
	state  StateTermEvaluator // nil: no synchronous state term
	watch  []string           // monitored scores (threshold 1e9); none: energy stop off
	// threshold, when set, is the monitored scores' threshold instead.
	threshold float64
	// planLateLimit is loop.plan_late_limit; latency, when set, how long
	// each plan takes on the fake clock.
	planLateLimit float64
	latency       func() time.Duration
	bridge        string // loop.bridge ("": the default)
	// chunking is loop.realtime_chunking (zero: the default); sampler, when
	// set, wraps the fake sampler the harness made (dim: D_a).
	chunking ChunkingConfig
	warm     WarmConfig // loop.warm_start (zero: the bundle's)
	sampler  func(f *fakeSampler, dim int) PolicySampler
	// late, when set, makes LoopDeps.Late from a second fake sampler on
	// the same clock and latency; lateCfg is loop.late_policy.
	late    func(f *fakeSampler) PolicySampler
	lateCfg LatePolicyConfig
	// manifest, when set, changes the loaded bundle's manifest.
	manifest func(*engines.Manifest)
	// onStop and expectedShutdown are LoopDeps'; logger the gate's and
	// the loop's.
	onStop           func(safety.Reason)
	expectedShutdown bool
	logger           *slog.Logger
}

// loopHarness drives a Loop tick by tick on a fake clock, with a fake arm
// and a fake sampler, the real safety gate and the real worker goroutines.
type loopHarness struct {
	l      *Loop
	clk    *fakeClock
	arm    *fakeArm
	n      int64
	record bool
	scores []safety.Scores // what the gate saw each tick, while record
	ticked int64           // ticks whose OnTick has run
}

// newLoop builds the harness; the error is NewLoop's.
func newLoop(t testing.TB, o harnessOptions) (*loopHarness, error) {
	t.Helper()
	b, err := engines.LoadBundle(o.bundle)
	if err != nil {
		t.Fatal(err)
	}
	m := &b.Manifest
	if o.manifest != nil {
		o.manifest(m)
	}
	h := &loopHarness{clk: &fakeClock{now: time.Unix(1000, 0)}}
	h.arm = &fakeArm{clk: h.clk}
	cfg := DefaultConfig()
	cfg.Robot.State = []string{"position", "velocity", "gripper"}
	if w := m.Obs[0].Width(); w != 15 { // not a test bundle: a Meta-World one
		cfg.Robot.State, h.arm.obs = []string{"observation"}, w
	}
	cfg.Camera.Enabled = false
	cfg.Loop.ScoreWait = 5 * time.Second // a fake re-score lands within its own tick
	cfg.Loop.PlanLateLimit = o.planLateLimit
	if o.bridge != "" {
		cfg.Loop.Bridge = o.bridge
	}
	cfg.Loop.Warm = o.warm
	cfg.Loop.Late = o.lateCfg
	if o.chunking != (ChunkingConfig{}) {
		cfg.Loop.Chunking = o.chunking
	}
	huge := 1e9
	if o.threshold != 0 {
		huge = o.threshold
	}
	sc := &cfg.Safety
	sc.Limits.MaxVelocity = make([]float64, m.ActionDim-1) // velocity and gripper
	for i := range sc.Limits.MaxVelocity {
		sc.Limits.MaxVelocity[i] = 1
	}
	sc.Watchdog.CameraMaxAge = 0
	sc.Energy.Scores = nil
	for _, w := range o.watch {
		sc.Energy.Scores = append(sc.Energy.Scores, safety.ScoreConfig{Name: w, Threshold: &huge})
	}
	sc.Energy.Disabled = len(o.watch) == 0
	g, err := safety.New(h.arm, cfg.Safety, safetyCalibration(&b.Manifest), safety.Options{Clock: h.clk, Logger: o.logger})
	if err != nil {
		t.Fatal(err)
	}
	cond, err := engines.NewConditioner(m)
	if err != nil {
		t.Fatal(err)
	}
	var sampler PolicySampler = &fakeSampler{actions: make([]float32, m.PredHorizon*m.ActionDim), clk: h.clk, latency: o.latency}
	if o.sampler != nil {
		sampler = o.sampler(sampler.(*fakeSampler), m.ActionDim)
	}
	d := LoopDeps{Config: &cfg, Manifest: m, Clock: h.clk, Arm: h.arm, Guard: g, Cond: cond,
		Sampler: sampler,
		OnTick: func(_ Tick, _ *safety.Decision, s safety.Scores) {
			h.ticked++
			if h.record {
				h.scores = append(h.scores, s)
			}
		},
		OnStop: o.onStop, ExpectedShutdown: o.expectedShutdown, Stages: new(StageTimes), Logger: o.logger}
	if o.scorer != nil {
		d.Scorer = o.scorer
	}
	if o.late != nil {
		d.Late = o.late(&fakeSampler{actions: make([]float32, m.PredHorizon*m.ActionDim), clk: h.clk, latency: o.latency})
	}
	if o.state != nil {
		d.State = o.state
	}
	if h.l, err = NewLoop(d); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	h.l.startWorkers(ctx, &wg)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h, nil
}

func newLoopHarness(t testing.TB, o harnessOptions) *loopHarness {
	t.Helper()
	h, err := newLoop(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// step runs the tick one period after the previous one, then waits until
// an inference it submitted has finished, so that the next tick takes the
// chunk (the worker's speed decides nothing).
func (h *loopHarness) step() {
	h.clk.Advance(h.l.period)
	now := h.clk.Now()
	h.n++
	h.l.tick(context.Background(), Tick{N: h.n, Deadline: now, Due: now, Woke: now})
	for h.l.infer.busy && len(h.l.infer.out) == 0 {
		goruntime.Gosched()
	}
}

// plans steps until n more chunks have been committed, each plan taking d
// on the fake clock (latency is the harness's latency source).
func (h *loopHarness) plans(t testing.TB, latency *atomic.Int64, n int64, d time.Duration) {
	t.Helper()
	latency.Store(int64(d))
	want := h.l.Stats().Chunks + n
	for i := 0; h.l.Stats().Chunks < want; i++ {
		if i > 100*int(n) {
			t.Fatalf("only %d plans in %d ticks", h.l.Stats().Chunks, i)
		}
		h.step()
	}
}

// armGate arms the gate as an operator would: Loop.Arm posts a reset that
// the next tick decides, refused while a cause persists.
func (h *loopHarness) armGate(t testing.TB) {
	t.Helper()
	try := func() error {
		errc := make(chan error, 1)
		go func() { errc <- h.l.Arm(context.Background(), "test") }()
		for {
			select {
			case err := <-errc:
				return err
			default:
			}
			if h.l.d.Guard.Status().ResetPending {
				h.step() // decides it
			} else {
				goruntime.Gosched()
			}
		}
	}
	var err error
	for range 50 {
		if err = try(); err == nil {
			return
		}
		h.step()
	}
	t.Fatalf("the gate does not arm: %v", err)
}

// The state term scores the newest observation in the loop itself, every
// tick: its value reaches the gate on the same tick, a failure leaves NaN
// and is counted, and the asynchronous re-score brings the energies without
// overwriting it. Without the state term, the re-score's state energy is
// taken as before.
func TestLoopStateEnergyEveryTick(t *testing.T) {
	energyflow := withStateTerm(t, testBundle(t), 7)
	diffusion := withStateTerm(t, diffusionBundle(t), 7)
	cases := []struct {
		name         string
		bundle       string
		scorer       PolicyScorer
		state        bool
		fail         func(n int) bool
		watch        []string
		wantFailures int
	}{
		{"re-score and state term", energyflow, fakeScorer{}, true, nil, []string{"state_energy", "energy"}, 0},
		{"failures leave NaN", energyflow, fakeScorer{}, true, func(n int) bool { return n%3 == 0 }, []string{"state_energy", "energy"}, 9},
		{"state term alone (diffusion)", diffusion, nil, true, func(n int) bool { return n == 4 }, []string{"state_energy"}, 1},
		{"no state term: the re-score's", testBundle(t), fakeScorer{}, false, nil, []string{"energy"}, 0},
	}
	const ticks = 30
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := harnessOptions{bundle: tc.bundle, scorer: tc.scorer, watch: tc.watch}
			var st *fakeStateTerm
			if tc.state {
				st = &fakeStateTerm{fail: tc.fail}
				o.state = st
			}
			h := newLoopHarness(t, o)
			h.record = true
			for range ticks {
				h.step()
			}
			to := h.l.d.Manifest.ObsHorizon
			cond := h.l.d.Cond
			want := make([]float32, cond.Dim())
			energies, failures := 0, 0
			for i, sc := range h.scores {
				k := i + 1 // tick k pushed the fake arm's read k+1 (read 1 was NewLoop's probe)
				se := sc[safety.ScoreStateEnergy]
				fresh := !math.IsNaN(sc[safety.ScoreEnergy])
				if fresh {
					energies++
					if tc.scorer == nil {
						t.Fatalf("tick %d: energy %v without a scorer", k, sc[safety.ScoreEnergy])
					}
				}
				switch {
				case !tc.state && fresh:
					if se != asyncStateEnergy {
						t.Errorf("tick %d: state energy %v, want the re-score's %v", k, se, float64(asyncStateEnergy))
					}
				case !tc.state || k < to:
					if !math.IsNaN(se) {
						t.Errorf("tick %d: state energy %v, want NaN", k, se)
					}
				default:
					n := k - to + 1 // the state term's call of this tick
					if st.n < n {
						t.Fatalf("tick %d: the state term was called %d times, want once a tick from tick %d", k, st.n, to)
					}
					if tc.fail != nil && tc.fail(n) {
						failures++
						if !math.IsNaN(se) {
							t.Errorf("tick %d: state energy %v after a failed evaluation, want NaN", k, se)
						}
					} else if se != float64(n) {
						t.Errorf("tick %d: state energy %v, want this tick's evaluation %d (fresh energy %v)", k, se, n, fresh)
					}
					var hist []engines.ObsFrame
					for r := k + 2 - to; r <= k+1; r++ {
						hist = append(hist, engines.ObsFrame{armVector(r)})
					}
					if err := cond.Build(hist, want); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(st.conds[n-1], want) {
						t.Errorf("tick %d: the state term got cond %v, want the newest observation's %v", k, st.conds[n-1], want)
					}
				}
			}
			if tc.state && st.n != ticks-to+1 {
				t.Errorf("%d state term calls in %d ticks, want one a tick from tick %d: %d", st.n, ticks, to, ticks-to+1)
			}
			if failures != tc.wantFailures {
				t.Errorf("%d failed evaluations, want %d", failures, tc.wantFailures)
			}
			if got := h.l.Stats().ScoreErrors; got != int64(tc.wantFailures) {
				t.Errorf("ScoreErrors = %d, want %d", got, tc.wantFailures)
			}
			if tc.scorer != nil && energies < ticks/2 {
				t.Errorf("%d of %d ticks had a fresh energy: the re-score should still bring them", energies, ticks)
			}
		})
	}
}

// NewLoop refuses a gate that monitors a score nothing computes: the
// energies need a Scorer, state_energy a State or a Scorer.
func TestNewLoopNeedsWhatTheGateWatches(t *testing.T) {
	energyflow := withStateTerm(t, testBundle(t), 7)
	cases := []struct {
		name   string
		scorer PolicyScorer
		state  StateTermEvaluator
		watch  []string
		errHas string // "": accepted
	}{
		{"state term watched, computed by the loop", nil, &fakeStateTerm{}, []string{"state_energy"}, ""},
		{"state term watched, computed by the re-score", fakeScorer{}, nil, []string{"state_energy"}, ""},
		{"both, with both", fakeScorer{}, &fakeStateTerm{}, []string{"state_energy", "energy"}, ""},
		{"nothing watched, nothing computed", nil, nil, nil, ""},
		{"state term watched, nothing computes it", nil, nil, []string{"state_energy"}, "monitors state_energy"},
		{"energy watched without a Scorer", nil, &fakeStateTerm{}, []string{"state_energy", "energy"}, "monitors energy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newLoop(t, harnessOptions{bundle: energyflow, scorer: tc.scorer, state: tc.state, watch: tc.watch})
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.errHas)
			}
		})
	}
}

// openStateTerm opens the bundle's state term on ONNX Runtime, one thread,
// as the App does for the loop.
func openStateTerm(t testing.TB, dir string) *engines.StateTerm {
	t.Helper()
	b, err := engines.LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	be, err := engines.NewORT(engines.ORTOptions{LibraryPath: DefaultConfig().Policy.ONNXRuntimeLib, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := engines.NewStateTerm(b, be)
	if err != nil {
		be.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); be.Close() })
	return st
}

// buttonPress is the shipped ButtonPress bundle, whose state term is a
// trained 256-256 MLP over 8 σ on cond_dim 78: the size of a real one.
func buttonPress(t testing.TB) string {
	p := filepath.Join(repoRoot(t), "bundles", "metaworld-button-press")
	if _, err := os.Stat(filepath.Join(p, "state_energy.onnx")); err != nil {
		t.Fatalf("bundle with a trained state term missing: %v", err)
	}
	return p
}

// tickCases are the loop configurations of the allocation test and the
// benchmark: re-score or not, state term (on ONNX Runtime) or not, on the
// test bundle (the analytic ½‖cond‖² − 1 graph) and on ButtonPress (a
// trained state term).
func tickCases(t testing.TB) []struct {
	name string
	o    harnessOptions
} {
	energyflow, bp := withStateTerm(t, testBundle(t), 7), buttonPress(t)
	state := []string{"state_energy"}
	return []struct {
		name string
		o    harnessOptions
	}{
		{"none", harnessOptions{bundle: testBundle(t)}},
		{"state", harnessOptions{bundle: energyflow, state: openStateTerm(t, energyflow), watch: state}},
		{"rescore", harnessOptions{bundle: testBundle(t), scorer: fakeScorer{}, watch: []string{"energy"}}},
		{"rescore+state", harnessOptions{bundle: energyflow, scorer: fakeScorer{}, state: openStateTerm(t, energyflow), watch: []string{"state_energy", "energy"}}},
		{"buttonpress", harnessOptions{bundle: bp}},
		{"buttonpress+state", harnessOptions{bundle: bp, state: openStateTerm(t, bp), watch: state}},
	}
}

// A RUNNING tick allocates nothing after warm-up, with the state term
// evaluated in it (the real ONNX Runtime session) or not.
func TestTickAllocatesNothing(t *testing.T) {
	for _, tc := range tickCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			h := newLoopHarness(t, tc.o)
			h.armGate(t)
			for range 20 {
				h.step()
			}
			if n := testing.AllocsPerRun(100, h.step); n != 0 {
				t.Errorf("%v allocations per tick, want 0", n)
			}
			if st, reason := h.l.Machine().State(); st != StateRunning {
				t.Fatalf("state %s (%s): the measured ticks were not the running path", st, reason)
			}
			h.record = true
			h.step()
			if x := h.scores[0][safety.ScoreStateEnergy]; tc.o.state != nil && (math.IsNaN(x) || math.IsInf(x, 0)) {
				t.Errorf("state energy %v, want this tick's", x)
			}
		})
	}
}

// BenchmarkTickStateEnergy times one RUNNING tick of each tickCases
// configuration (fake sampler and scorer, state term on ONNX Runtime with
// one thread). step/ times the added work alone: cond of the newest
// observation plus one evaluation.
//
//	go test ./runtime -run '^$' -bench TickStateEnergy -count 7
func BenchmarkTickStateEnergy(b *testing.B) {
	for _, tc := range tickCases(b) {
		b.Run("tick/"+tc.name, func(b *testing.B) {
			h := newLoopHarness(b, tc.o)
			h.armGate(b)
			b.ReportAllocs()
			for b.Loop() {
				h.step()
			}
			if st, reason := h.l.Machine().State(); st != StateRunning {
				b.Fatalf("state %s (%s): the measured ticks were not the running path", st, reason)
			}
		})
	}
	for _, dir := range []string{withStateTerm(b, testBundle(b), 7), buttonPress(b)} {
		b.Run("step/"+filepath.Base(dir), func(b *testing.B) {
			h := newLoopHarness(b, harnessOptions{bundle: dir, state: openStateTerm(b, dir), watch: []string{"state_energy"}})
			scores := safety.NoScores()
			for range h.l.d.Manifest.ObsHorizon {
				h.step()
			}
			b.ReportAllocs()
			for b.Loop() {
				h.l.scoreState(h.clk.Now(), &scores)
			}
			if math.IsNaN(scores[safety.ScoreStateEnergy]) {
				b.Fatal("no state energy")
			}
		})
	}
}

// TestLoopWarnsWhenPlansLandLate drives the loop with plans that take
// half a period, then two and a half (a host falling behind), then half
// again: one warning spell, counted with its plans, and the telemetry
// sample carries the p90 and the limit throughout.
func TestLoopWarnsWhenPlansLandLate(t *testing.T) {
	var latency atomic.Int64
	h := newLoopHarness(t, harnessOptions{bundle: testBundle(t), planLateLimit: 1.5,
		latency: func() time.Duration { return time.Duration(latency.Load()) }})
	metrics := telemetry.NewMetrics()
	h.l.d.Metrics = metrics
	period := h.l.period
	plans := func(n int64, d time.Duration) { t.Helper(); h.plans(t, &latency, n, d) }
	plans(30, period/2)
	if st := h.l.Stats(); st.LateSpells != 0 || st.LatePlans != 0 {
		t.Fatalf("plans on time: %d spells, %d late plans, want none", st.LateSpells, st.LatePlans)
	}
	if got := h.l.late.p90; math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("p90 %v periods, want 0.5", got)
	}
	plans(20, 5*period/2)
	st := h.l.Stats()
	if st.LateSpells != 1 || st.LatePlans < 10 {
		t.Fatalf("late plans: %d spells, %d late plans, want 1 spell and at least 10 plans", st.LateSpells, st.LatePlans)
	}
	if lim, from := h.l.PlanLateLimit(); lim != 1.5 || from != "loop.plan_late_limit" {
		t.Errorf("PlanLateLimit() = %v, %q", lim, from)
	}
	for name, want := range map[string]float64{"energyflow_plan_late_p90_periods": 2.5,
		"energyflow_plan_late_limit_periods": 1.5, "energyflow_plans_late": 1, "energyflow_plan_late_spells_total": 1} {
		if got := metricValue(t, metrics, name); got != want {
			t.Errorf("late: %s = %v, want %v", name, got, want)
		}
	}
	var sink lastSample
	h.l.d.Sink = &sink
	h.step()
	if s := sink.s; s.PlanLateP90 != 2.5 || s.PlanLateLimit != 1.5 {
		t.Errorf("telemetry sample: plan_late %v, limit %v, want 2.5 and 1.5", s.PlanLateP90, s.PlanLateLimit)
	}
	plans(planLateWindow, period/2)
	if st := h.l.Stats(); st.LateSpells != 1 || h.l.late.over {
		t.Fatalf("back on time: %d spells, over %v; want the one spell, ended", st.LateSpells, h.l.late.over)
	}
	for name, want := range map[string]float64{"energyflow_plan_late_p90_periods": 0.5,
		"energyflow_plans_late": 0, "energyflow_plan_late_spells_total": 1} {
		if got := metricValue(t, metrics, name); got != want {
			t.Errorf("back on time: %s = %v, want %v", name, got, want)
		}
	}
}

// metricValue reads one gauge or counter from the metrics' registry.
func metricValue(t *testing.T, m *telemetry.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		if g := f.GetMetric()[0].GetGauge(); g != nil {
			return g.GetValue()
		}
		return f.GetMetric()[0].GetCounter().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// lastSample is a Sink that keeps the newest sample.
type lastSample struct{ s telemetry.Sample }

func (l *lastSample) Publish(s telemetry.Sample) { l.s = s }

// NewEpisode holds the arm while the scene is replaced, drops the plan
// made from the old scene (committed or still in flight), and plans again
// from a fresh history of the new one; the gate keeps running.
func TestLoopNewEpisode(t *testing.T) {
	h := newLoopHarness(t, harnessOptions{bundle: testBundle(t)})
	h.armGate(t)
	for range 20 {
		h.step()
	}
	if h.l.chunk.Len() == 0 && !h.l.infer.busy {
		t.Fatal("no plan committed or in flight before the switch")
	}
	chunks := h.l.Stats().Chunks

	replaced := make(chan struct{})
	errc := make(chan error, 1)
	var heldAt int64
	pushed := h.l.obs.n
	go func() {
		errc <- h.l.NewEpisode(context.Background(), func(context.Context) error {
			heldAt = h.n
			close(replaced)
			return nil
		})
	}()
	for len(h.l.episode) == 0 && h.l.switching == nil {
		goruntime.Gosched()
	}
	h.step() // takes the request: holds
	<-replaced
	if err := <-errc; err != nil {
		t.Fatalf("NewEpisode: %v", err)
	}
	if heldAt != h.n {
		t.Errorf("scene replaced after tick %d, want after the holding tick %d", heldAt, h.n)
	}
	if h.l.obs.n != pushed {
		t.Errorf("the history moved during the hold: %d pushes, want %d", h.l.obs.n, pushed)
	}
	if h.l.chunk.Len() != 0 || len(h.l.dec.Command.Velocity) > 0 && slices.ContainsFunc(h.l.dec.Command.Velocity, func(v float64) bool { return v != 0 }) {
		t.Errorf("the arm did not hold: %d actions left, command %v", h.l.chunk.Len(), h.l.dec.Command.Velocity)
	}
	if got := h.l.Stats().Chunks; got != chunks {
		t.Errorf("a plan of the old scene was committed during the switch: %d chunks, want %d", got, chunks)
	}
	replacedScenes := 0
	h.l.d.SceneReplaced = func() { replacedScenes++ }
	h.step() // resumes: the history restarts padded with this tick's observation
	if replacedScenes != 1 {
		t.Errorf("SceneReplaced called %d times on resuming, want 1", replacedScenes)
	}
	if !h.l.obs.ready() || h.l.obs.n != h.l.obs.horizon || h.l.havePred {
		t.Errorf("after the switch: %d observations (ready %v), plan kept %v; want a padded history and no plan", h.l.obs.n, h.l.obs.ready(), h.l.havePred)
	}
	if hist, _ := h.l.obs.history(); !slices.Equal(hist[0][0], hist[len(hist)-1][0]) {
		t.Errorf("the new history is not padded with its first observation: %v", hist)
	}
	for range 10 {
		h.step()
	}
	if got := h.l.Stats().Chunks; got <= chunks {
		t.Errorf("no plan from the new scene: %d chunks, had %d", got, chunks)
	}
	if st := h.l.d.Guard.Status().State; st != safety.Running {
		t.Errorf("gate %v after a new episode, want RUNNING", st)
	}

	// A switch nobody ticks for gives up with ctx, and the next one works.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.l.NewEpisode(ctx, func(context.Context) error { return nil }); err == nil || !strings.Contains(err.Error(), "did not hold") {
		t.Errorf("NewEpisode without ticks: %v, want a 'did not hold' error", err)
	}
	h.step()
	h.step()
	if h.l.switching != nil {
		t.Error("the abandoned switch still holds the arm")
	}
}

// A plan later than the committed window: with loop.bridge tail the arm
// goes on with the committed prediction's tail and holds only once it ends
// too; with hold it holds at once.
func TestLoopBridgesALatePlan(t *testing.T) {
	for _, tt := range []struct {
		bridge      string
		wantBridged bool
	}{{BridgeTail, true}, {BridgeHold, false}} {
		t.Run(tt.bridge, func(t *testing.T) {
			var latency atomic.Int64
			h := newLoopHarness(t, harnessOptions{bundle: testBundle(t), bridge: tt.bridge,
				latency: func() time.Duration { return time.Duration(latency.Load()) }})
			h.armGate(t)
			latency.Store(int64(10 * h.l.period)) // the window (T_a = 8, replanned 2 early) runs out
			for range 120 {
				h.step()
			}
			st := h.l.Stats()
			if (st.Bridged > 0) != tt.wantBridged {
				t.Errorf("bridged %d ticks, idle %d; want bridging %v", st.Bridged, st.IdleTicks, tt.wantBridged)
			}
			if tt.wantBridged && st.IdleTicks >= st.Bridged {
				t.Errorf("idle %d ticks against %d bridged: the tail should cover most of a 10-period plan", st.IdleTicks, st.Bridged)
			}
			if !tt.wantBridged && st.IdleTicks == 0 {
				t.Error("no hold with loop.bridge hold and plans later than the window")
			}
		})
	}
}

// OnStop hands each stop of the gate to the caller, typed, once, on the
// tick that finds it and before that tick's OnTick: not the start-up stop,
// not the stop Run latches when it ends. With ExpectedShutdown that stop is
// logged at info; without, as a warning (the operator stop it is).
func TestLoopOnStop(t *testing.T) {
	for _, expected := range []bool{false, true} {
		t.Run(fmt.Sprintf("expected shutdown %v", expected), func(t *testing.T) {
			var stops []safety.Reason
			var ticksBefore []int64 // OnTick calls before each OnStop
			var h *loopHarness
			var buf bytes.Buffer
			h = newLoopHarness(t, harnessOptions{bundle: testBundle(t), expectedShutdown: expected,
				logger: slog.New(slog.NewTextHandler(&buf, nil)),
				onStop: func(r safety.Reason) { stops, ticksBefore = append(stops, r), append(ticksBefore, h.ticked) }})
			for range 3 {
				h.step()
			}
			if len(stops) != 0 {
				t.Fatalf("OnStop for the start-up stop: %+v", stops)
			}
			h.armGate(t)
			h.step()
			if len(stops) != 0 || h.l.d.Guard.Status().State != safety.Running {
				t.Fatalf("running: stops %+v, state %v", stops, h.l.d.Guard.Status().State)
			}
			if err := h.l.d.Guard.Stop(context.Background(), "viewer", "STOP"); err != nil {
				t.Fatal(err)
			}
			h.step() // finds the gate stopped
			h.step()
			if len(stops) != 1 {
				t.Fatalf("%d OnStop calls, want 1: %+v", len(stops), stops)
			}
			if r := stops[0]; r.Kind != safety.KindOperator || r.Actor != "viewer" || r.Message != "operator stop by viewer: STOP" {
				t.Errorf("OnStop got %+v, want the viewer's operator stop", r)
			}
			if ticksBefore[0] != h.n-2 {
				t.Errorf("OnStop after %d OnTick calls, want %d: before the stopping tick's OnTick", ticksBefore[0], h.n-2)
			}
			// Re-armed, then Run ends at once: its own stop is not an OnStop.
			h.armGate(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			buf.Reset()
			if err := h.l.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if len(stops) != 1 || h.l.d.Guard.Status().State != safety.Stopped {
				t.Errorf("after Run: %d OnStop calls, state %v; want still 1, stopped", len(stops), h.l.d.Guard.Status().State)
			}
			want := "level=WARN"
			if expected {
				want = "level=INFO"
			}
			var line string
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, `msg="safety: stop"`) {
					line = l
				}
			}
			if !strings.Contains(line, want) || !strings.Contains(line, `message="operator stop by runtime: shutdown"`) {
				t.Errorf("the shutdown stop logged as %q, want %s", line, want)
			}
		})
	}
}

// The loop records every plan (sample, and sample_step once per plan), every
// re-score, every state-term evaluation and every tick's arm read; a stage the bundle or the
// configuration does not have is not recorded. (The harness's gate writes
// to the fake arm directly: command_write is the App's, TestEndToEndImagePolicy.)
func TestLoopRecordsStages(t *testing.T) {
	energyflow := withStateTerm(t, testBundle(t), 7)
	cases := []struct {
		name string
		o    harnessOptions
		want []Stage // recorded; every other stage is not
	}{
		{"re-score and state term", harnessOptions{bundle: energyflow, scorer: fakeScorer{}, state: &fakeStateTerm{}, watch: []string{"state_energy", "energy"}},
			[]Stage{StageSample, StageSampleStep, StageRescore, StageStateTerm, StageArmRead}},
		{"plans alone", harnessOptions{bundle: testBundle(t)}, []Stage{StageSample, StageSampleStep, StageArmRead}},
		{"failing state term", harnessOptions{bundle: energyflow, state: &fakeStateTerm{fail: func(int) bool { return true }}, watch: []string{"state_energy"}},
			[]Stage{StageSample, StageSampleStep, StageArmRead}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newLoopHarness(t, tc.o)
			for range 30 {
				h.step()
			}
			stages := h.l.d.Stages
			for s := range numStages {
				n := stages.Stats(s).Count
				if slices.Contains(tc.want, s) != (n > 0) {
					t.Errorf("%s recorded %d times, want it recorded: %v", s, n, slices.Contains(tc.want, s))
				}
			}
			plans := h.l.Stats().Chunks
			if n := stages.Stats(StageSample).Count; n < uint64(plans) || n != stages.Stats(StageSampleStep).Count {
				t.Errorf("sample %d, sample_step %d times for %d committed plans: want one each per plan", n, stages.Stats(StageSampleStep).Count, plans)
			}
		})
	}
}
