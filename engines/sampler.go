package engines

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"
)

// NoiseSource fills z with independent standard-normal values. The
// sampler's initial actions are a_0 = sigma_max · z (energyflow) or
// x = z (diffusion).
type NoiseSource interface {
	Normal(z []float32)
}

// NewNormalNoise returns the default NoiseSource: a PCG generator seeded
// with seed. Not safe for concurrent use.
func NewNormalNoise(seed uint64) NoiseSource {
	return &pcgNormal{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type pcgNormal struct{ r *rand.Rand }

func (p *pcgNormal) Normal(z []float32) {
	for i := range z {
		z[i] = float32(p.r.NormFloat64())
	}
}

// SamplerOptions configures NewSampler. The zero value samples one row
// with the manifest's number of steps and seed 0.
type SamplerOptions struct {
	// Steps is the number of sampler steps: K Euler steps (energyflow) or
	// S DDIM steps (diffusion, 1..num_train_timesteps); 0 means the
	// manifest's sampler.steps. SetSteps changes it later.
	Steps int
	// Batch is the number of rows sampled per call (1 for the robot);
	// 0 means 1.
	Batch int
	// Seed seeds the default noise source.
	Seed uint64
	// Noise replaces the seeded generator (tests inject fixed noise).
	Noise NoiseSource
	// NoReferences skips the M reference energies: the final call scores
	// only the sampled chunk (about M fewer network rows per sample), and
	// RefEnergyMean, CenteredEnergy and CenteredReward are NaN. For
	// runtimes whose stop rule uses the plain "energy" score. A policy
	// without an energy (diffusion) never evaluates references.
	NoReferences bool
	// ActionsOnly is for a planner, whose energies nobody reads (the
	// runtime scores the committed chunk with a sampler of its own): a
	// sample is the K Euler steps alone, with no energy at γ and no
	// reference energies (NoReferences implied), and Result.Score is NaN
	// throughout. Score and StateEnergy still evaluate what they are asked.
	// A fused engine returns its energy anyway; a diffusion policy has none.
	ActionsOnly bool
	// Graph is the graph the Euler steps run on: "" for the bundle's policy
	// graph (Manifest.PolicyGraph), or GraphEnergyGradLate for the late
	// network of a bundle with a "late_policy" block, which requires
	// ActionsOnly (its energies are not the calibrated ones; the runtime
	// scores every chunk on the main graph) and opens no state term.
	Graph string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Score is the energy of one action chunk under one conditioning, and the
// state term's reading of the conditioning alone.
type Score struct {
	Energy         float32 // E(a, cond, γ)
	RefEnergyMean  float32 // mean over the M reference actions of E(ref_m, cond, γ)
	CenteredEnergy float32 // Energy − RefEnergyMean (higher = less like the demonstrations)
	CenteredReward float32 // −CenteredEnergy (paper, centered shaping)
	// StateEnergy is the state term g of cond (the bundle's optional
	// "state_energy" graph; higher = the state is further from every
	// demonstration step), filled by Sampler.Score and ScoreObs. NaN when
	// the bundle has no state term, and in the results of the Sample
	// methods, which do not evaluate it.
	StateEnergy float32
}

// Value returns the score of the given name (ScoreEnergy,
// ScoreCenteredEnergy or ScoreStateEnergy, the names of the calibration and
// of the safety configuration), and false for an unknown name.
func (s Score) Value(name string) (float32, bool) {
	switch name {
	case ScoreEnergy:
		return s.Energy, true
	case ScoreCenteredEnergy:
		return s.CenteredEnergy, true
	case ScoreStateEnergy:
		return s.StateEnergy, true
	}
	return 0, false
}

// Result is one sampled action chunk. The sampler grows the slices on first
// use and reuses them afterwards: keep a Result per consumer and copy what
// must outlive the next call.
type Result struct {
	Actions    []float32 // [T_p×D_a] row-major, un-standardized (robot units)
	ActionsStd []float32 // [T_p×D_a] standardized, as the network sees them
	// Score is the energy of the sample (StateEnergy NaN: the Sample
	// methods do not evaluate the state term); the zero Score when the
	// policy has no energy (Sampler.HasEnergy is false): do not read it as
	// one.
	Score
}

// ErrNoEnergy is returned (wrapped) by Score and ScoreObs of a sampler
// whose policy has no energy (policy "diffusion"): there is nothing to
// score the actions with. Sampler.HasEnergy tells beforehand.
var ErrNoEnergy = errors.New("engines: the policy has no energy")

// SamplerStats counts work done since creation or ResetStats.
type SamplerStats struct {
	Samples      int64         // calls that produced results
	BackendCalls int64         // Session.Run and SampleFused calls
	BackendTime  time.Duration // wall time inside those calls
	TotalTime    time.Duration // wall time of whole sample and score calls
}

// Sampler turns conditioning into action chunks with the sampler of the
// bundle's policy kind:
//
//   - "energyflow": Algorithm 2 of the paper on the energy-gradient graph.
//     A step session bound at Batch rows runs the K Euler steps and the
//     final energy at γ (or one fused call), and a reference session bound
//     at Batch×M rows, whose reference actions and t = γ are written once,
//     gives the M reference energies of the centered reward in one call.
//   - "diffusion" (the Diffusion Policy baseline): deterministic DDIM
//     (eta = 0) on the noise-prediction graph "eps", S calls of a step
//     session bound at Batch rows. The policy has no energy: HasEnergy is
//     false, Result.Score is zero and Score returns ErrNoEnergy.
//
// When the bundle has the optional state term (Manifest.HasStateEnergy),
// the sampler also opens it (a StateTerm at batch 1): Score and ScoreObs
// then fill Score.StateEnergy with one more call, and StateEnergy evaluates
// it alone, for either policy kind.
//
// A Sampler has one owner: it is not safe for concurrent use, and it owns
// its buffers and its sessions. In the runtime, the inference goroutine
// owns it. After the first call, Sample, SampleObs, SampleBatch,
// SampleWithNoise, Score, ScoreObs and StateEnergy allocate nothing.
type Sampler struct {
	b     *Bundle
	cond  *Conditioner
	log   *slog.Logger
	noise NoiseSource

	batch, steps int
	rowLen       int // T_p×D_a
	condDim      int
	m            int // reference actions used (0 with NoReferences)
	sched        Schedule
	ts, scales   []float32
	sig2         []float32 // σ(t_k)² per Euler step (a guide's denoised estimate)
	kappa        float32   // κ = Δt·ln(σ_max/σ_min)/T = c_k/σ_k² (Guide)
	mean, std    []float32 // action_norm

	// guide is SampleGuided's standardized guide; guiding is set for the
	// duration of a guided sample.
	guide   guideState
	guiding bool

	// actionsOnly: SamplerOptions.ActionsOnly (no energy at γ after the
	// steps; the energies of a sample are NaN).
	actionsOnly bool

	// SampleWarm's start (warm.go): set for the duration of a warm sample,
	// the standardized plan wx0 (rowLen) noised to wsigma and integrated
	// over wts/wscales.
	warming      bool
	wsigma       float64
	wts, wscales []float32
	wx0          []float32

	// Diffusion (policy "diffusion"): the DDIM steps of the current S, the
	// clip bound (0: none) and the error Score returns.
	diffusion bool
	ddim      []ddimStep
	clip      float32
	noEnergy  error

	step, ref     Session
	state         *StateTerm // nil: the bundle has no state term
	fused         FusedSampler
	stepIn        [][]float32 // a_t, cond, t
	stepOut       [][]float32 // grad_a, energy
	refIn, refOut [][]float32
	a, z          []float32 // batch×rowLen
	condBuf       []float32 // batch×cond_dim
	energy        []float32 // batch: E(a_K, cond, γ) of the last call
	fusedEnergy   []float32
	stats         SamplerStats
	closed        bool
}

// NewSampler opens the graph of the bundle's policy on be and prepares the
// schedule, noise and buffers: for "energyflow" the energy-gradient graph
// (a step session of Batch rows and, unless NoReferences, a reference
// session of Batch×M rows), for "diffusion" the noise-prediction graph (a
// step session of Batch rows). Close releases the sessions; the caller
// keeps owning be.
func NewSampler(b *Bundle, be Backend, opts SamplerOptions) (*Sampler, error) {
	m := &b.Manifest
	batch := opts.Batch
	if batch == 0 {
		batch = 1
	}
	if batch < 0 {
		return nil, fmt.Errorf("engines: sampler batch %d, expected ≥ 1", batch)
	}
	cond, err := NewConditioner(m)
	if err != nil {
		return nil, err
	}
	s := &Sampler{
		b: b, cond: cond, log: opts.Logger, noise: opts.Noise,
		batch: batch, rowLen: m.PredHorizon * m.ActionDim, condDim: m.CondDim,
		sched: m.Schedule,
		mean:  m.ActionNorm.Mean, std: m.ActionNorm.Std,
		diffusion: !m.HasEnergy(), actionsOnly: opts.ActionsOnly && m.HasEnergy(),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	refs := m.ReferenceActions
	if opts.NoReferences || opts.ActionsOnly || s.diffusion {
		refs = nil
	}
	if s.diffusion {
		s.clip = float32(m.Schedule.ClipSample)
		s.noEnergy = fmt.Errorf("engines: bundle %q: policy kind %q has no energy to score actions with (check Sampler.HasEnergy): %w", m.Name, m.Policy, ErrNoEnergy)
	}
	s.m = len(refs)
	if s.noise == nil {
		s.noise = NewNormalNoise(opts.Seed)
	}
	steps := opts.Steps
	if steps == 0 {
		steps = m.Sampler.Steps
	}
	if err := s.SetSteps(steps); err != nil {
		return nil, err
	}
	s.a = make([]float32, batch*s.rowLen)
	s.z = make([]float32, batch*s.rowLen)
	s.condBuf = make([]float32, batch*s.condDim)
	s.fusedEnergy = make([]float32, batch)
	s.wx0 = make([]float32, s.rowLen)

	graph := m.PolicyGraph()
	if opts.Graph != "" {
		if opts.Graph != GraphEnergyGradLate || m.LatePolicy == nil || !opts.ActionsOnly {
			return nil, fmt.Errorf("engines: sampler graph %q: want \"\" (the policy graph) or %q with ActionsOnly on a bundle with a late_policy block", opts.Graph, GraphEnergyGradLate)
		}
		graph = opts.Graph
	}
	stepSpec, err := b.GraphSpec(graph, batch)
	if err != nil {
		return nil, err
	}
	if s.step, err = be.Open(stepSpec); err != nil {
		return nil, fmt.Errorf("engines: sampler: %w", err)
	}
	s.stepIn, s.stepOut, err = s.step.Bind(batch)
	if err == nil {
		outs := []int{batch * s.rowLen, batch} // grad_a, energy
		if s.diffusion {
			outs = outs[:1] // eps
		}
		err = checkBuffers("step", s.stepIn, s.stepOut, batch, s.rowLen, s.condDim, outs...)
	}
	if err == nil && s.m > 0 {
		var refSpec GraphSpec
		if refSpec, err = b.GraphSpec(GraphEnergyGrad, batch*s.m); err == nil {
			if s.ref, err = be.Open(refSpec); err == nil {
				if s.refIn, s.refOut, err = s.ref.Bind(batch * s.m); err == nil {
					err = checkBuffers("reference", s.refIn, s.refOut, batch*s.m, s.rowLen, s.condDim, batch*s.m*s.rowLen, batch*s.m)
				}
			}
		}
	}
	if err == nil && m.StateEnergy != nil && opts.Graph == "" { // the late network's sampler only plans
		s.state, err = NewStateTerm(b, be)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("engines: sampler: %w", err)
	}
	if !s.diffusion {
		s.energy = s.stepOut[1]
		if f, ok := s.step.(FusedSampler); ok {
			s.fused = f
			s.energy = s.fusedEnergy
		}
	}
	// Constant parts of the reference batch: block b, row r holds ref_r,
	// and t = γ everywhere.
	if s.m > 0 {
		for blk := 0; blk < batch; blk++ {
			for r, ref := range refs {
				row := s.refIn[0][(blk*s.m+r)*s.rowLen:]
				for j, step := range ref {
					copy(row[j*m.ActionDim:(j+1)*m.ActionDim], step)
				}
			}
		}
		fill(s.refIn[2], float32(s.sched.Gamma))
	}
	s.log.Debug("engines: sampler ready", "bundle", m.Name, "policy", m.Policy, "backend", be.Name(), "steps", s.steps, "batch", batch, "references", s.m, "fused", s.fused != nil, "state_term", s.state != nil)
	return s, nil
}

// checkBuffers checks what a backend's Bind returned against the contract:
// inputs a_t, cond, t of n rows, and outputs of the given lengths.
func checkBuffers(name string, in, out [][]float32, n, rowLen, condDim int, outLens ...int) error {
	want := func(what string, got [][]float32, lens ...int) error {
		if len(got) != len(lens) {
			return fmt.Errorf("%s session %s: backend returned %d buffers, expected %d", name, what, len(got), len(lens))
		}
		for i, l := range lens {
			if len(got[i]) != l {
				return fmt.Errorf("%s session %s: buffer %d has %d floats, expected %d", name, what, i, len(got[i]), l)
			}
		}
		return nil
	}
	return errors.Join(want("inputs", in, n*rowLen, n*condDim, n), want("outputs", out, outLens...))
}

// SetSteps changes the number of sampler steps: K Euler steps
// (energyflow, K ≥ 1) or S DDIM steps (diffusion, 1 ≤ S ≤
// num_train_timesteps). It allocates only when the count grows beyond any
// used before.
func (s *Sampler) SetSteps(k int) error {
	if s.diffusion {
		return s.setDDIMSteps(k)
	}
	if k < 1 {
		return fmt.Errorf("engines: sampler steps %d, expected K ≥ 1", k)
	}
	if cap(s.ts) < k {
		s.ts, s.scales, s.sig2 = make([]float32, k), make([]float32, k), make([]float32, k)
	}
	s.ts, s.scales, s.sig2 = s.ts[:k], s.scales[:k], s.sig2[:k]
	s.sched.Steps(s.ts, s.scales)
	dt := (s.sched.T - s.sched.Gamma) / float64(k)
	s.kappa = float32(dt * math.Log(s.sched.SigmaMax/s.sched.SigmaMin) / s.sched.T)
	for i := range s.sig2 {
		sg := s.sched.Sigma(s.sched.T - float64(float64(i)*dt))
		s.sig2[i] = float32(sg * sg)
	}
	s.steps = k
	return nil
}

// Steps returns the number of sampler steps (K or S).
func (s *Sampler) Steps() int { return s.steps }

// HasEnergy reports whether the policy has an energy (energyflow). Without
// one (diffusion) Result.Score is zero and Score returns ErrNoEnergy.
func (s *Sampler) HasEnergy() bool { return !s.diffusion }

// HasStateEnergy reports whether the bundle has the state term: Score,
// ScoreObs and StateEnergy then evaluate it.
func (s *Sampler) HasStateEnergy() bool { return s.state != nil }

// Batch returns the number of rows per call.
func (s *Sampler) Batch() int { return s.batch }

// Conditioner returns the conditioning builder of the bundle.
func (s *Sampler) Conditioner() *Conditioner { return s.cond }

// Fused reports whether the step session integrates on the device.
func (s *Sampler) Fused() bool { return s.fused != nil }

// Stats returns the counters since creation or ResetStats.
func (s *Sampler) Stats() SamplerStats { return s.stats }

// ResetStats zeroes the counters.
func (s *Sampler) ResetStats() { s.stats = SamplerStats{} }

// Sample draws noise from the sampler's source and samples one action chunk
// for cond (len cond_dim). The sampler must have Batch 1.
func (s *Sampler) Sample(cond []float32, dst *Result) error {
	if s.batch != 1 {
		return fmt.Errorf("engines: Sample needs a sampler of batch 1 (this one has %d); use SampleBatch", s.batch)
	}
	s.noise.Normal(s.z)
	if err := s.run(cond, s.z); err != nil {
		return err
	}
	s.collect(0, dst)
	return nil
}

// SampleObs builds cond from the observation history (Conditioner.Build)
// and samples one action chunk. The sampler must have Batch 1.
func (s *Sampler) SampleObs(history []ObsFrame, dst *Result) error {
	c := s.condBuf[:s.condDim]
	if err := s.cond.Build(history, c); err != nil {
		return err
	}
	return s.Sample(c, dst)
}

// SampleBatch samples Batch rows: cond is Batch×cond_dim, dst has Batch
// results.
func (s *Sampler) SampleBatch(cond []float32, dst []Result) error {
	s.noise.Normal(s.z)
	return s.SampleWithNoise(cond, s.z, dst)
}

// SampleWithNoise is SampleBatch with the initial noise given: z is
// Batch×T_p×D_a standard-normal values (the parity fixtures' "noise");
// the sampler starts from a_0 = sigma_max·z (energyflow) or x = z
// (diffusion).
func (s *Sampler) SampleWithNoise(cond, z []float32, dst []Result) error {
	if len(dst) != s.batch {
		return fmt.Errorf("engines: %d results for a sampler of batch %d", len(dst), s.batch)
	}
	if len(z) != len(s.a) {
		return fmt.Errorf("engines: noise has %d values, expected batch×T_p×D_a = %d", len(z), len(s.a))
	}
	if err := s.run(cond, z); err != nil {
		return err
	}
	for i := range dst {
		s.collect(i, &dst[i])
	}
	return nil
}

// run integrates the batch from z: Algorithm 2 then the energy at γ and
// the reference energies (energyflow), or DDIM (diffusion).
func (s *Sampler) run(cond, z []float32) error {
	if s.closed {
		return errors.New("engines: sampler is closed")
	}
	if len(cond) != s.batch*s.condDim {
		return fmt.Errorf("engines: cond has %d values, expected batch×cond_dim = %d", len(cond), s.batch*s.condDim)
	}
	start := time.Now()
	if s.diffusion {
		if err := s.runDDIM(cond, z); err != nil {
			return err
		}
		s.stats.Samples++
		s.stats.TotalTime += time.Since(start)
		return nil
	}
	sigma0, ts, scales := float32(s.sched.SigmaMax), s.ts, s.scales
	if s.warming {
		sigma0, ts, scales = float32(s.wsigma), s.wts, s.wscales
	}
	if s.fused != nil {
		s.initial(s.a, z, sigma0)
		t0 := time.Now()
		err := s.fused.SampleFused(s.batch, s.a, cond, ts, scales, float32(s.sched.Gamma), s.fusedEnergy)
		s.countBackend(t0)
		if err != nil {
			return fmt.Errorf("engines: fused sampling: %w", err)
		}
	} else {
		a, c, t := s.stepIn[0], s.stepIn[1], s.stepIn[2]
		grad := s.stepOut[0]
		copy(c, cond)
		s.initial(a, z, sigma0)
		for k, tk := range ts {
			fill(t, tk)
			if err := s.runStep(); err != nil {
				return fmt.Errorf("engines: Euler step %d of %d: %w", k, len(ts), err)
			}
			scale := scales[k]
			if s.guiding {
				s.guidedEuler(a, grad, scale, s.sig2[k])
				continue
			}
			for i, g := range grad {
				// The explicit conversion rounds the product first: the Go
				// spec then forbids fusing it into a multiply-add (arm64),
				// which would break parity with the float32 reference.
				a[i] -= float32(scale * g)
			}
		}
		copy(s.a, a)
		if s.actionsOnly {
			fill(s.energy, float32(math.NaN()))
		} else {
			fill(t, float32(s.sched.Gamma))
			if err := s.runStep(); err != nil {
				return fmt.Errorf("engines: energy at gamma: %w", err)
			}
		}
	}
	if err := s.runRefs(cond); err != nil {
		return err
	}
	s.stats.Samples++
	s.stats.TotalTime += time.Since(start)
	return nil
}

// initial writes the sample's start into a: sigma0·z, plus the
// standardized plan of a warm start (a batch-1 sampler's only row).
func (s *Sampler) initial(a, z []float32, sigma0 float32) {
	for i, v := range z {
		a[i] = sigma0 * v
	}
	if s.warming {
		for i, v := range s.wx0 {
			a[i] += v
		}
	}
}

func (s *Sampler) runStep() error {
	t0 := time.Now()
	err := s.step.Run()
	s.countBackend(t0)
	return err
}

// runRefs evaluates the M reference actions under each row's cond in one
// call (nothing with NoReferences).
func (s *Sampler) runRefs(cond []float32) error {
	if s.m == 0 {
		return nil
	}
	rc := s.refIn[1]
	for b := 0; b < s.batch; b++ {
		cb := cond[b*s.condDim : (b+1)*s.condDim]
		for r := 0; r < s.m; r++ {
			copy(rc[(b*s.m+r)*s.condDim:], cb)
		}
	}
	t0 := time.Now()
	err := s.ref.Run()
	s.countBackend(t0)
	if err != nil {
		return fmt.Errorf("engines: reference energies: %w", err)
	}
	return nil
}

func (s *Sampler) countBackend(t0 time.Time) {
	s.stats.BackendCalls++
	s.stats.BackendTime += time.Since(t0)
}

// scoreOf reads row b of the last energy and reference calls (the zero
// Score without an energy). StateEnergy is NaN: the caller fills it.
func (s *Sampler) scoreOf(b int) Score {
	if s.diffusion {
		return Score{}
	}
	e := s.energy[b]
	nan := float32(math.NaN())
	if s.m == 0 {
		return Score{Energy: e, RefEnergyMean: nan, CenteredEnergy: nan, CenteredReward: nan, StateEnergy: nan}
	}
	var sum float64
	for _, v := range s.refOut[1][b*s.m : (b+1)*s.m] {
		sum += float64(v)
	}
	ref := float32(sum / float64(s.m))
	c := e - ref
	return Score{Energy: e, RefEnergyMean: ref, CenteredEnergy: c, CenteredReward: -c, StateEnergy: nan}
}

// collect copies row b of the last run into dst.
func (s *Sampler) collect(b int, dst *Result) {
	dst.ActionsStd = grow(dst.ActionsStd, s.rowLen)
	dst.Actions = grow(dst.Actions, s.rowLen)
	copy(dst.ActionsStd, s.a[b*s.rowLen:(b+1)*s.rowLen])
	unstandardize(dst.Actions, dst.ActionsStd, s.mean, s.std)
	dst.Score = s.scoreOf(b)
}

// Score evaluates one committed action chunk (un-standardized, T_p×D_a, as
// in Result.Actions) under cond (cond_dim): its energy at γ and the
// centered energy against the reference actions, with one energy call (and
// the one reference call), and, when the bundle has the state term, the
// state energy of cond (one more call). The safety monitor calls it every
// tick with the newest observation. Allocates nothing. On a batched sampler
// every row evaluates the same chunk: Score is cheapest at Batch 1. A
// policy without an energy returns an error wrapping ErrNoEnergy (its
// state term is still available through StateEnergy).
func (s *Sampler) Score(actions, cond []float32) (Score, error) {
	if s.closed {
		return Score{}, errors.New("engines: sampler is closed")
	}
	if s.diffusion {
		return Score{}, s.noEnergy
	}
	if len(actions) != s.rowLen {
		return Score{}, fmt.Errorf("engines: Score: actions have %d values, expected T_p×D_a = %d", len(actions), s.rowLen)
	}
	if len(cond) != s.condDim {
		return Score{}, fmt.Errorf("engines: Score: cond has %d values, expected cond_dim = %d", len(cond), s.condDim)
	}
	start := time.Now()
	a, c, t := s.stepIn[0], s.stepIn[1], s.stepIn[2]
	da := len(s.mean)
	for b := 0; b < s.batch; b++ {
		row := a[b*s.rowLen : (b+1)*s.rowLen]
		for i, v := range actions {
			d := i % da
			row[i] = (v - s.mean[d]) / s.std[d]
		}
	}
	cb := s.condBuf // batch×cond_dim; block 0 may be cond itself (ScoreObs)
	for b := 0; b < s.batch; b++ {
		copy(cb[b*s.condDim:(b+1)*s.condDim], cond)
	}
	copy(c, cb)
	fill(t, float32(s.sched.Gamma))
	if err := s.runStep(); err != nil {
		return Score{}, fmt.Errorf("engines: Score: %w", err)
	}
	if err := s.runRefs(cb); err != nil {
		return Score{}, err
	}
	sc := s.scoreOf(0)
	sc.Energy = s.stepOut[1][0]
	if s.m > 0 {
		sc.CenteredEnergy = sc.Energy - sc.RefEnergyMean
		sc.CenteredReward = -sc.CenteredEnergy
	}
	if s.state != nil {
		var err error
		if sc.StateEnergy, err = s.runState(cond); err != nil {
			return Score{}, fmt.Errorf("engines: Score: %w", err)
		}
	}
	s.stats.TotalTime += time.Since(start)
	return sc, nil
}

// runState evaluates the state term on cond, counted as a backend call.
func (s *Sampler) runState(cond []float32) (float32, error) {
	t0 := time.Now()
	v, err := s.state.Energy(cond)
	s.countBackend(t0)
	return v, err
}

// StateEnergy returns the state term's reading of cond (cond_dim values):
// one call of the state graph, for either policy kind. It returns an error
// wrapping ErrNoStateEnergy when the bundle has no state term
// (HasStateEnergy). Allocates nothing.
func (s *Sampler) StateEnergy(cond []float32) (float32, error) {
	if s.closed {
		return 0, errors.New("engines: sampler is closed")
	}
	if s.state == nil {
		return 0, fmt.Errorf("engines: bundle %q: %w", s.b.Manifest.Name, ErrNoStateEnergy)
	}
	start := time.Now()
	v, err := s.runState(cond)
	s.stats.TotalTime += time.Since(start)
	return v, err
}

// StateEnergyObs is StateEnergy with cond built from the observation
// history.
func (s *Sampler) StateEnergyObs(history []ObsFrame) (float32, error) {
	c := s.condBuf[:s.condDim]
	if err := s.cond.Build(history, c); err != nil {
		return 0, err
	}
	return s.StateEnergy(c)
}

// ScoreObs is Score with cond built from the observation history.
func (s *Sampler) ScoreObs(actions []float32, history []ObsFrame) (Score, error) {
	if s.diffusion && !s.closed {
		return Score{}, s.noEnergy
	}
	c := s.condBuf[:s.condDim]
	if err := s.cond.Build(history, c); err != nil {
		return Score{}, err
	}
	return s.Score(actions, c)
}

// Close closes the sampler's sessions. Idempotent.
func (s *Sampler) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.step != nil {
		errs = append(errs, s.step.Close())
	}
	if s.ref != nil {
		errs = append(errs, s.ref.Close())
	}
	if s.state != nil {
		errs = append(errs, s.state.Close())
	}
	return errors.Join(errs...)
}

// Steps fills ts[k] = t_k = T − k·Δt and scales[k] = Δt·½·dσ²/dt(t_k) for
// K = len(ts) Euler steps, Δt = (T − γ)/K (Algorithm 2).
func (sc Schedule) Steps(ts, scales []float32) {
	k := len(ts)
	dt := (sc.T - sc.Gamma) / float64(k)
	for i := range ts {
		// float64(…) rounds the product: no fused multiply-subtract on
		// arm64, so t_k is the reference's T − k·Δt on every platform.
		t := sc.T - float64(float64(i)*dt)
		ts[i] = float32(t)
		scales[i] = float32(dt * 0.5 * sc.DSigma2Dt(t))
	}
}

// Sigma is σ(t) = σ_min^(1−t/T) · σ_max^(t/T).
func (sc Schedule) Sigma(t float64) float64 {
	return math.Pow(sc.SigmaMin, 1-t/sc.T) * math.Pow(sc.SigmaMax, t/sc.T)
}

// DSigma2Dt is dσ²/dt = 2 σ(t)² ln(σ_max/σ_min) / T.
func (sc Schedule) DSigma2Dt(t float64) float64 {
	s := sc.Sigma(t)
	return 2 * s * s * math.Log(sc.SigmaMax/sc.SigmaMin) / sc.T
}

func unstandardize(dst, src, mean, std []float32) {
	da := len(mean)
	for i, v := range src {
		d := i % da
		// float32(…) rounds the product first: no fused multiply-add on
		// arm64, so actions round like the reference's a·std + mean.
		dst[i] = float32(v*std[d]) + mean[d]
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func fill(b []float32, v float32) {
	for i := range b {
		b[i] = v
	}
}
