package eval

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/safety"
)

// The tracking stop end to end, through the real runtime against the Go
// simulated arm (no bridge): once the gate has armed and the policy has
// driven the arm for a second, the arm's position sensor reads 3 or 8 cm
// off on joint 0 from one tick on (simarm.SetPositionOffset, the physics
// unchanged) and the episode ends in a safety stop of kind tracking within
// 0.5 s of the jump; a sensor that drifts slowly (0.5 mm every 20 ms, 7.5
// cm in all, under 3 mm in any 100 ms window) and a clean run end without
// one. The monitor runs on its defaults (100 ms window, 2 cm tolerance),
// per second with scale 1: the simulator integrates rad/s into rad at
// once.
//
// The arm is held to 0.2 rad/s (the fixture's limit is 1.5): at 10 Hz a
// 100 ms window holds one comparison that sees the jump, and what the
// monitor allows for the timing of its reads grows with the arm's speed
// times the time a read takes. At 1.5 rad/s a read stalled 4 ms on a
// loaded host (go test -race beside other packages) allows 6 mm, two of
// them more than the centimetre a 3 cm jump has over the 2 cm tolerance:
// a clean-clone CI run missed the 3 cm jump that way; at 0.5 rad/s a
// loaded run here missed it once more. At 0.2 rad/s a stall of 50 ms
// allows 1 cm. The jump comes once the monitor has compared 10 running
// ticks, not after a fixed second, which a loaded host's late ticks
// could leave short of 10.
func TestTrackingStopEndToEnd(t *testing.T) {
	root, m := simarmMap(t)
	const maxDelay = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		jump  float64 // a jump of the reading on joint 0 (0: none)
		drift bool    // the reading drifts instead
		want  safety.Kind
	}{
		{"3 cm jump", 0.03, false, safety.KindTracking},
		{"8 cm jump", 0.08, false, safety.KindTracking},
		{"slow drift", 0, true, safety.KindNone},
		{"clean", 0, false, safety.KindNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arm, cfg := startSimarm(t, root, m)
			cfg.Safety.Tracking.Enabled = true
			for i := range cfg.Safety.Limits.MaxVelocity {
				cfg.Safety.Limits.MaxVelocity[i] = 0.2
			}
			w := &fakeWorld{}
			var mu sync.Mutex
			var injected time.Time
			var scores *onRunning
			scenario := func() {
				// The policy drives the arm a while: until the monitor has
				// compared 10 running ticks (about a second; longer on a
				// loaded host, whose ticks come later), at most 10 s.
				for end := time.Now().Add(10 * time.Second); trackedTicks(scores) < 10 && time.Now().Before(end); {
					time.Sleep(20 * time.Millisecond)
				}
				switch {
				case tc.jump != 0:
					mu.Lock()
					injected = time.Now()
					mu.Unlock()
					arm.SetPositionOffset([]float64{tc.jump})
				case tc.drift:
					for k := 1; k <= 150; k++ {
						arm.SetPositionOffset([]float64{0.0005 * float64(k)})
						time.Sleep(20 * time.Millisecond)
					}
				default:
					time.Sleep(3 * time.Second)
				}
				time.Sleep(time.Second) // time to stop (a jump), or not
				w.done.Store(true)
			}
			scores = &onRunning{f: func() { go scenario() }}
			r, log := driveSimarm(t, cfg, w, scores)
			st := r.Stop()
			if st.Kind != tc.want {
				t.Fatalf("ended %s, stop %v (%s); want %v\nlog:\n%s", r.End, st.Kind, st.Message, tc.want, log.String())
			}
			if r.TrackingMax == nil {
				t.Fatal("no tracking difference in the result")
			}
			t.Logf("ended %s; largest tracking difference while running %.3g rad", r.End, *r.TrackingMax)
			// Every running tick's line carries the tracking difference.
			n := 0
			for _, l := range bytes.Split(bytes.TrimSpace(scores.buf.Bytes()), []byte("\n")) {
				var line struct {
					State    string   `json:"state"`
					Tracking *float64 `json:"tracking"`
				}
				if err := json.Unmarshal(l, &line); err != nil {
					t.Fatalf("line %s: %v", l, err)
				}
				if line.State == "RUNNING" && line.Tracking != nil {
					n++
				}
			}
			if n < 10 {
				t.Errorf("%d running ticks with a tracking difference, want at least 10", n)
			}
			if tc.want == safety.KindNone {
				if r.End != "truncated" || r.StopKind != "" {
					t.Errorf("ended %s, stop %q", r.End, r.StopKind)
				}
				if *r.TrackingMax > cfg.Safety.Tracking.Tolerance/2 {
					t.Errorf("largest tracking difference %v, more than half the tolerance", *r.TrackingMax)
				}
				return
			}
			mu.Lock()
			delay := st.Time.Sub(injected)
			mu.Unlock()
			t.Logf("the jump of %g at %v, stopped at tick %d %v later: %s", tc.jump, injected.Format("15:04:05.000"), st.Tick, delay, st.Message)
			if r.End != "safety_stop" || r.StopKind != "tracking" || delay > maxDelay {
				t.Errorf("ended %s by %q %v after the jump; want a tracking stop within %v", r.End, r.StopKind, delay, maxDelay)
			}
		})
	}
}

// trackedTicks counts the running ticks of w's score lines so far that
// carry a tracking difference.
func trackedTicks(w *onRunning) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range bytes.Split(w.buf.Bytes(), []byte("\n")) {
		if bytes.Contains(l, []byte(`"state":"RUNNING"`)) && bytes.Contains(l, []byte(`"tracking":`)) && !bytes.Contains(l, []byte(`"tracking":null`)) {
			n++
		}
	}
	return n
}
