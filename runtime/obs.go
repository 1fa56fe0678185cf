package runtime

import (
	"fmt"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/engines"
)

// stateObs assembles the policy's state observation from an arm state, as
// robot.state lists the fields, and keeps the T_o most recent ones.
type stateObs struct {
	fields  []string
	width   int
	obsIdx  int // index of the state entry in the manifest's obs list
	nObs    int // number of manifest obs entries
	ring    [][]float32
	times   []time.Time
	n       int // number of pushes so far
	frames  []engines.ObsFrame
	newest  time.Time
	horizon int
}

// newStateObs checks that the bundle's observations can be built from the
// arm and prepares the history buffers.
func newStateObs(m *engines.Manifest, fields []string, probe *actuators.State) (*stateObs, error) {
	so := &stateObs{fields: fields, obsIdx: -1, nObs: len(m.Obs), horizon: m.ObsHorizon}
	for i, o := range m.Obs {
		switch o.Kind {
		case "state":
			if so.obsIdx >= 0 {
				return nil, fmt.Errorf("runtime: bundle has more than one state observation (%s, %s); the runtime fills one from robot.state", m.Obs[so.obsIdx].Name, o.Name)
			}
			so.obsIdx = i
			so.width = o.Width()
		case "image":
			return nil, fmt.Errorf("runtime: bundle observation %q is an image: image policies are not wired into the control loop yet (state-only bundles run)", o.Name)
		default:
			return nil, fmt.Errorf("runtime: bundle observation %q has unknown kind %q", o.Name, o.Kind)
		}
	}
	if so.obsIdx < 0 {
		return nil, fmt.Errorf("runtime: bundle has no state observation")
	}
	got := 0
	for _, f := range fields {
		got += len(fieldOf(probe, f))
	}
	if got != so.width {
		return nil, fmt.Errorf("runtime: robot.state %v gives %d values from the arm, but the bundle's %q observation has %d — fix robot.state or the register map", fields, got, m.Obs[so.obsIdx].Name, so.width)
	}
	so.ring = make([][]float32, so.horizon)
	so.times = make([]time.Time, so.horizon)
	so.frames = make([]engines.ObsFrame, so.horizon)
	for i := range so.ring {
		so.ring[i] = make([]float32, so.width)
		so.frames[i] = make(engines.ObsFrame, so.nObs)
	}
	return so, nil
}

// fieldOf returns the arm-state values of one robot.state field.
func fieldOf(s *actuators.State, f string) []float64 {
	switch f {
	case "observation":
		return s.Observation
	case "position":
		return s.Position
	case "velocity":
		return s.Velocity
	case "gripper":
		return []float64{s.Gripper}
	}
	return nil
}

// push appends the observation of s. Allocation-free (the gripper field
// is read without building a slice).
func (so *stateObs) push(s *actuators.State) {
	slot := so.ring[so.n%so.horizon]
	k := 0
	for _, f := range so.fields {
		if f == "gripper" {
			slot[k] = float32(s.Gripper)
			k++
			continue
		}
		for _, v := range fieldOf(s, f) {
			slot[k] = float32(v)
			k++
		}
	}
	so.times[so.n%so.horizon] = s.Time
	so.newest = s.Time
	so.n++
}

// ready reports whether T_o observations have been pushed.
func (so *stateObs) ready() bool { return so.n >= so.horizon }

// history returns the T_o most recent observations, oldest first, in the
// shape the Conditioner wants. The frames alias the ring.
func (so *stateObs) history() []engines.ObsFrame {
	for i := 0; i < so.horizon; i++ {
		idx := (so.n - so.horizon + i) % so.horizon
		if idx < 0 {
			idx += so.horizon
		}
		so.frames[i][so.obsIdx] = so.ring[idx]
	}
	return so.frames
}

// newestVector returns the newest observation vector.
func (so *stateObs) newestVector() []float32 {
	if so.n == 0 {
		return nil
	}
	return so.ring[(so.n-1)%so.horizon]
}
