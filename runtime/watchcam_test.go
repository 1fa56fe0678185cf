package runtime

import (
	"context"
	"fmt"
	stdpng "image/png"
	"io"
	"log/slog"
	"os"
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
	on := true
	c.CameraWatch.Enabled = &on
	c.CameraWatch.Name = "side"
	c.CameraWatch.Source = camera.KindReplay
	c.CameraWatch.Replay.Dir = filepath.Join("..", "camera", "testdata", "frames")
	c.CameraWatch.Replay.Rate = 15
	c.CameraWatch.Replay.Loop = loop
}

// quietAfter is how long the "goes quiet" watch recording lasts, at
// quietRate frames a second: long enough for the stack to arm first on a
// slow host.
const (
	quietAfter = 40 * time.Second
	quietRate  = 5
)

// repeatedFrames writes the test frames over and over into a temporary
// directory, enough for d at rate frames a second, and returns it.
func repeatedFrames(t *testing.T, d time.Duration, rate float64) string {
	t.Helper()
	src := filepath.Join("..", "camera", "testdata", "frames")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	dir := t.TempDir()
	n := int(d.Seconds() * rate)
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%05d.jpg", i)), frames[i%len(frames)], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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
			start := time.Now()
			s := startStack(t, 5, func(c *Config) {
				c.Policy.Bundle = b
				c.Safety.Watchdog.CameraUnseen = 4
				watchReplay(c, tc.loop)
				if !tc.loop {
					c.CameraWatch.Replay.Dir = repeatedFrames(t, quietAfter, quietRate)
					c.CameraWatch.Replay.Rate = quietRate
				}
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
				// quietAfter of frames, then nothing: running, then stopped
				// once the newest watch frame is older than camera_max_age.
				// The recording must outlast the stack's start: a host that
				// has not armed by its end (qemu on a loaded machine) cannot
				// show the stop after arming, and says so.
				if !s.waitStateUntil(StateRunning, start.Add(quietAfter)) {
					st, reason := s.app.Loop().Machine().State()
					t.Skipf("not armed before the %v watch recording ended (state %s: %s): a slow host; "+
						"the stop after arming is not exercised", quietAfter, st, reason)
				}
				s.waitState(t, StateStopped, quietAfter+30*time.Second)
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
	yes, no := true, false
	on := func(c *Config) { c.CameraWatch.Enabled = &yes; c.CameraWatch.Name = "corner" }
	for _, c := range []struct {
		name   string
		spec   *engines.WatchCameraSpec
		edit   func(*Config)
		errHas []string // empty: accepted
	}{
		{"neither", nil, func(c *Config) {}, nil},
		{"bundle's turned off", spec, func(c *Config) { c.CameraWatch.Enabled = &no }, nil},
		{"bundle's not configured", spec, func(c *Config) {}, []string{"camera_watch", "not configured", `"corner" (96×96)`, "enabled: false"}},
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

// scriptedFrames is a double of a camera: it delivers its frames in order,
// each once, then io.EOF.
type scriptedFrames struct{ frames []camera.Frame }

func (s *scriptedFrames) Read(ctx context.Context, f *camera.Frame) error {
	if len(s.frames) == 0 {
		return io.EOF
	}
	*f, s.frames = s.frames[0], s.frames[1:]
	return nil
}
func (s *scriptedFrames) Info() camera.Info              { return camera.Info{} }
func (s *scriptedFrames) Halt(ctx context.Context) error { return nil }
func (s *scriptedFrames) Close() error                   { return nil }

// The watch loop on scripted frames: the unseen count is the smaller of the
// two newest frames; after a scene replaced on purpose, frames captured
// before it are skipped and the count starts afresh; the changed time
// moves only when a frame differs from the one before it.
func TestWatchCamLoop(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "camera", "testdata", "frames", "*.jpg"))
	if err != nil || len(files) < 2 {
		t.Fatalf("test frames: %v (%d)", err, len(files))
	}
	jpg := func(i int) []byte {
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	none, err := camera.NewPalette(16, make([]byte, 512)) // no colour seen: every pixel counts
	if err != nil {
		t.Fatal(err)
	}
	const px = 160 * 120
	t0 := time.Now().Add(-time.Minute)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	frame := func(i, s int) camera.Frame {
		return camera.Frame{Format: camera.FormatMJPEG, Data: jpg(i), Time: at(s)}
	}
	run := func(w *watchCam, frames ...camera.Frame) {
		w.src = &scriptedFrames{frames: frames}
		w.run(context.Background()) // returns at io.EOF
	}
	w := &watchCam{spec: engines.CameraSpec{Name: "side", Width: 160, Height: 120}, palette: none, log: slog.New(slog.DiscardHandler)}
	run(w, frame(0, 1))
	if got := w.Unseen(); got != 0 {
		t.Fatalf("one frame in: unseen %d, want 0 (two frames running)", got)
	}
	run(w, frame(0, 2))
	if got := w.Unseen(); got != px {
		t.Fatalf("two frames in: unseen %d, want %d", got, px)
	}
	if !w.Time().Equal(at(2)) || !w.Changed().Equal(at(1)) {
		t.Fatalf("time %v changed %v, want the second frame's and the first's (the same picture twice)", w.Time(), w.Changed())
	}
	run(w, frame(1, 3))
	if !w.Changed().Equal(at(3)) {
		t.Fatalf("changed %v after another picture, want %v", w.Changed(), at(3))
	}
	// A scene replaced now: the old scene's frames are skipped and read 0;
	// the new scene's first frame counts alone (0), its second both.
	w.SceneReplaced()
	if got := w.Unseen(); got != 0 {
		t.Fatalf("after a scene change: unseen %d, want 0", got)
	}
	run(w, frame(0, 4))
	if got := w.Unseen(); got != 0 || !w.Time().Equal(at(3)) {
		t.Fatalf("a frame of the old scene: unseen %d, time %v; want 0 and the last good frame's", got, w.Time())
	}
	late := time.Now().Add(time.Second)
	run(w, camera.Frame{Format: camera.FormatMJPEG, Data: jpg(0), Time: late})
	if got := w.Unseen(); got != 0 || !w.Time().Equal(late) {
		t.Fatalf("the new scene's first frame: unseen %d, time %v; want 0, %v", got, w.Time(), late)
	}
	run(w, camera.Frame{Format: camera.FormatMJPEG, Data: jpg(0), Time: late.Add(time.Second)})
	if got := w.Unseen(); got != px {
		t.Fatalf("the new scene's second frame: unseen %d, want %d", got, px)
	}
}

// TestWatchCamViewMoved: with camera_moved set, the watch camera's own view
// check reports a knock (the simulator's camera_shift frames of
// camera/testdata/view) while it lasts, not the arm moving through the
// view, and starts afresh on a new scene.
func TestWatchCamViewMoved(t *testing.T) {
	png := func(name string) camera.Frame {
		f, err := os.Open(filepath.Join("..", "camera", "testdata", "view", "drawer-open-"+name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := stdpng.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		var rgb camera.RGB
		camera.FromImage(&rgb, img)
		return camera.Frame{Format: camera.FormatRGB24, Width: rgb.Width, Height: rgb.Height, Stride: rgb.Stride, Data: rgb.Pix}
	}
	ref, arm, knocked := png("ref"), png("arm"), png("knocked")
	view, err := camera.NewViewWatch(camera.ViewWatchConfig{Trigger: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	w := &watchCam{spec: engines.CameraSpec{Name: "side", Width: ref.Width, Height: ref.Height}, view: view, log: slog.New(slog.DiscardHandler)}
	t0 := time.Now()
	tick := 0
	feed := func(frames ...camera.Frame) {
		for i := range frames {
			tick++
			frames[i].Time = t0.Add(time.Duration(tick) * 100 * time.Millisecond)
		}
		w.src = &scriptedFrames{frames: frames}
		w.run(context.Background()) // returns at io.EOF
	}
	for _, step := range []struct {
		name   string
		frames []camera.Frame
		moved  bool
	}{
		{"steady, then the arm moves", []camera.Frame{ref, arm, ref, arm}, false},
		{"knocked", []camera.Frame{knocked}, true},
		{"still knocked", []camera.Frame{knocked}, true},
		{"put back", []camera.Frame{arm}, false},
		{"knocked again", []camera.Frame{knocked}, true},
	} {
		feed(step.frames...)
		if got := w.Moved(); (got > 0) != step.moved {
			t.Fatalf("%s: moved fraction %.2f, want moved %v", step.name, got, step.moved)
		}
	}
	// A new scene: nothing is moved until its frames are in, and its first
	// frame (the knocked view, taken as the new scene) is the reference.
	w.SceneReplaced()
	if got := w.Moved(); got != 0 {
		t.Fatalf("after a scene change: moved %.2f, want 0", got)
	}
	t0 = time.Now().Add(time.Second)
	tick = 0
	feed(knocked, knocked)
	if got := w.Moved(); got != 0 {
		t.Fatalf("the new scene's frames: moved %.2f, want 0", got)
	}
}
