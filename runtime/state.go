package runtime

import (
	"fmt"
	"sync"
	"time"
)

// State is the operating state of the runtime.
type State int

// The runtime's states. Transitions: INIT → READY when the arm is connected,
// engines are loaded and the camera streams; READY → RUNNING on start;
// RUNNING → STOPPED on any safety trip or operator stop; STOPPED → READY on
// an accepted reset; STOPPED (or READY: a start refused out of
// distribution) → RECOVERING when the operator starts the safety gate's
// recovery, RECOVERING → RUNNING when it re-arms by itself and → STOPPED
// when it times out, is stopped or trips; any → SHUTDOWN when the process
// exits.
const (
	StateInit State = iota
	StateReady
	StateRunning
	StateStopped
	StateShutdown
	StateRecovering
)

func (s State) String() string {
	switch s {
	case StateInit:
		return "INIT"
	case StateReady:
		return "READY"
	case StateRunning:
		return "RUNNING"
	case StateStopped:
		return "STOPPED"
	case StateShutdown:
		return "SHUTDOWN"
	case StateRecovering:
		return "RECOVERING"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Transition records one state change.
type Transition struct {
	From, To State
	Reason   string
	Time     time.Time
}

// Machine holds the state and validates transitions. Safe for concurrent use.
type Machine struct {
	mu       sync.Mutex
	state    State
	reason   string
	onChange func(Transition)
	now      func() time.Time
}

// NewMachine starts in INIT. onChange (may be nil) is called, outside the
// lock, for every accepted transition.
func NewMachine(now func() time.Time, onChange func(Transition)) *Machine {
	return &Machine{state: StateInit, onChange: onChange, now: now}
}

// State returns the current state and the reason of the last transition.
func (m *Machine) State() (State, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.reason
}

// canMove reports whether the state machine allows from → to.
func canMove(from, to State) bool {
	switch from {
	case StateInit:
		return to == StateReady || to == StateStopped || to == StateShutdown
	case StateReady:
		return to == StateRunning || to == StateStopped || to == StateShutdown || to == StateRecovering
	case StateRunning:
		return to == StateStopped || to == StateShutdown
	case StateStopped:
		return to == StateReady || to == StateShutdown || to == StateRecovering
	case StateRecovering:
		return to == StateRunning || to == StateStopped || to == StateShutdown
	}
	return false
}

// To moves to state to, or returns an error if the transition is not allowed.
// Moving to the current state is a no-op (no callback).
func (m *Machine) To(to State, reason string) error {
	m.mu.Lock()
	from := m.state
	if from == to {
		m.mu.Unlock()
		return nil
	}
	if !canMove(from, to) {
		m.mu.Unlock()
		return fmt.Errorf("runtime: cannot go from %s to %s", from, to)
	}
	m.state, m.reason = to, reason
	cb := m.onChange
	m.mu.Unlock()
	if cb != nil {
		cb(Transition{From: from, To: to, Reason: reason, Time: m.now()})
	}
	return nil
}
