package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ErrNoHDF5 is returned by Save in builds without cgo (no libhdf5).
var ErrNoHDF5 = errors.New("record: built without cgo: HDF5 recording needs libhdf5 (build with CGO_ENABLED=1 and libhdf5-dev)")

// Series is one recorded per-step signal: rows of equal width. Shape is the
// per-step shape (e.g. [39] or [96, 96, 3]); exactly one of F32 and U8 holds
// the data, len = steps × product(Shape).
type Series struct {
	Shape []int
	F32   []float32
	U8    []uint8
}

func (s *Series) width() int {
	w := 1
	for _, d := range s.Shape {
		w *= d
	}
	return w
}

// Steps returns the number of rows.
func (s *Series) Steps() int {
	w := s.width()
	if w == 0 {
		return 0
	}
	if s.U8 != nil {
		return len(s.U8) / w
	}
	return len(s.F32) / w
}

// Episode is one recorded episode in memory.
type Episode struct {
	Env        string             // environment or robot name (data attr "env")
	Obs        map[string]*Series // observation keys
	Actions    *Series            // commanded actions
	Scores     map[string]*Series // per-step scores, shape [] (scalars)
	Success    bool
	StopReason string
	Events     []any // safety events, stored as JSON
	Started    time.Time
}

// NewEpisode returns an empty episode for env with the given observation
// shapes and action width.
func NewEpisode(env string, obsShapes map[string][]int, actionDim int, scoreNames ...string) *Episode {
	e := &Episode{Env: env, Obs: map[string]*Series{}, Scores: map[string]*Series{},
		Actions: &Series{Shape: []int{actionDim}}, Started: time.Now()}
	for k, sh := range obsShapes {
		e.Obs[k] = &Series{Shape: append([]int(nil), sh...)}
	}
	for _, n := range scoreNames {
		e.Scores[n] = &Series{Shape: nil}
	}
	return e
}

// AppendF32 appends one row to a float series.
func (s *Series) AppendF32(row []float32) { s.F32 = append(s.F32, row...) }

// AppendU8 appends one row to a byte series (images).
func (s *Series) AppendU8(row []uint8) { s.U8 = append(s.U8, row...) }

// Validate checks that every series has whole rows and the same length.
func (e *Episode) Validate() error {
	n := e.Actions.Steps()
	var errs []error
	check := func(name string, s *Series) {
		w := s.width()
		total := len(s.F32)
		if s.U8 != nil {
			total = len(s.U8)
		}
		if w > 0 && total%w != 0 {
			errs = append(errs, fmt.Errorf("record: %s has %d values, not a multiple of its row width %d", name, total, w))
		}
		if s.Steps() != n {
			errs = append(errs, fmt.Errorf("record: %s has %d steps, actions have %d", name, s.Steps(), n))
		}
	}
	for _, k := range sortedKeys(e.Obs) {
		check("obs/"+k, e.Obs[k])
	}
	for _, k := range sortedKeys(e.Scores) {
		check("scores/"+k, e.Scores[k])
	}
	if n == 0 {
		errs = append(errs, errors.New("record: episode has no steps"))
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]*Series) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Save writes the episode into dir as episode-<start time>-<n>.hdf5 through a
// temporary file that is synced and renamed only when complete. It returns
// the final path.
func Save(dir string, e *Episode) (string, error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	events, err := json.Marshal(e.Events)
	if err != nil {
		return "", fmt.Errorf("record: events: %w", err)
	}
	base := "episode-" + e.Started.UTC().Format("20060102T150405.000Z")
	final := filepath.Join(dir, base+".hdf5")
	for i := 1; fileExists(final); i++ {
		final = filepath.Join(dir, fmt.Sprintf("%s-%d.hdf5", base, i))
	}
	tmp := final + ".partial"
	if err := writeHDF5(tmp, e, string(events)); err != nil {
		os.Remove(tmp)
		return "", err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("record: sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("record: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return final, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
