package runtime

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
)

// watchBundle copies the vision test bundle with a watch camera named
// "side" of w×h whose palette cells all hold mark: 0xff, every colour
// seen; 0, none.
func watchBundle(t *testing.T, mark byte, w, h int) string {
	t.Helper()
	return editedVisionBundle(t, func(m map[string]any) {
		m["watch_camera"] = map[string]any{
			"camera":  map[string]any{"name": "side", "width": w, "height": h},
			"palette": markedPalette(mark),
		}
	})
}

// watchReplay points camera_watch at the test frames (160×120) as camera
// "side", looping or not.
func watchReplay(c *Config, loop bool) {
	c.CameraWatch.Enabled = true
	c.CameraWatch.Name = "side"
	c.CameraWatch.Source = camera.KindReplay
	c.CameraWatch.Replay.Dir = filepath.Join("..", "camera", "testdata", "frames")
	c.CameraWatch.Replay.Rate = 15
	c.CameraWatch.Replay.Loop = loop
}

// The watch camera end to end, on the image bundle (whose own input has no
// palette) against the simulated arm, both cameras replaying frames: with
// a watch palette that has seen every colour the policy drives on; with
// one that has seen none, the gate refuses to arm, naming the cause; a
// watch camera of another frame size, or one that stops delivering, stops
// the arm on the camera watchdog.
func TestWatchCameraEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 20 s)")
	}
	for _, tc := range []struct {
		name  string
		mark  byte
		w, h  int
		loop  bool
		want  string // "": keeps running; else the stop reason or refusal that must come
		armed bool   // whether the stop comes after the gate armed
	}{
		{"every colour seen", 0xff, 160, 120, true, "", true},
		{"no colour seen", 0, 160, 120, true, "something unseen in view", false},
		{"another frame size", 0xff, 96, 96, true, "camera_stale", false},
		{"goes quiet", 0xff, 160, 120, false, "camera_stale", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := watchBundle(t, tc.mark, tc.w, tc.h)
			s := startStack(t, 5, func(c *Config) {
				c.Policy.Bundle = b
				c.Safety.Watchdog.CameraUnseen = 4
				watchReplay(c, tc.loop)
			})
			if !s.app.WatchesUnseen() {
				t.Fatal("WatchesUnseen false with a watch palette")
			}
			switch {
			case tc.want == "":
				s.waitState(t, StateRunning, 60*time.Second)
				time.Sleep(2 * time.Second)
				if st, reason := s.app.Loop().Machine().State(); st != StateRunning {
					t.Fatalf("state %s (%s), want RUNNING", st, reason)
				}
			case tc.armed:
				// three test frames, then nothing: running, then stopped
				// once the newest watch frame is older than camera_max_age
				s.waitState(t, StateRunning, 60*time.Second)
				s.waitState(t, StateStopped, 30*time.Second)
				if _, reason := s.app.Loop().Machine().State(); !strings.Contains(reason, tc.want) {
					t.Fatalf("stopped for %q, want %s", reason, tc.want)
				}
			default:
				// the gate never arms, and a reset is refused naming the cause
				s.waitState(t, StateReady, 60*time.Second)
				var err error
				for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
					if err = s.app.Loop().Arm(context.Background(), "test"); err != nil && strings.Contains(err.Error(), tc.want) {
						break
					}
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("reset: %v, want it refused for %s", err, tc.want)
				}
				if st, reason := s.app.Loop().Machine().State(); st == StateRunning {
					t.Fatalf("state %s (%s), want not running", st, reason)
				}
			}
		})
	}
}

// TestWatchCameraMustMatchTheBundle checks camera_watch against the
// bundle's watch camera: refusals name the key, what was expected and what
// came; a bundle's watch camera left off is taken (with a warning).
func TestWatchCameraMustMatchTheBundle(t *testing.T) {
	spec := &engines.WatchCameraSpec{Camera: engines.CameraSpec{Name: "corner", Width: 96, Height: 96}}
	on := func(c *Config) { c.CameraWatch.Enabled = true; c.CameraWatch.Name = "corner" }
	for _, c := range []struct {
		name   string
		spec   *engines.WatchCameraSpec
		edit   func(*Config)
		errHas []string // empty: accepted
	}{
		{"neither", nil, func(c *Config) {}, nil},
		{"bundle's left off", spec, func(c *Config) {}, nil},
		{"same camera", spec, on, nil},
		{"http source, size checked on frames", spec, func(c *Config) { on(c); c.CameraWatch.Source = camera.KindHTTP; c.CameraWatch.Width = 640 }, nil},
		{"bundle has none", nil, on, []string{"camera_watch.enabled", "no watch camera", "energyflow.palette --watch"}},
		{"not named", spec, func(c *Config) { on(c); c.CameraWatch.Name = "" }, []string{"camera_watch.name", "empty", `"corner"`, "96×96"}},
		{"another camera", spec, func(c *Config) { on(c); c.CameraWatch.Name = "corner4" }, []string{"camera_watch.name", `"corner4"`, `"corner"`}},
		{"another capture size", spec, func(c *Config) {
			on(c)
			c.CameraWatch.Source = camera.KindV4L2
			c.CameraWatch.Width, c.CameraWatch.Height = 640, 480
		}, []string{"camera_watch.width", "640×480", "96×96"}},
		{"no watchdog", spec, func(c *Config) { on(c); c.Safety.Watchdog.CameraMaxAge = 0 }, []string{"safety.watchdog.camera_max_age"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CameraWatch.Width, cfg.CameraWatch.Height = 0, 0
			c.edit(&cfg)
			b := &engines.Bundle{Dir: "bundles/cam", Manifest: engines.Manifest{Name: "cam", WatchCamera: c.spec}}
			err := checkWatchCamera(&cfg, b, slog.New(slog.DiscardHandler))
			if len(c.errHas) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want a refusal")
			}
			for _, s := range c.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %v, want it to name %s", err, s)
				}
			}
		})
	}
}
