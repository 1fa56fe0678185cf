package runtime

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// TestRecorderShutdownWaitsForTripSave: a trip saves its episode in the
// background; a shutdown right after it (the process about to exit) must
// wait for that save, or the one recording of why the arm stopped is lost.
func TestRecorderShutdownWaitsForTripSave(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Recording.Dir = dir
	cfg.Recording.MaxSteps = 100
	m := &engines.Manifest{Name: "test", ActionDim: 4, Obs: []engines.ObsSpec{{Name: "state", Kind: engines.ObsState, Shape: []int{3}}}}
	r := newRecorder(&cfg, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var sc safety.Scores
	for i := range 5 {
		r.Step([]float32{float32(i), 1, 2}, []float64{0.1, 0.2, 0.3}, 0.5, sc)
	}
	r.event(safety.Event{Type: safety.EventTrip, Tick: 5, Reason: safety.Reason{Kind: safety.KindEnergy, Message: "test"}})
	r.flush("shutdown")
	saved, err := filepath.Glob(filepath.Join(dir, "*.hdf5"))
	if err != nil {
		t.Fatal(err)
	}
	partial, _ := filepath.Glob(filepath.Join(dir, "*.partial"))
	if len(saved) != 1 || len(partial) != 0 {
		t.Fatalf("after shutdown: saved %v, partial %v; want the trip's one recording, complete", saved, partial)
	}
}
