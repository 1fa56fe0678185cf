package runtime

import (
	"log/slog"
	"math"
	"sync"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/runtime/record"
	"github.com/energyflow/edge/safety"
)

// recorder collects RUNNING ticks into episodes and saves each one (in the
// background) when it reaches recording.max_steps, when the gate trips, and
// at shutdown. Step is called by the loop; event by the event forwarder.
type recorder struct {
	dir      string
	env      string
	obsName  string
	obsWidth int
	dim      int
	maxSteps int
	state    bool // the bundle has the state term: record "state_energy" too
	log      *slog.Logger

	mu     sync.Mutex
	ep     *record.Episode
	row    []float32
	saving sync.WaitGroup
	saveMu sync.Mutex // libhdf5 (serial build) writes one file at a time
}

func newRecorder(cfg *Config, m *engines.Manifest, log *slog.Logger) *recorder {
	r := &recorder{dir: cfg.Recording.Dir, env: m.Name, dim: m.ActionDim, maxSteps: cfg.Recording.MaxSteps, state: m.HasStateEnergy(), log: log}
	for _, o := range m.Obs {
		if o.Kind == "state" {
			r.obsName, r.obsWidth = o.Name, o.Width()
		}
	}
	r.row = make([]float32, r.dim)
	return r
}

func (r *recorder) newEpisode() *record.Episode {
	scores := []string{"energy", "centered_energy"}
	if r.state {
		scores = append(scores, "state_energy")
	}
	ep := record.NewEpisode(r.env, map[string][]int{r.obsName: {r.obsWidth}}, r.dim, scores...)
	ep.Obs[r.obsName].F32 = make([]float32, 0, r.maxSteps*r.obsWidth)
	ep.Actions.F32 = make([]float32, 0, r.maxSteps*r.dim)
	for _, s := range ep.Scores {
		s.F32 = make([]float32, 0, r.maxSteps)
	}
	return ep
}

// Step appends one tick. Buffers are preallocated for max_steps rows.
func (r *recorder) Step(obs []float32, action []float64, gripper float64, scores safety.Scores) {
	r.mu.Lock()
	if r.ep == nil {
		r.ep = r.newEpisode()
	}
	for i := range r.row {
		if i < len(action) {
			r.row[i] = float32(action[i])
		} else {
			r.row[i] = float32(gripper)
		}
	}
	r.ep.Obs[r.obsName].AppendF32(obs)
	r.ep.Actions.AppendF32(r.row)
	r.ep.Scores["energy"].AppendF32([]float32{nanTo(scores[safety.ScoreEnergy])})
	r.ep.Scores["centered_energy"].AppendF32([]float32{nanTo(scores[safety.ScoreCentered])})
	if r.state {
		r.ep.Scores["state_energy"].AppendF32([]float32{nanTo(scores[safety.ScoreStateEnergy])})
	}
	full := r.ep.Actions.Steps() >= r.maxSteps
	r.mu.Unlock()
	if full {
		r.flush("max_steps")
	}
}

func nanTo(v float64) float32 {
	if math.IsNaN(v) {
		return float32(math.NaN())
	}
	return float32(v)
}

// event records a safety event in the current episode and ends the
// episode on a trip.
func (r *recorder) event(e safety.Event) {
	r.mu.Lock()
	if r.ep != nil {
		r.ep.Events = append(r.ep.Events, map[string]any{"type": e.Type.String(), "tick": e.Tick, "time": e.Time,
			"reason": e.Reason.Kind.String(), "message": e.Reason.Message, "actor": e.Actor})
	}
	r.mu.Unlock()
	if e.Type == safety.EventTrip {
		r.flush("stopped: " + e.Reason.Kind.String())
	}
}

// flush saves the current episode (if any) in the background.
func (r *recorder) flush(reason string) {
	r.mu.Lock()
	ep := r.ep
	r.ep = nil
	r.mu.Unlock()
	if ep == nil || ep.Actions.Steps() == 0 {
		if reason == "shutdown" {
			r.saving.Wait() // a trip's save may still be writing
		}
		return
	}
	ep.StopReason = reason
	r.saving.Add(1)
	go func() {
		defer r.saving.Done()
		r.saveMu.Lock()
		defer r.saveMu.Unlock()
		path, err := record.Save(r.dir, ep)
		if err != nil {
			r.log.Error("recording not saved", "err", err)
			return
		}
		r.log.Info("recording saved", "path", path, "steps", ep.Actions.Steps(), "reason", reason)
	}()
	if reason == "shutdown" {
		r.saving.Wait()
	}
}
