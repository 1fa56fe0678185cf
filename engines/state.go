package engines

import (
	"errors"
	"fmt"
)

// ErrNoStateEnergy is returned (wrapped) when the state term is asked of a
// bundle without one (no "state_energy" block in the manifest).
// Manifest.HasStateEnergy tells beforehand.
var ErrNoStateEnergy = errors.New("engines: the bundle has no state term")

// StateTerm evaluates the bundle's optional state term: the graph named by
// the manifest's "state_energy" block maps a conditioning vector to
// state_energy, a score of the observation alone (higher = further from
// every demonstration step; docs/bundle.md). The policy graph is not
// involved: the score is the same whatever the action.
//
// A StateTerm has one owner and is not safe for concurrent use. Its
// session is bound at batch 1 when it is created, so Energy allocates
// nothing.
type StateTerm struct {
	sess    Session
	cond    []float32 // the session's input, cond_dim
	out     []float32 // the session's output, 1
	condDim int
	name    string // the bundle's name, for errors
	closed  bool
}

// NewStateTerm opens the state graph of b on be (batch 1). It fails with an
// error wrapping ErrNoStateEnergy when the bundle has no state term. Close
// releases the session; the caller keeps owning be.
func NewStateTerm(b *Bundle, be Backend) (*StateTerm, error) {
	m := &b.Manifest
	if m.StateEnergy == nil {
		return nil, fmt.Errorf("engines: bundle %q: %w (train one with `python -m energyflow state-term`)", m.Name, ErrNoStateEnergy)
	}
	spec, err := b.GraphSpec(GraphStateEnergy, 1)
	if err != nil {
		return nil, err
	}
	sess, err := be.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("engines: state term %s: %w", m.StateEnergy.Graph, err)
	}
	in, out, err := sess.Bind(1)
	if err == nil && (len(in) != 1 || len(out) != 1 || len(in[0]) != m.CondDim || len(out[0]) != 1) {
		err = fmt.Errorf("backend returned %d input and %d output buffers, expected cond [1×%d] and state_energy [1]", len(in), len(out), m.CondDim)
	}
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("engines: state term %s: %w", m.StateEnergy.Graph, err)
	}
	return &StateTerm{sess: sess, cond: in[0], out: out[0], condDim: m.CondDim, name: m.Name}, nil
}

// Energy returns state_energy of one conditioning vector (cond_dim values,
// as Conditioner.Build writes them). It allocates nothing.
func (t *StateTerm) Energy(cond []float32) (float32, error) {
	if t.closed {
		return 0, errors.New("engines: state term is closed")
	}
	if len(cond) != t.condDim {
		return 0, fmt.Errorf("engines: state term: cond has %d values, expected cond_dim = %d", len(cond), t.condDim)
	}
	copy(t.cond, cond)
	if err := t.sess.Run(); err != nil {
		return 0, fmt.Errorf("engines: state term of bundle %q: %w", t.name, err)
	}
	return t.out[0], nil
}

// Close closes the session. Idempotent.
func (t *StateTerm) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	return t.sess.Close()
}
