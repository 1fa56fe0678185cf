package safety

import (
	"strings"
	"testing"
)

// Something unseen in view stops the arm once the camera's count reaches
// watchdog.camera_unseen; a count under it, or one during a scene change,
// does not; a reset is refused while the count stays at or over it, and
// passes once it falls; with the check off nothing is watched.
func TestCameraUnseenStop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pixels int // watchdog.camera_unseen
		counts []int
		scene  int // the tick of counts with SceneChange set (-1: none)
		stopAt int // the tick of counts that stops the arm (-1: none)
	}{
		{"under", 6, []int{0, 1, 5, 5, 2}, -1, -1},
		{"at", 6, []int{0, 1, 6}, -1, 2},
		{"over", 6, []int{0, 17, 17}, -1, 1},
		{"scene change", 6, []int{0, 40, 0, 7}, 1, 3},
		{"off", 0, []int{0, 100, 100}, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Watchdog.CameraUnseen = tc.pixels
			r := newRig(t, cfg)
			n := 0
			view := func(in *Inputs) { in.CameraUnseen = n }
			r.tick(view)
			if err := r.resetAt(view); err != nil {
				t.Fatal(err)
			}
			for k, c := range tc.counts {
				n = c
				d := r.tick(func(in *Inputs) { view(in); in.SceneChange = k == tc.scene })
				if d.CameraUnseen != c {
					t.Errorf("tick %d: decision's count %d, want %d", k, d.CameraUnseen, c)
				}
				if k != tc.stopAt {
					if d.State != Running {
						t.Fatalf("tick %d, %d unseen pixels: %v (%s)", k, c, d.State, d.Reason.Message)
					}
					continue
				}
				if d.Reason.Kind != KindCameraUnseen || !d.Halted {
					t.Fatalf("tick %d, %d unseen pixels: %v by %v, want stopped by camera_unseen", k, c, d.State, d.Reason.Kind)
				}
				m := d.Reason.Message
				for _, w := range []string{"something unseen in view", "watchdog.camera_unseen 6", "take it out of view"} {
					if !strings.Contains(m, w) {
						t.Errorf("message %q lacks %q", m, w)
					}
				}
				r.tick(view)
				if err := r.resetAt(view); err == nil || !strings.Contains(err.Error(), "unseen") {
					t.Fatalf("reset with %d unseen pixels still in view: %v", c, err)
				}
				n = 1
				r.tick(view)
				if err := r.resetAt(view); err != nil {
					t.Fatalf("reset once it left the view: %v", err)
				}
				break
			}
			r.arm.checkViolations(t)
		})
	}
}
