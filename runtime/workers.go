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
}

// PolicyScorer is what the re-scoring goroutine needs: *engines.Sampler
// implements it.
type PolicyScorer interface {
	Score(actions, cond []float32) (engines.Score, error)
}

// inferJob is the single in-flight inference request and its result. Its
// ownership alternates between the loop (while idle) and the worker (while
// busy); nothing is allocated per request.
type inferJob struct {
	cond    []float32
	obsTime time.Time
	seq     int64
	start   time.Time
	res     engines.Result
	latency time.Duration
	err     error
}

// inferWorker runs sampling in its own goroutine so that a tick never waits
// for inference.
type inferWorker struct {
	job  *inferJob
	in   chan *inferJob
	out  chan *inferJob
	busy bool
}

func newInferWorker(condDim int) *inferWorker {
	return &inferWorker{job: &inferJob{cond: make([]float32, condDim)}, in: make(chan *inferJob, 1), out: make(chan *inferJob, 1)}
}

// run owns s until ctx is done; the caller closes nothing.
func (w *inferWorker) run(ctx context.Context, s PolicySampler, now func() time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.in:
			j.err = s.Sample(j.cond, &j.res)
			j.latency = now().Sub(j.start)
			select {
			case w.out <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

// submit hands the job to the worker; false if one is in flight.
func (w *inferWorker) submit(obsTime, start time.Time, seq int64) bool {
	if w.busy {
		return false
	}
	w.job.obsTime, w.job.start, w.job.seq = obsTime, start, seq
	w.busy = true
	w.in <- w.job
	return true
}

// poll returns the finished job, or nil. The job is the loop's again until
// the next submit.
func (w *inferWorker) poll() *inferJob {
	select {
	case j := <-w.out:
		w.busy = false
		return j
	default:
		return nil
	}
}

// scoreJob is the single in-flight re-scoring request.
type scoreJob struct {
	actions []float32
	cond    []float32
	obsTime time.Time
	score   engines.Score
	err     error
	latency time.Duration
	start   time.Time
}

// scoreWorker re-scores the committed chunk under the newest observation
// (one batched energy evaluation) so the safety monitor sees a fresh score
// every tick.
type scoreWorker struct {
	job  *scoreJob
	in   chan *scoreJob
	out  chan *scoreJob
	busy bool
}

func newScoreWorker(window, condDim int) *scoreWorker {
	return &scoreWorker{job: &scoreJob{actions: make([]float32, window), cond: make([]float32, condDim)},
		in: make(chan *scoreJob, 1), out: make(chan *scoreJob, 1)}
}

func (w *scoreWorker) run(ctx context.Context, s PolicyScorer, now func() time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.in:
			j.score, j.err = s.Score(j.actions, j.cond)
			j.latency = now().Sub(j.start)
			select {
			case w.out <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (w *scoreWorker) submit(obsTime, start time.Time) bool {
	if w.busy {
		return false
	}
	w.job.obsTime, w.job.start = obsTime, start
	w.busy = true
	w.in <- w.job
	return true
}

// poll returns a finished job without waiting, or nil.
func (w *scoreWorker) poll() *scoreJob {
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

// wait returns the finished job, waiting at most until deadline; nil if the
// worker is idle or still busy at the deadline.
func (w *scoreWorker) wait(deadline <-chan time.Time) *scoreJob {
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
