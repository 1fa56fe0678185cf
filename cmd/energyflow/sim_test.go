package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/camera"
)

// startTestBridge starts the Meta-World bridge (lockstep) for a test. It
// needs the project's Python environment: in CI (CI set) its absence fails
// the test, locally it skips.
func startTestBridge(t *testing.T) (*bridge, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Meta-World bridge")
	}
	root := moduleRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "python")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no .venv: make deps creates it")
		}
		t.Skip("no .venv (run make deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := startBridge(ctx, bridgeOptions{root: root, task: "button-press", level: "0", seed: 3,
		mapFile: filepath.Join(root, simMapFile), lockstep: true, camera: "96x96", log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, root
}

// TestBridgeSpeaksTheRegisterMap drives the bridge with the runtime's own
// Modbus client and register map: the map round-trips between Go and the
// Python server, and every command advances the world one step.
func TestBridgeSpeaksTheRegisterMap(t *testing.T) {
	b, root := startTestBridge(t)
	cfg := actuators.DefaultConfig()
	cfg.Address = b.Modbus
	cfg.Map = filepath.Join(root, simMapFile)
	cfg.Timeout = 2 * time.Second
	arm, err := actuators.Open(cfg, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	ctx := context.Background()
	if err := arm.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var s0, s1 actuators.State
	if err := arm.State(ctx, &s0); err != nil {
		t.Fatal(err)
	}
	if len(s0.Observation) != 39 || len(s0.Position) != 3 {
		t.Fatalf("observation %d values, position %d; want 39 and 3", len(s0.Observation), len(s0.Position))
	}
	for i := 0; i < 3; i++ {
		if s0.Position[i] != s0.Observation[i] {
			t.Fatalf("position[%d]=%v differs from observation[%d]=%v", i, s0.Position[i], i, s0.Observation[i])
		}
	}
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	ep0, err := b.Episode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 1}, Gripper: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := arm.State(ctx, &s1); err != nil {
		t.Fatal(err)
	}
	if !s1.Enabled {
		t.Fatal("enable did not read back")
	}
	if s1.Position[2] <= s0.Position[2] {
		t.Fatalf("hand z %v → %v after 5 upward commands", s0.Position[2], s1.Position[2])
	}
	ep1, err := b.Episode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ep1.Step != ep0.Step+5 {
		t.Fatalf("steps %d → %d, want +5 (one per command)", ep0.Step, ep1.Step)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := arm.State(ctx, &s1); err != nil || s1.Enabled {
		t.Fatalf("after halt: enabled=%v err=%v", s1.Enabled, err)
	}
}

// TestBridgeCameraDecodes reads the bridge's MJPEG stream through the camera
// package, as the runtime does.
func TestBridgeCameraDecodes(t *testing.T) {
	b, _ := startTestBridge(t)
	cfg := camera.DefaultConfig()
	cfg.Source = "http"
	cfg.URL = b.StreamURL()
	src, err := camera.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var f camera.Frame
	if err := src.Read(ctx, &f); err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(f.Data))
	if err != nil {
		t.Fatalf("frame is not a JPEG: %v", err)
	}
	if img.Bounds().Dx() != 96 || img.Bounds().Dy() != 96 {
		t.Fatalf("frame %v, want 96×96", img.Bounds())
	}
	if age := time.Since(f.Time); age < 0 || age > time.Minute {
		t.Fatalf("capture time %v is %v from now", f.Time, age)
	}
	var rgb camera.RGB
	var dec camera.JPEGDecoder
	if err := camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited); err != nil {
		t.Fatal(err)
	}
	if rgb.Width != 96 || len(rgb.Pix) != 96*96*3 {
		t.Fatalf("RGB %d×%d, %d bytes", rgb.Width, rgb.Height, len(rgb.Pix))
	}
}

// TestSimEvalEpisode runs a short closed-loop episode through the whole
// stack — bridge camera → runtime → policy (the shipped bundle on ONNX
// Runtime) → safety → Modbus → Meta-World — with the evaluation command.
// It checks the pipeline, not the success rate.
func TestSimEvalEpisode(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episode")
	}
	root := moduleRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "python")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no .venv: make deps creates it")
		}
		t.Skip("no .venv (run make deps)")
	}
	dir := t.TempDir()
	scores, summary := filepath.Join(dir, "scores.jsonl"), filepath.Join(dir, "summary.json")
	var out, errb bytes.Buffer
	t.Setenv("ENERGYFLOW_ROOT", root)
	code := realMain([]string{"sim", "eval", "--task", "button-press", "--episodes", "1", "--max-steps", "25",
		"--seed", "100", "--rate", "5", "--scores", scores, "--json", summary}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sim eval exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "task button-press level 0") {
		t.Fatalf("no summary line:\n%s", out.String())
	}
	var s evalSummary
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Episodes != 1 || len(s.Results) != 1 || s.Results[0].Steps < 5 {
		t.Fatalf("episode did not run: %+v\n%s", s, errb.String())
	}
	lines, err := os.ReadFile(scores)
	if err != nil || bytes.Count(lines, []byte("\n")) < 5 || !bytes.Contains(lines, []byte(`"energy":`)) {
		t.Fatalf("per-tick scores missing (%v):\n%.500s", err, lines)
	}
}

func TestSimRobotState(t *testing.T) {
	root := moduleRoot(t)
	for _, c := range []struct {
		name, bundle, flag string
		want               []string
		err                string
	}{
		{"39-wide state: the observation", "bundles/metaworld-button-press", "", []string{"observation"}, ""},
		{"flag wins", "bundles/metaworld-button-press", "position,gripper", []string{"position", "gripper"}, ""},
		{"other width: refused", "runtime/testdata/simarm-vision-bundle", "", nil, "15-wide state input"},
		{"no bundle", "runtime/testdata/none", "", nil, "manifest.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := simRobotState(filepath.Join(root, c.bundle), c.flag)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
