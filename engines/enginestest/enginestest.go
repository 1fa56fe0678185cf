// Package enginestest provides a pure-Go engines.Backend for tests: an
// analytic energy with a closed-form gradient, so samplers, runtimes and
// safety monitors can be tested without ONNX Runtime or a GPU.
//
// # Concepts
//
// The energy of the "energy_grad" graph is
//
//	E(a, cond, t) = ½ (1 + t) ‖a − μ(cond)‖²,  μ(cond) = reshape(cond · W),
//	W[i][j] = 0.3 sin(7i + j)
//
// the same function engines/testdata/quad/energy_grad.onnx computes, so the
// ONNX Runtime backend and this double can be compared. Its gradient is
// (1 + t)(a − μ).
//
// The optional state term ("state_energy" graph: cond → state_energy) is
//
//	S(cond) = ½ ‖cond‖² − 1
//
// as engines/testdata/quad/state_energy.onnx computes it (StateEnergy).
package enginestest

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/energyflow/edge/engines"
)

// Backend is the test double. The zero value is ready; set Fused to give
// its sessions the engines.FusedSampler ability.
type Backend struct {
	// Fused makes Open return sessions that implement engines.FusedSampler.
	Fused bool

	mu     sync.Mutex
	runs   int
	closed bool
}

var _ engines.Backend = (*Backend)(nil)

// Name returns "test".
func (b *Backend) Name() string { return "test" }

// Runs returns the number of graph evaluations (Run calls, and one per
// step and per final energy of SampleFused) so far.
func (b *Backend) Runs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs
}

func (b *Backend) count(n int) {
	b.mu.Lock()
	b.runs += n
	b.mu.Unlock()
}

// Close implements engines.Backend. Idempotent.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// Open accepts the energy_grad graph contract (a_t, cond, t → grad_a,
// energy) and the state graph's (cond → state_energy).
func (b *Backend) Open(spec engines.GraphSpec) (engines.Session, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, errors.New("enginestest: backend is closed")
	}
	if len(spec.Inputs) == 1 && len(spec.Outputs) == 1 && spec.Outputs[0].Name == engines.OutputStateEnergy && len(spec.Inputs[0].Shape) == 2 {
		return &stateSession{b: b, spec: spec, c: int(spec.Inputs[0].Shape[1])}, nil
	}
	if len(spec.Inputs) != 3 || len(spec.Outputs) != 2 || len(spec.Inputs[0].Shape) != 3 || len(spec.Inputs[1].Shape) != 2 {
		return nil, fmt.Errorf("enginestest: graph %q: only the energy_grad contract is simulated", spec.Name)
	}
	tp, da, c := int(spec.Inputs[0].Shape[1]), int(spec.Inputs[0].Shape[2]), int(spec.Inputs[1].Shape[1])
	s := &session{b: b, spec: spec, tp: tp, da: da, c: c, w: Weights(c, tp*da), mu: make([]float32, tp*da)}
	if b.Fused {
		return &fusedSession{s}, nil
	}
	return s, nil
}

// Weights returns W [c][n] of the analytic energy.
func Weights(c, n int) [][]float32 {
	w := make([][]float32, c)
	for i := range w {
		w[i] = make([]float32, n)
		for j := range w[i] {
			w[i][j] = float32(0.3 * math.Sin(float64(7*i+j)))
		}
	}
	return w
}

// Energy evaluates the analytic energy and its gradient for one row: a is
// T_p×D_a, cond is cond_dim; grad (len a) receives ∇ₐE. It is the reference
// the tests compare backends with.
func Energy(w [][]float32, a, cond []float32, t float32, grad []float32) float32 {
	s := 1 + t
	var e float32
	for j := range a {
		var mu float32
		for i, ci := range cond {
			mu += ci * w[i][j]
		}
		d := a[j] - mu
		if grad != nil {
			grad[j] = s * d
		}
		e += d * d
	}
	return 0.5 * s * e
}

// StateEnergy is the analytic state term: ½ ‖cond‖² − 1.
func StateEnergy(cond []float32) float32 {
	var s float32
	for _, c := range cond {
		s += c * c
	}
	return 0.5*s - 1
}

// stateSession simulates the state graph.
type stateSession struct {
	b       *Backend
	spec    engines.GraphSpec
	c, n    int
	in, out [][]float32
	closed  bool
}

func (s *stateSession) Inputs() []engines.TensorInfo  { return s.spec.Inputs }
func (s *stateSession) Outputs() []engines.TensorInfo { return s.spec.Outputs }

func (s *stateSession) Bind(n int) (in, out [][]float32, err error) {
	if s.closed {
		return nil, nil, errors.New("enginestest: session is closed")
	}
	if n < 1 || n > s.spec.MaxBatch {
		return nil, nil, fmt.Errorf("enginestest: batch %d, expected 1..%d", n, s.spec.MaxBatch)
	}
	if n != s.n {
		s.in, s.out = [][]float32{make([]float32, n*s.c)}, [][]float32{make([]float32, n)}
		s.n = n
	}
	return s.in, s.out, nil
}

func (s *stateSession) Run() error {
	if s.closed || s.n == 0 {
		return errors.New("enginestest: Run on a closed or unbound session")
	}
	for r := 0; r < s.n; r++ {
		s.out[0][r] = StateEnergy(s.in[0][r*s.c : (r+1)*s.c])
	}
	s.b.count(1)
	return nil
}

func (s *stateSession) Close() error { s.closed = true; return nil }

type session struct {
	b         *Backend
	spec      engines.GraphSpec
	tp, da, c int
	w         [][]float32
	mu        []float32
	n         int
	in, out   [][]float32
	closed    bool
}

func (s *session) Inputs() []engines.TensorInfo  { return s.spec.Inputs }
func (s *session) Outputs() []engines.TensorInfo { return s.spec.Outputs }

func (s *session) Bind(n int) (in, out [][]float32, err error) {
	if s.closed {
		return nil, nil, errors.New("enginestest: session is closed")
	}
	if n < 1 || n > s.spec.MaxBatch {
		return nil, nil, fmt.Errorf("enginestest: batch %d, expected 1..%d", n, s.spec.MaxBatch)
	}
	if n != s.n {
		p := s.tp * s.da
		s.in = [][]float32{make([]float32, n*p), make([]float32, n*s.c), make([]float32, n)}
		s.out = [][]float32{make([]float32, n*p), make([]float32, n)}
		s.n = n
	}
	return s.in, s.out, nil
}

func (s *session) Run() error {
	if s.closed || s.n == 0 {
		return errors.New("enginestest: Run on a closed or unbound session")
	}
	p := s.tp * s.da
	for r := 0; r < s.n; r++ {
		s.out[1][r] = Energy(s.w, s.in[0][r*p:(r+1)*p], s.in[1][r*s.c:(r+1)*s.c], s.in[2][r], s.out[0][r*p:(r+1)*p])
	}
	s.b.count(1)
	return nil
}

func (s *session) Close() error { s.closed = true; return nil }

// fusedSession adds engines.FusedSampler, integrating in float32 on the host
// exactly as a device implementation would.
type fusedSession struct{ *session }

var _ engines.FusedSampler = (*fusedSession)(nil)

func (f *fusedSession) SampleFused(n int, a, cond, ts, scales []float32, gamma float32, energy []float32) error {
	p := f.tp * f.da
	if len(a) != n*p || len(cond) != n*f.c || len(energy) != n || len(ts) != len(scales) {
		return errors.New("enginestest: SampleFused: bad buffer sizes")
	}
	grad := f.mu[:p] // scratch; mu is only used here
	for r := 0; r < n; r++ {
		ar, cr := a[r*p:(r+1)*p], cond[r*f.c:(r+1)*f.c]
		for k := range ts {
			Energy(f.w, ar, cr, ts[k], grad)
			for i := range ar {
				ar[i] -= scales[k] * grad[i]
			}
		}
		energy[r] = Energy(f.w, ar, cr, gamma, nil)
	}
	f.b.count(len(ts) + 1)
	return nil
}
