package runtime

import (
	"fmt"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/engines"
)

// stateObs assembles the policy's observation history: the state vector
// from each arm-state sample, as robot.state lists the fields, for the T_o
// most recent samples, and, for a bundle with image inputs, the vision
// features of the camera frame each sample could have seen (ImageSource).
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
	pad     bool      // the next push fills every slot (after clear)
	since   time.Time // frames captured before it show an earlier scene (clear)

	images ImageSource // nil: the bundle has no image input
	imgIdx []int       // indices of the image entries in the manifest's obs list
	imgBuf [][][]float32
}

// newStateObs checks that the bundle's observations can be built from the
// arm and prepares the history buffers.
func newStateObs(m *engines.Manifest, fields []string, probe *actuators.State, images ImageSource) (*stateObs, error) {
	so := &stateObs{fields: fields, obsIdx: -1, nObs: len(m.Obs), horizon: m.ObsHorizon, images: images}
	var imgWidth []int
	for i, o := range m.Obs {
		switch o.Kind {
		case "state":
			if so.obsIdx >= 0 {
				return nil, fmt.Errorf("runtime: bundle has more than one state observation (%s, %s); the runtime fills one from robot.state", m.Obs[so.obsIdx].Name, o.Name)
			}
			so.obsIdx = i
			so.width = o.Width()
		case "image":
			if images == nil {
				return nil, fmt.Errorf("runtime: bundle observation %q is a camera image, but the runtime has no camera pipeline for it — enable the camera (camera.enabled: true)", o.Name)
			}
			so.imgIdx = append(so.imgIdx, i)
			imgWidth = append(imgWidth, o.Features)
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
	so.imgBuf = make([][][]float32, so.horizon)
	for i := range so.imgBuf {
		so.imgBuf[i] = make([][]float32, len(so.imgIdx))
		for k, w := range imgWidth {
			so.imgBuf[i][k] = make([]float32, w)
		}
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
// is read without building a slice). After clear, a bundle with image
// inputs starts its history only once every camera has a frame of the new
// scene (captured at or after clear's since, at or before s.Time): until
// then push drops s, so no observation pairs the new scene's arm state
// with the old scene's image.
func (so *stateObs) push(s *actuators.State) {
	if so.pad && !so.since.IsZero() && !so.sceneVisible(s.Time) {
		return
	}
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
	if so.pad {
		so.pad = false
		for ; so.n < so.horizon; so.n++ {
			copy(so.ring[so.n], slot)
			so.times[so.n] = s.Time
		}
	}
}

// clear forgets every observation: the next push fills the whole history
// with its observation (an episode's start, as the demonstrations' windows
// and the state term's training pad it), so a new episode's scene shares
// nothing with the last and the history is ready at once. since is when
// the scene was replaced: camera frames captured before it are not used
// again (the camera's newest frame may still show the old scene when the
// arm is first read in the new one).
func (so *stateObs) clear(since time.Time) { so.n, so.pad, so.since = 0, true, since }

// sceneVisible reports whether every image input has a usable frame
// captured between since and t.
func (so *stateObs) sceneVisible(t time.Time) bool {
	for k, obs := range so.imgIdx {
		if so.images.Features(obs, t, so.since, so.imgBuf[0][k]) != nil {
			return false
		}
	}
	return true
}

// ready reports whether T_o observations have been pushed.
func (so *stateObs) ready() bool { return so.n >= so.horizon }

// history returns the T_o most recent observations, oldest first, in the
// shape the Conditioner wants, with each sample's image features taken
// from the frame captured at or before it. The frames alias the ring and
// the feature buffers. It fails when a sample has no usable frame yet.
func (so *stateObs) history() ([]engines.ObsFrame, error) {
	for i := 0; i < so.horizon; i++ {
		idx := (so.n - so.horizon + i) % so.horizon
		if idx < 0 {
			idx += so.horizon
		}
		so.frames[i][so.obsIdx] = so.ring[idx]
		for k, obs := range so.imgIdx {
			buf := so.imgBuf[i][k]
			if err := so.images.Features(obs, so.times[idx], so.since, buf); err != nil {
				return nil, err
			}
			so.frames[i][obs] = buf
		}
	}
	return so.frames, nil
}

// hasImages reports whether the bundle takes camera images.
func (so *stateObs) hasImages() bool { return len(so.imgIdx) > 0 }

// newestVector returns the newest observation vector.
func (so *stateObs) newestVector() []float32 {
	if so.n == 0 {
		return nil
	}
	return so.ring[(so.n-1)%so.horizon]
}
