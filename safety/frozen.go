package safety

import (
	"math"
	"time"

	"github.com/energyflow/edge/actuators"
)

// frozenCamera is the frozen-camera check (WatchdogConfig.CameraFrozenMotion).
// A camera that keeps sending the same frame with fresh timestamps passes
// the camera_max_age watchdog; what gives it away is that the arm moves in
// front of it and its pixels do not change.
//
// While frames keep changing (the newest change is no older than wait,
// the time a motion may take to show in a frame that reached us), the
// anchor follows the arm. Once none has changed for longer, the anchor
// stays where the arm was then, and the arm moving more than motion from it
// is the fault, present until a frame changes again. A scene change (the
// simulator's reset moving the hand) re-anchors and restarts the wait. Not
// safe for concurrent use; the Guard calls it with mu held.
type frozenCamera struct {
	motion float64 // 0: off
	wait   time.Duration
	axes   int

	anchor  []float64
	have    bool      // anchor holds a position
	changed time.Time // newest frame change seen
	grace   time.Time // the anchor follows the arm until this instant
}

func newFrozenCamera(w WatchdogConfig, axes int) *frozenCamera {
	return &frozenCamera{motion: w.CameraFrozenMotion, wait: w.CameraFrozenWait, axes: axes, anchor: make([]float64, axes)}
}

// observe updates the check with this tick's inputs and returns the arm's
// distance from the anchor and how long the frames have been unchanged when
// that distance exceeds motion (ok false), else ok true.
func (c *frozenCamera) observe(arm *actuators.State, changed, now time.Time, sceneChange bool) (dist float64, still time.Duration, ok bool) {
	if c.motion <= 0 || changed.IsZero() || arm == nil || len(arm.Position) < c.axes {
		return 0, 0, true
	}
	if changed.After(c.changed) {
		c.changed = changed
		c.grace = changed.Add(c.wait)
	}
	if sceneChange {
		c.grace = now.Add(c.wait)
	}
	p := arm.Position[:c.axes]
	if !c.have || !now.After(c.grace) {
		copy(c.anchor, p)
		c.have = true
		return 0, 0, true
	}
	var s float64
	for i, v := range p {
		d := v - c.anchor[i]
		s += d * d
	}
	dist = math.Sqrt(s)
	if dist > c.motion {
		return dist, now.Sub(c.changed), false
	}
	return dist, 0, true
}
