package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/eval"
)

// tracer writes the demo's per-tick scores (--scores) as sim eval --scores
// writes them, one episode after another under the demo's one arming, and
// at the end their summary beside them (FILE less its final "l", as sim
// calibrate --traces reads it). So the energy stop can be certified on the
// driving a watched demo does — episodes back to back, the live view on the
// same cores — and not only on sim eval's one arming per episode.
type tracer struct {
	path      string
	stateTerm bool        // the bundle has the state term: lines carry state_energy
	unseen    func() bool // the runtime watches unseen colours: lines carry camera_unseen
	steps     int         // the bundle's K, the summary's when the flags set none

	mu       sync.Mutex
	f        *os.File
	w        *bufio.Writer
	enc      *json.Encoder
	results  []eval.Result // one per episode with lines, the current one last
	levels   []string      // each result's level
	ticks    []int         // lines written per result
	numbered int           // results with lines: the next one's episode number
	werr     error         // the first write error
}

// newTracer creates path, which must end in .jsonl (its summary is the
// .json beside it).
func newTracer(path string, stateTerm bool) (*tracer, error) {
	if !strings.HasSuffix(path, ".jsonl") {
		return nil, harness.Usagef("--scores %s: must end in .jsonl (its summary is written beside it as .json, as sim calibrate --traces reads it)", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--scores: %w", err)
	}
	w := bufio.NewWriter(f)
	return &tracer{path: path, stateTerm: stateTerm, unseen: func() bool { return false }, f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// begin starts the trace of episode ep, the scene now in place.
func (t *tracer) begin(ep harness.Episode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.results = append(t.results, eval.Result{Seed: ep.Seed, End: "interrupted"})
	t.levels = append(t.levels, ep.Level)
	t.ticks = append(t.ticks, 0)
}

// end records how the current episode ended: ep is the bridge's episode
// just before the next scene replaced it (Done: it ended on its own; else
// the page started a new one and it is interrupted).
func (t *tracer) end(ep harness.Episode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.results) == 0 {
		return
	}
	r := &t.results[len(t.results)-1]
	r.Steps, r.Success, r.SuccessStep, r.Return = ep.Step, ep.Success, ep.SuccessStep, ep.Return
	switch {
	case ep.Success:
		r.End = "success"
	case ep.Done:
		r.End = "truncated"
	}
	if t.werr == nil {
		t.werr = t.w.Flush() // an episode's lines are on disk once it ends
	}
}

// discard closes and removes the file of a demo that did not start.
func (t *tracer) discard() {
	t.f.Close()
	os.Remove(t.path)
}

// onTick writes the tick's line (runtime.AppOptions.OnTick).
func (t *tracer) onTick(tk runtime.Tick, d *safety.Decision, sc safety.Scores) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.results) == 0 || t.werr != nil {
		return
	}
	cur := len(t.results) - 1
	if t.ticks[cur] == 0 { // episodes are numbered as their first line is written
		t.results[cur].Episode, t.numbered = t.numbered, t.numbered+1
	}
	r := t.results[cur]
	line := map[string]any{"episode": r.Episode, "seed": r.Seed, "tick": tk.N, "state": d.State.String(),
		"energy": eval.JSONFloat(sc[safety.ScoreEnergy]), "centered_energy": eval.JSONFloat(sc[safety.ScoreCentered])}
	if t.stateTerm {
		line["state_energy"] = eval.JSONFloat(sc[safety.ScoreStateEnergy])
	}
	if t.unseen() {
		line["camera_unseen"] = d.CameraUnseen
	}
	if err := t.enc.Encode(line); err != nil {
		t.werr = err
		return
	}
	t.ticks[cur]++
}

// close writes the summary of the episodes that have lines — f's task,
// bundle, rate and K (the bundle's when f's is 0), the level when every episode ran at one (else
// "mixed", which calibration refuses) — and closes the file.
func (t *tracer) close(f harness.Flags, observeOnly bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	werr := t.werr
	if werr == nil {
		werr = t.w.Flush()
	}
	if err := t.f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("--scores %s: %w", t.path, werr)
	}
	var rs []eval.Result
	level := ""
	for i, r := range t.results {
		if t.ticks[i] == 0 {
			continue
		}
		rs = append(rs, r)
		switch {
		case level == "":
			level = t.levels[i]
		case level != t.levels[i]:
			level = "mixed"
		}
	}
	if f.Steps == 0 { // the bundle's K, as sim eval reports it
		f.Steps = t.steps
	}
	s := eval.Summarize(f, rs)
	s.Level = level
	s.ObserveOnly = observeOnly
	s.MaxSteps = harness.MetaWorldMaxSteps // the demo's bridge is given no limit
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("--scores summary: %w", err)
	}
	sum := strings.TrimSuffix(t.path, "l")
	if err := os.WriteFile(sum, data, 0o644); err != nil {
		return fmt.Errorf("--scores summary: %w", err)
	}
	return nil
}
