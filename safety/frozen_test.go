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

// A camera whose view moved stops the arm; a reset is refused until the
// view is back, and the check is off while the scene is replaced.
func TestCameraMovedStop(t *testing.T) {
	cfg := testConfig()
	cfg.Watchdog.CameraMoved = 0.5
	r := newRig(t, cfg)
	moved := 0.0
	view := func(in *Inputs) { in.CameraMoved = moved }
	r.tick(view)
	if err := r.resetAt(view); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 5; k++ {
		if d := r.tick(view); d.State != Running {
			t.Fatalf("steady view, tick %d: %v (%s)", k, d.State, d.Reason.Message)
		}
	}
	// A scene change is not judged.
	moved = 0.9
	if d := r.tick(func(in *Inputs) { view(in); in.SceneChange = true }); d.State != Running {
		t.Fatalf("moved during a scene change: %v (%s)", d.State, d.Reason.Message)
	}
	d := r.tick(view)
	if d.Reason.Kind != KindCameraMoved || !d.Halted {
		t.Fatalf("moved view: %v by %v, want stopped by camera_moved", d.State, d.Reason.Kind)
	}
	if m := d.Reason.Message; !strings.Contains(m, "90 %") || !strings.Contains(m, "watchdog.camera_moved 0.5") || !strings.Contains(m, "put it back") {
		t.Errorf("message %q", m)
	}
	r.tick(view)
	if err := r.resetAt(view); err == nil || !strings.Contains(err.Error(), "camera") {
		t.Fatalf("reset with the view still moved: %v", err)
	}
	moved = 0
	r.tick(view)
	if err := r.resetAt(view); err != nil {
		t.Fatalf("reset with the view back: %v", err)
	}
	r.arm.checkViolations(t)
}

// With watchdog.camera_moved 0 the view is not watched.
func TestCameraMovedOff(t *testing.T) {
	r := newRig(t, testConfig())
	view := func(in *Inputs) { in.CameraMoved = 1 }
	r.tick(view)
	if err := r.resetAt(view); err != nil {
		t.Fatal(err)
	}
	if d := r.tick(view); d.State != Running {
		t.Fatalf("camera_moved off: %v (%s)", d.State, d.Reason.Message)
	}
}
