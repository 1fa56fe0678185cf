package safety

import (
	"strings"
	"testing"
	"time"
)

// A camera that repeats one frame while the arm moves stops the arm; the
// stop holds until a frame changes again.
func TestCameraFrozenStop(t *testing.T) {
	cfg := testConfig()
	cfg.Watchdog.CameraFrozenMotion = 0.01
	cfg.Watchdog.CameraFrozenWait = 250 * time.Millisecond
	r := newRig(t, cfg)
	changed := t0
	live := func(in *Inputs) { changed = in.Now.Add(-10 * time.Millisecond); in.CameraChanged = changed }
	frozen := func(in *Inputs) { in.CameraChanged = changed }
	r.tick(live)
	if err := r.resetAt(live); err != nil {
		t.Fatal(err)
	}
	// Frames change while the arm moves 5 mm a tick: running.
	for k := 0; k < 10; k++ {
		r.st.Position[0] += 0.005
		if d := r.tick(live); d.State != Running {
			t.Fatalf("live camera, tick %d: %v (%s)", k, d.State, d.Reason.Message)
		}
	}
	// The stream freezes: for the wait (250 ms, 2 ticks) the anchor follows
	// the arm; then 1 cm more of motion trips.
	var d Decision
	k := 0
	for ; k < 20; k++ {
		r.st.Position[0] += 0.005
		if d = r.tick(frozen); d.State != Running {
			break
		}
	}
	if d.Reason.Kind != KindCameraFrozen || !d.Halted {
		t.Fatalf("frozen stream: %v by %v after %d ticks, want stopped by camera_frozen", d.State, d.Reason.Kind, k+1)
	}
	if k+1 > 6 {
		t.Errorf("stopped %d ticks (%v) after the stream froze, want within 6", k+1, time.Duration(k+1)*period)
	}
	if m := d.Reason.Message; !strings.Contains(m, "watchdog.camera_frozen_motion 0.01") || !strings.Contains(m, "no frame has changed for") {
		t.Errorf("message %q", m)
	}
	// The arm stands, the stream is still frozen: refused.
	r.tick(frozen)
	if err := r.resetAt(frozen); err == nil || !strings.Contains(err.Error(), "camera") {
		t.Fatalf("reset with the stream frozen: %v", err)
	}
	// A frame changes: the reset passes.
	r.tick(live)
	if err := r.resetAt(live); err != nil {
		t.Fatalf("reset with the stream back: %v", err)
	}
	r.arm.checkViolations(t)
}

// What must not trip: a still arm before a frozen-looking (static) scene,
// a scene change that moves the hand before its frame arrives, and the
// check when it is off.
func TestCameraFrozenQuiet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		motion float64
		step   func(k int, r *rig, in *Inputs)
	}{
		{"still arm, identical frames", 0.01, func(int, *rig, *Inputs) {}},
		{"scene change", 0.01, func(k int, r *rig, in *Inputs) {
			if k == 20 {
				r.st.Position[1] += 0.3
				in.SceneChange = true
			}
		}},
		{"off", 0, func(k int, r *rig, _ *Inputs) { r.st.Position[0] += 0.01 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Watchdog.CameraFrozenMotion = tc.motion
			r := newRig(t, cfg)
			r.armGate()
			for k := 0; k < 30; k++ {
				d := r.tick(func(in *Inputs) { in.CameraChanged = t0.Add(time.Millisecond); tc.step(k, r, in) })
				if d.State != Running {
					t.Fatalf("tick %d: %v (%s)", k, d.State, d.Reason.Message)
				}
			}
		})
	}
}
