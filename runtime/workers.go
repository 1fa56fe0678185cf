package runtime

import (
	"context"
	"time"

	"github.com/energyflow/edge/engines"
)

// PolicySampler is what the inference goroutine needs from a policy:
// *engines.Sampler implements it.
type PolicySampler interface {
	Sample(cond []float32, dst *engines.Result) error
	// SampleGuided is Sample under a real-time chunking guide (nil: Sample).
	SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error
}

// PolicyScorer is what the re-scoring goroutine needs: *engines.Sampler
// implements it (the energies, and Score.StateEnergy when the bundle has
// the state term; NaN otherwise). A policy without an energy (diffusion)
// has none (LoopDeps.Scorer nil).
type PolicyScorer interface {
	Score(actions, cond []float32) (engines.Score, error)
}

// StateTermEvaluator is what the loop needs to score the newest
// observation with the bundle's state term every tick, from the loop's
// goroutine: *engines.StateTerm implements it. Energy returns
// state_energy of one conditioning vector (cond_dim values). The loop is
// its only user; Energy must allocate nothing.
type StateTermEvaluator interface {
	Energy(cond []float32) (float32, error)
}

var _ StateTermEvaluator = (*engines.StateTerm)(nil)

// worker runs one job at a time in its own goroutine. The single job's
// ownership alternates between the loop (while idle) and the worker (while
// busy), so nothing is allocated per request. Only the loop calls submit,
// poll and wait.
type worker[J any] struct {
	job  *J
	in   chan *J
	out  chan *J
	busy bool
}

func newWorker[J any](job *J) *worker[J] {
	return &worker[J]{job: job, in: make(chan *J, 1), out: make(chan *J, 1)}
}

// run executes do on each submitted job until ctx is done.
func (w *worker[J]) run(ctx context.Context, do func(*J)) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.in:
			do(j)
			select {
			case w.out <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

// submit hands the job (filled by the caller) to the worker; false if one
// is in flight.
func (w *worker[J]) submit() bool {
	if w.busy {
		return false
	}
	w.busy = true
	w.in <- w.job
	return true
}

// poll returns the finished job without waiting, or nil.
func (w *worker[J]) poll() *J {
	if !w.busy {
		return nil
	}
	select {
	case j := <-w.out:
		w.busy = false
		return j
	default:
		return nil
	}
}

// wait returns the finished job, waiting at most until deadline fires; nil
// if the worker is idle or still busy then.
func (w *worker[J]) wait(deadline <-chan time.Time) *J {
	if !w.busy {
		return nil
	}
	select {
	case j := <-w.out:
		w.busy = false
		return j
	case <-deadline:
		return nil
	}
}

// inferJob is the in-flight sampling request and its result.
type inferJob struct {
	cond    []float32
	guide   *engines.Guide // nil: real-time chunking is off
	warm    *engines.Warm  // nil: warm starts are off
	useWarm bool           // this plan starts from warm (fillWarm)
	late    bool           // this plan samples on the late network (planLate)
	obsTime time.Time
	start   time.Time
	res     engines.Result
	latency time.Duration
	err     error
}

// scoreJob is the in-flight re-scoring request: the committed plan under the
// newest observation.
type scoreJob struct {
	actions []float32
	cond    []float32
	obsTime time.Time
	start   time.Time
	score   engines.Score
	latency time.Duration
	err     error
}

func newInferWorker(condDim int) *worker[inferJob] {
	return newWorker(&inferJob{cond: make([]float32, condDim)})
}

func newScoreWorker(window, condDim int) *worker[scoreJob] {
	return newWorker(&scoreJob{actions: make([]float32, window), cond: make([]float32, condDim)})
}
