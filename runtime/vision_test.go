package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// visionBundle is a random-init EnergyFlow bundle for the simulated arm with
// one camera input (32×32 crop, ResNet-18 of width 4 → 32 features),
// written by runtime/testdata/make-bundle.sh.
func visionBundle(t testing.TB) string {
	p := filepath.Join(repoRoot(t), "runtime", "testdata", "simarm-vision-bundle")
	if _, err := os.Stat(filepath.Join(p, "manifest.json")); err != nil {
		t.Fatalf("vision test bundle missing: %v (regenerate with runtime/testdata/make-bundle.sh)", err)
	}
	return p
}

// openVisionPipeline opens the vision test bundle's camera input (obs[1])
// on ONNX Runtime; the test's cleanup closes it.
func openVisionPipeline(t *testing.T, minGap, maxAge time.Duration) *visionPipeline {
	t.Helper()
	b, err := engines.LoadBundle(visionBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	be, err := engines.NewORT(engines.ORTOptions{LibraryPath: DefaultConfig().Policy.ONNXRuntimeLib, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	const camIdx = 1 // obs[1] is the camera
	v, err := newVisionPipeline(b, be, camIdx, minGap, maxAge, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// replayRGB decodes the camera test frames (160×120 JPEGs, all different).
func replayRGB(t *testing.T) []camera.RGB {
	t.Helper()
	cfg := camera.DefaultConfig()
	cfg.Source = "replay"
	cfg.Replay.Dir = filepath.Join(repoRoot(t), "camera", "testdata", "frames")
	r, err := camera.OpenReplay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []camera.RGB
	var dec camera.JPEGDecoder
	for i := 0; i < 3; i++ {
		var f camera.Frame
		if err := r.Read(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
		var rgb camera.RGB
		if err := camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited); err != nil {
			t.Fatal(err)
		}
		out = append(out, rgb)
	}
	return out
}

// TestVisionPipeline runs real frames through the bundle's vision graph on
// ONNX Runtime and checks which frame's features each observation time gets.
func TestVisionPipeline(t *testing.T) {
	const camIdx = 1 // obs[1] is the camera
	v := openVisionPipeline(t, 25*time.Millisecond, 200*time.Millisecond)
	vs := visionSet{v}

	frames := replayRGB(t)
	t0 := time.Unix(1000, 0)
	times := []time.Time{t0, t0.Add(50 * time.Millisecond), t0.Add(100 * time.Millisecond)}
	want := make([][]float32, len(frames)) // each frame's features, encoded alone
	for i := range frames {
		ok, err := v.Encode(&frames[i], times[i], uint64(i+1))
		if err != nil || !ok {
			t.Fatalf("encode frame %d: %v %v", i, ok, err)
		}
		want[i] = slices.Clone(v.feats)
	}
	if slices.Equal(want[0], want[1]) || slices.Equal(want[1], want[2]) {
		t.Fatal("different frames gave identical features")
	}
	// A frame closer than minGap to the last encoded one is skipped.
	if ok, err := v.Encode(&frames[0], times[2].Add(10*time.Millisecond), 4); ok || err != nil {
		t.Fatalf("frame 10 ms after the last was encoded (%v, %v), want skipped", ok, err)
	}

	got := make([]float32, 32)
	for _, c := range []struct {
		name  string
		at    time.Time
		frame int    // expected frame, -1: error
		err   string // substring of the error
	}{
		{"exactly at a frame", times[1], 1, ""},
		{"between frames: the older one", times[1].Add(30 * time.Millisecond), 1, ""},
		{"after the newest", times[2].Add(150 * time.Millisecond), 2, ""},
		{"before every frame", t0.Add(-time.Millisecond), -1, "no camera frame captured at or before"},
		{"newest too old", times[2].Add(201 * time.Millisecond), -1, "within 200ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := vs.Features(camIdx, c.at, time.Time{}, got)
			if c.frame < 0 {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, errNoImage) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[c.frame]) {
				t.Fatalf("features are not those of frame %d", c.frame)
			}
		})
	}
	if err := vs.Features(0, t0, time.Time{}, got); err == nil {
		t.Fatal("features of the state input: want an error")
	}
	v.Reset()
	if err := vs.Features(camIdx, times[2], time.Time{}, got); !errors.Is(err, errNoImage) {
		t.Fatalf("after Reset: err = %v, want no frame", err)
	}
}

// fakeImages is an ImageSource whose features encode the observation time
// they were asked for (milliseconds), to check the pairing.
type fakeImages struct{ width int }

func (f fakeImages) Features(obs int, at, since time.Time, dst []float32) error {
	if len(dst) != f.width {
		return errors.New("wrong width")
	}
	for i := range dst {
		dst[i] = float32(at.UnixMilli() % 100000)
	}
	return nil
}

// TestObsHistoryPairsImagesWithStates checks that every history step gets
// the features for its own arm-state sample's time, oldest first.
func TestObsHistoryPairsImagesWithStates(t *testing.T) {
	b, err := engines.LoadBundle(visionBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	m := &b.Manifest
	fields := []string{"position", "velocity", "gripper"}
	probe := &actuators.State{Position: make([]float64, 7), Velocity: make([]float64, 7)}
	if _, err := newStateObs(m, fields, probe, nil); err == nil || !strings.Contains(err.Error(), "camera.enabled") {
		t.Fatalf("image bundle without an image source: err = %v", err)
	}
	so, err := newStateObs(m, fields, probe, fakeImages{width: 32})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(5000)
	for i := 0; i < 3; i++ {
		s := *probe
		s.Time = t0.Add(time.Duration(i) * 50 * time.Millisecond)
		s.Gripper = float64(i)
		so.push(&s)
	}
	h, err := so.history()
	if err != nil {
		t.Fatal(err)
	}
	for step, wantMs := range []float32{5050, 5100} { // T_o = 2: samples 1 and 2
		if g := h[step][0][14]; g != float32(step+1) {
			t.Fatalf("step %d: state gripper %v, want %d", step, g, step+1)
		}
		if f := h[step][1]; len(f) != 32 || f[0] != wantMs {
			t.Fatalf("step %d: features %v, want the frame for t = %v ms", step, f[:1], wantMs)
		}
	}
	cond, err := engines.NewConditioner(m)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, cond.Dim())
	if err := cond.Build(h, buf); err != nil {
		t.Fatal(err)
	}
	if buf[15] != 5050 || buf[len(buf)-1] != 5100 {
		t.Fatalf("cond carries %v and %v, want the features of both samples", buf[15], buf[len(buf)-1])
	}
}

// cameraFrames is an ImageSource with frames captured at fixed times:
// the features of a frame are its capture time in milliseconds.
type cameraFrames struct {
	width int
	at    []time.Time // capture times, oldest first
}

func (c *cameraFrames) Features(obs int, t, since time.Time, dst []float32) error {
	for i := len(c.at) - 1; i >= 0; i-- {
		if c.at[i].After(t) {
			continue
		}
		if c.at[i].Before(since) {
			return errNoImage
		}
		for k := range dst {
			dst[k] = float32(c.at[i].UnixMilli() % 100000)
		}
		return nil
	}
	return errNoImage
}

// TestNewSceneWaitsForItsFrame checks that after a new episode (clear) the
// history starts only with a frame captured after the scene was replaced:
// the first arm state of the new scene is never paired with the camera's
// frame of the old one, which showed the old object's place to the first
// plan (the demo's ButtonPress camera bundle went for the previous
// episode's button and tripped the state term 1.3 s in).
func TestNewSceneWaitsForItsFrame(t *testing.T) {
	b, err := engines.LoadBundle(visionBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	fields := []string{"position", "velocity", "gripper"}
	probe := &actuators.State{Position: make([]float64, 7), Velocity: make([]float64, 7)}
	t0 := time.UnixMilli(5000)
	ms := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	cam := &cameraFrames{width: 32, at: []time.Time{ms(0), ms(100)}}
	so, err := newStateObs(&b.Manifest, fields, probe, cam)
	if err != nil {
		t.Fatal(err)
	}
	push := func(d int) {
		s := *probe
		s.Time = ms(d)
		so.push(&s)
	}
	push(50)
	push(150)
	if !so.ready() {
		t.Fatal("not ready after T_o pushes")
	}
	so.clear(ms(200)) // the scene was replaced at 200 ms
	push(210)         // the newest frame (100 ms) shows the old scene
	if so.ready() {
		t.Fatal("ready with only the old scene's frame")
	}
	if _, err := so.history(); err == nil {
		t.Fatal("history after clear with no new frame: want an error")
	}
	cam.at = append(cam.at, ms(250)) // the new scene's first frame
	push(240)                        // read before that frame: still waiting
	if so.ready() {
		t.Fatal("ready from a state read before the new scene's first frame")
	}
	push(260)
	if !so.ready() {
		t.Fatal("not ready once the new scene's frame came")
	}
	h, err := so.history()
	if err != nil {
		t.Fatal(err)
	}
	for step := range h {
		if f := h[step][1][0]; f != 5250 {
			t.Fatalf("step %d: features of the frame at %v ms, want the new scene's (5250)", step, f)
		}
	}
}

// TestImagePolicyNeedsCamera checks the start-up refusals of an image
// policy without its camera or without the camera watchdog.
func TestImagePolicyNeedsCamera(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"camera off", "camera.enabled", func(c *Config) { c.Camera.Enabled = false }},
		{"camera watchdog off", "camera_max_age", func(c *Config) { c.Safety.Watchdog.CameraMaxAge = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := simArmConfig(t)
			cfg.Camera.Enabled = true
			cfg.Camera.Source = "replay"
			cfg.Camera.Replay.Dir = filepath.Join(repoRoot(t), "camera", "testdata", "frames")
			cfg.Robot.State = []string{"position", "velocity", "gripper"}
			cfg.Policy.Bundle = visionBundle(t)
			cfg.Safety.Limits.MaxVelocity = []float64{1, 1, 1, 1, 1, 1, 1}
			huge := 1e9
			cfg.Safety.Energy.Scores = []safety.ScoreConfig{{Name: "energy", Threshold: &huge}}
			c.edit(&cfg)
			app, err := NewApp(context.Background(), &cfg, AppOptions{})
			if err == nil {
				app.Close()
				t.Fatalf("started, want an error naming %s", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %s", err, c.want)
			}
		})
	}
}

// TestEndToEndImagePolicy runs the whole stack on the image bundle: the
// camera frames go through preprocessing and the vision graph into every
// replan and re-score, and the policy drives the arm.
func TestEndToEndImagePolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 5 s)")
	}
	s := startStack(t, 5, func(c *Config) { c.Policy.Bundle = visionBundle(t) })
	if len(s.app.vision) != 1 {
		t.Fatalf("%d vision pipelines, want 1", len(s.app.vision))
	}
	s.waitState(t, StateRunning, 60*time.Second)
	time.Sleep(3 * time.Second)
	st := s.app.Loop().Stats()
	if st.Chunks < 2 || st.Replans < 2 {
		t.Fatalf("image policy not replanning: %+v", st)
	}
	if n := s.app.vision[0].hist.Len(); n == 0 {
		t.Fatal("no frame was encoded")
	}
	if snap := s.arm.Snapshot(); !snap.Enabled || snap.Commands < 10 {
		t.Fatalf("arm not driven: %+v", snap)
	}
	if st, _ := s.app.Loop().Machine().State(); st != StateRunning {
		t.Fatalf("state %s, want RUNNING", st)
	}
	t.Logf("stats %+v", st)

	// Every stage of the path was timed but the state term, which this
	// bundle does not have; /metrics and the live view's stats carry them.
	for stage := range numStages {
		n := s.app.stages.Stats(stage).Count
		if want := stage != StageStateTerm; (n > 0) != want {
			t.Errorf("%s recorded %d times, want it recorded: %v", stage, n, want)
		}
	}
	metrics := s.get(t, "/metrics")
	for _, want := range []string{`energyflow_stage_latency_seconds_count{stage="camera_decode"}`, `energyflow_stage_latency_seconds_count{stage="command_write"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if stats := s.get(t, "/api/stats"); !strings.Contains(stats, `"stage":"encoder"`) || strings.Contains(stats, `"stage":"state_term"`) {
		t.Errorf("/api/stats: %s", stats)
	}
}

// TestCameraMustMatchTheBundle checks the refusals of a camera other than
// the one a bundle's image input was trained on, each naming what was
// expected and what came.
func TestCameraMustMatchTheBundle(t *testing.T) {
	want := &engines.CameraSpec{Name: "topview", Width: 96, Height: 96}
	for _, c := range []struct {
		name   string
		spec   *engines.CameraSpec
		edit   func(*Config)
		errHas []string // empty: accepted
	}{
		{"bundle names no camera", nil, func(c *Config) {}, nil},
		{"same camera", want, func(c *Config) { c.Camera.Name = "topview" }, nil},
		{"http source, size checked on frames", want, func(c *Config) { c.Camera.Name = "topview"; c.Camera.Source = camera.KindHTTP; c.Camera.Width = 640 }, nil},
		{"camera not named", want, func(c *Config) {}, []string{"camera.name", "empty", `"topview"`, "96×96"}},
		{"another camera", want, func(c *Config) { c.Camera.Name = "corner2" }, []string{"camera.name", `"corner2"`, `"topview"`}},
		{"another capture size", want, func(c *Config) {
			c.Camera.Name = "topview"
			c.Camera.Source = camera.KindV4L2
			c.Camera.Width, c.Camera.Height = 640, 480
		}, []string{"camera.width", "640×480", "96×96"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Camera.Width, cfg.Camera.Height = 0, 0
			c.edit(&cfg)
			b := &engines.Bundle{Dir: "bundles/cam"}
			err := checkCamera(&cfg, b, engines.ObsSpec{Name: "camera", Kind: engines.ObsImage, Camera: c.spec})
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

// TestVisionRefusesAFrameOfAnotherSize feeds a 160×120 frame to an input
// trained on 96×96 frames: refused in one line naming both sizes, and no
// features stored.
func TestVisionRefusesAFrameOfAnotherSize(t *testing.T) {
	v := openVisionPipeline(t, 0, time.Second)
	v.camera = &engines.CameraSpec{Name: "topview", Width: 96, Height: 96}
	frames := replayRGB(t)
	ok, err := v.Encode(&frames[0], time.Unix(1000, 0), 1)
	if ok || err == nil {
		t.Fatalf("encoded = %v, err = %v; want a refusal", ok, err)
	}
	for _, s := range []string{"160x120", "96x96", `"topview"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want it to name %s", err, s)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("err spans lines: %q", err)
	}
}
