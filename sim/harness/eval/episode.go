package eval

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
)

// Result is one episode of a closed-loop evaluation.
type Result struct {
	Episode     int      `json:"episode"`
	Seed        int      `json:"seed"`        // scene seed (the bridge's reset)
	PolicySeed  uint64   `json:"policy_seed"` // the sampler's noise seed (policy.seed)
	Success     bool     `json:"success"`
	SuccessStep *int     `json:"success_step"` // environment step of the first success; nil: none
	Steps       int      `json:"steps"`
	Return      float64  `json:"return"`
	End         string   `json:"end"` // success, truncated (the step limit), safety_stop, never_armed (auto-start refused all episode) or interrupted
	StopKind    string   `json:"stop_kind,omitempty"`
	StopTick    int64    `json:"stop_tick,omitempty"`
	StopScore   string   `json:"stop_score,omitempty"` // the score whose rule fired, for an energy stop
	Fault       string   `json:"fault,omitempty"`
	FaultStep   int      `json:"fault_step,omitempty"`
	Inferences  int      `json:"inferences"`            // policy inferences the loop finished
	InferP50    *float64 `json:"inference_p50_ms"`      // their median latency, as the loop measured it; nil: none
	MeanScore   *float64 `json:"mean_energy,omitempty"` // nil: no energy (a diffusion policy) or no fresh score
	// TrackingMax is the largest difference the tracking monitor saw
	// between the hand's measured and commanded displacement at a running
	// tick (m, safety.Decision.Tracking); nil: the monitor is off or
	// compared nothing.
	TrackingMax *float64 `json:"tracking_max,omitempty"`
	// LateSpells counts the times the p90 of the recent plans' latency went
	// past the loop's plan_late_limit (each one a warning), LatePlans the
	// plans that finished while it was past (runtime.LoopStats).
	LateSpells int64 `json:"late_spells"`
	LatePlans  int64 `json:"late_plans"`
	// LateNetPlans counts the plans sampled on the bundle's late network.
	LateNetPlans int64 `json:"late_net_plans"`
	// JoinMax is the largest change of the commanded velocity at a chunk
	// boundary, JoinInside the median change between consecutive actions
	// of one chunk (runtime.Joins; nil: none measured), Joins the
	// boundaries measured.
	JoinMax    *float64 `json:"join_max,omitempty"`
	JoinInside *float64 `json:"join_inside_median,omitempty"`
	Joins      int      `json:"joins"`
	// SwitchMax and SwitchMedian are the largest and median plan switch at
	// a boundary: the new chunk's first action against what the replaced
	// one had planned for that tick (runtime.Joins; nil: none).
	SwitchMax    *float64 `json:"switch_max,omitempty"`
	SwitchMedian *float64 `json:"switch_median,omitempty"`

	inferMs   []float64 // every inference latency, for the cell's quantiles
	lateLimit *float64  // the loop's plan_late_limit in periods; nil: none
	// trace has one entry per RUNNING tick since the gate armed, in order:
	// the traced score (Options.TraceScore, the energy by default) of its
	// fresh score, NaN where the tick had none. Its index is the gate's
	// count of running ticks since arming, its finite entries what the rule
	// observes (sim calibrate fits on it).
	trace []float64
	// watch is what the episode's energy stop watched, in the gate's
	// order (Guard.Thresholds): --watch, or the bundle's default watch set;
	// nil with the energy stop off.
	watch []string
	// stop is the stop that ended the episode, as the runtime reported it
	// (runtime.AppOptions.OnStop); Kind KindNone: none.
	stop safety.Reason
}

// Trace is the episode's traced score at every running tick since the gate
// armed, NaN where the tick had no fresh score (see Options.TraceScore).
func (r *Result) Trace() []float64 { return r.trace }

// InferenceMs is the latency of every inference the loop finished, in
// milliseconds, as the loop measured it.
func (r *Result) InferenceMs() []float64 { return r.inferMs }

// Stop is the stop of the gate that ended the episode, as the runtime
// reported it (kind, score, tick, actor, message); Kind safety.KindNone
// when the episode ended otherwise.
func (r *Result) Stop() safety.Reason { return r.stop }

// inferenceTimes is the episode's runtime.TickObserver: it keeps the
// latency of every inference the loop finishes, as the loop measured it.
type inferenceTimes struct {
	mu sync.Mutex
	ms []float64
}

var _ runtime.TickObserver = (*inferenceTimes)(nil)

func (t *inferenceTimes) ObserveInference(d time.Duration) {
	t.mu.Lock()
	t.ms = append(t.ms, float64(d)/float64(time.Millisecond))
	t.mu.Unlock()
}

func (*inferenceTimes) ObserveTick(time.Duration, time.Duration)   {}
func (*inferenceTimes) TickOverrun()                               {}
func (*inferenceTimes) ObserveEnergy(float64, float64)             {}
func (*inferenceTimes) ObservePlanLateness(float64, float64, bool) {}

func (t *inferenceTimes) values() []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ms)
}

// RunEpisode runs episode idx: it resets the bridge's world to the
// episode's scene (seed Options.Seed + idx, the fault if any), builds the
// runtime against it, and runs until success, the step limit, or a stop
// of the safety gate. Per-tick scores go to scores as JSON lines, the
// runtime's log to out.Stderr.
func RunEpisode(ctx context.Context, out harness.Output, root string, o *Options, b *harness.Bridge, idx int, scores io.Writer) (Result, error) {
	seed := o.Seed + idx
	r := Result{Episode: idx, Seed: seed, Fault: o.Fault}
	if o.Fault != "" {
		r.FaultStep = o.FaultStep
	}
	if _, err := b.Reset(ctx, o.Task, o.Level, seed, o.Fault, o.FaultStep); err != nil {
		return r, err
	}
	cfg, err := o.episodeConfig(root, b, idx)
	if err != nil {
		return r, err
	}
	return o.drive(ctx, out, cfg, b, r, scores)
}

// world is what an episode needs of the simulated world while it runs:
// the episode's status (harness.Bridge.Episode).
type world interface {
	Episode(ctx context.Context) (harness.Episode, error)
}

// drive runs the runtime built from cfg against w until the episode ends:
// the world's episode succeeds, is done or reaches the step limit (the
// harness watches it), or the runtime reports a stop of the gate (the
// typed runtime.AppOptions.OnStop). Either way the harness cancels the
// run; the stop the runtime latches then is expected, logged at info. r
// holds the episode's number, seeds and fault.
func (o *Options) drive(ctx context.Context, out harness.Output, cfg *runtime.Config, w world, r Result, scores io.Writer) (Result, error) {
	r.PolicySeed = cfg.Policy.Seed
	idx, seed, policySeed := r.Episode, r.Seed, r.PolicySeed
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var energies, trace []float64
	trackMax := math.NaN()
	tracking := cfg.Safety.Tracking.Enabled
	var stop safety.Reason
	armed := false      // the gate was Running on some tick: auto-start succeeded
	wasRunning := false // the previous tick's state, for the calibration trace
	enc := json.NewEncoder(scores)
	var app *runtime.App // set before Run: onTick runs only then
	var err error
	onTick := func(tk runtime.Tick, d *safety.Decision, sc safety.Scores) {
		mu.Lock()
		defer mu.Unlock()
		if x := sc[safety.ScoreEnergy]; !math.IsNaN(x) {
			energies = append(energies, x)
		}
		x := sc[o.TraceScore]
		// The gate counts running ticks, and fresh scores, from the tick after
		// the one that armed it (that tick's score decided the reset, seen
		// while stopped); every running tick gets an entry, NaN without a
		// fresh score.
		if d.State == safety.Running && wasRunning {
			trace = append(trace, x)
		}
		wasRunning = d.State == safety.Running
		line := map[string]any{"episode": idx, "seed": seed, "policy_seed": policySeed, "tick": tk.N, "state": d.State.String(),
			"energy": JSONFloat(sc[safety.ScoreEnergy]), "centered_energy": JSONFloat(sc[safety.ScoreCentered])}
		if o.stateTerm {
			line["state_energy"] = JSONFloat(sc[safety.ScoreStateEnergy])
		}
		if d.State == safety.Running && app != nil {
			seq, first := app.Loop().Executed()
			line["command"], line["chunk"], line["chunk_first"] = d.Command.Velocity, seq, first
		}
		if app != nil && app.WatchesUnseen() {
			line["camera_unseen"] = d.CameraUnseen
		}
		if tracking {
			line["tracking"] = JSONFloat(d.Tracking)
			if cfg.Safety.Tracking.Sustained > 0 {
				line["tracking_sum"] = d.TrackingSum
			}
			if x := d.Tracking; d.State == safety.Running && !math.IsNaN(x) && (math.IsNaN(trackMax) || x > trackMax) {
				trackMax = x
			}
		}
		_ = enc.Encode(line)
		armed = armed || d.State == safety.Running
	}
	// The episode's end by a stop: the runtime hands it over typed, on the
	// tick that found it (before that tick's onTick), and the harness ends
	// the run there.
	onStop := func(reason safety.Reason) {
		mu.Lock()
		defer mu.Unlock()
		if stop.Kind == safety.KindNone {
			stop = reason
			cancel()
		}
	}
	infer := &inferenceTimes{ms: make([]float64, 0, o.MaxSteps)}
	app, err = runtime.NewApp(ectx, cfg, runtime.AppOptions{Logger: runtime.NewLogger(out.Stderr, cfg.Log), OnTick: onTick, OnStop: onStop,
		ExpectedShutdown: true, Metrics: infer, InferenceDelay: time.Duration(o.Delay * float64(time.Second) / o.Rate)})
	if err != nil {
		return r, err
	}
	defer app.Close()
	for _, th := range app.Guard().Thresholds() {
		r.watch = append(r.watch, th.Score.String())
	}
	// Watch the episode from the harness side.
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ectx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			ep, err := w.Episode(ectx)
			if err != nil {
				continue
			}
			if ep.Success || ep.Done || ep.Step >= o.MaxSteps {
				cancel()
			}
		}
	}()
	_ = app.Run(ectx)
	cancel()
	<-watchDone
	st := app.Loop().Stats()
	r.LateSpells, r.LatePlans, r.LateNetPlans = st.LateSpells, st.LatePlans, st.LateNetPlans
	j := app.Loop().Joins()
	r.Joins, r.JoinMax, r.JoinInside = j.Boundaries, finite(j.MaxJump), finite(j.InsideMedian)
	r.SwitchMax, r.SwitchMedian = finite(j.SwitchMax), finite(j.SwitchMedian)
	if lim, _ := app.Loop().PlanLateLimit(); lim > 0 {
		r.lateLimit = &lim
	}
	ep, err := w.Episode(context.WithoutCancel(ctx))
	if err != nil {
		return r, err
	}
	r.Steps, r.Success, r.SuccessStep, r.Return = ep.Step, ep.Success, ep.SuccessStep, ep.Return
	mu.Lock()
	defer mu.Unlock()
	r.stop = stop
	if stop.Kind != safety.KindNone && stop.Kind != safety.KindOperator {
		r.StopKind, r.StopTick = stop.Kind.String(), stop.Tick
		if stop.Kind == safety.KindEnergy {
			r.StopScore = stop.Score.String()
		}
	}
	switch {
	case r.Success:
		r.End = "success"
	case r.StopKind != "":
		r.End = "safety_stop"
	case !armed:
		r.End = "never_armed"
	case ep.Done || ep.Step >= o.MaxSteps:
		r.End = "truncated"
	default:
		r.End = "interrupted"
	}
	if m := mean(energies); !math.IsNaN(m) {
		r.MeanScore = &m
	}
	if !math.IsNaN(trackMax) {
		r.TrackingMax = &trackMax
	}
	r.inferMs = infer.values()
	r.trace = trace
	r.Inferences = len(r.inferMs)
	r.InferP50 = Quantile(r.inferMs, 0.5)
	return r, nil
}
