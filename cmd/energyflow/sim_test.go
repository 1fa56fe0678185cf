package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
)

// startTestBridge starts the Meta-World bridge (lockstep) for a test. It
// needs the project's Python environment: in CI (CI set) its absence fails
// the test, locally it skips.
func startTestBridge(t *testing.T) (*bridge, string) {
	return startTestBridgeWith(t, nil)
}

// requireVenv skips a test that needs the bridge's Python when .venv is
// missing, and fails it in CI, where make deps must have made it.
func requireVenv(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "python")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no .venv: make deps creates it")
		}
		t.Skip("no .venv (run make deps)")
	}
}

// shippedBundleCopy copies bundles/<name> into a temporary folder and returns
// the copy's path.
func shippedBundleCopy(t *testing.T, root, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "bundles", name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startTestBridgeWith is startTestBridge with the options changed by edit.
func startTestBridgeWith(t *testing.T, edit func(*bridgeOptions)) (*bridge, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Meta-World bridge")
	}
	root := moduleRoot(t)
	requireVenv(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := bridgeOptions{root: root, task: "button-press", level: "0", seed: 3,
		mapFile: filepath.Join(root, simMapFile), lockstep: true, camera: "96x96", log: io.Discard}
	if edit != nil {
		edit(&o)
	}
	b, err := startBridge(ctx, o)
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

// TestBridgeViewForLiveView: with a view size the bridge announces its /view
// URL, which the camera package reads at that size, while /stream keeps the
// policy's size.
func TestBridgeViewForLiveView(t *testing.T) {
	b, _ := startTestBridgeWith(t, func(o *bridgeOptions) { o.view = "160x120" })
	if b.View != strings.TrimSuffix(b.StreamURL(), "/stream")+"/view" {
		t.Fatalf("view URL %q, stream %q", b.View, b.StreamURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		url  string
		w, h int
	}{{b.View, 160, 120}, {b.StreamURL(), 96, 96}} {
		cfg := camera.DefaultConfig()
		cfg.Source = "http"
		cfg.URL = tc.url
		src, err := camera.Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var f camera.Frame
		var rgb camera.RGB
		var dec camera.JPEGDecoder
		err = src.Read(ctx, &f)
		if err == nil {
			err = camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited)
		}
		src.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if rgb.Width != tc.w || rgb.Height != tc.h {
			t.Fatalf("%s: %d×%d, want %d×%d", tc.url, rgb.Width, rgb.Height, tc.w, tc.h)
		}
	}
}

// TestSimEvalEpisode runs two short closed-loop episodes through the whole
// stack — bridge camera → runtime → policy (the shipped bundle on ONNX
// Runtime) → safety → Modbus → Meta-World — with the evaluation command.
// It checks the pipeline and the report, not the success rate: each
// episode samples with its own seed, the measured inference latency is
// reported, and an episode's normal end logs no warning.
func TestSimEvalEpisode(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episode")
	}
	root := moduleRoot(t)
	requireVenv(t, root)
	dir := t.TempDir()
	scores, summary := filepath.Join(dir, "scores.jsonl"), filepath.Join(dir, "summary.json")
	var out, errb bytes.Buffer
	t.Setenv("ENERGYFLOW_ROOT", root)
	const maxSteps = 15
	code := realMain([]string{"sim", "eval", "--task", "button-press", "--episodes", "2", "--max-steps", fmt.Sprint(maxSteps),
		"--seed", "100", "--rate", "5", "--scores", scores, "--json", summary}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sim eval exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"task button-press level 0", "inference p50 ", "steps to success"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary line lacks %q:\n%s", want, out.String())
		}
	}
	// The harness ends every episode on purpose: no warnings for that.
	for _, line := range strings.Split(errb.String(), "\n") {
		if (strings.Contains(line, "level=WARN") && strings.Contains(line, "by runtime: shutdown")) ||
			(strings.Contains(line, "WARNING") && strings.Contains(line, "heartbeat lapsed")) {
			t.Errorf("normal episode end logged as a warning: %s", line)
		}
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var s evalSummary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Episodes != 2 || len(s.Results) != 2 {
		t.Fatalf("want 2 episodes: %s\n%s", data, errb.String())
	}
	if s.MaxSteps != maxSteps {
		t.Errorf("summary max_steps = %d, want %d (scripts/evaluate.sh keeps a cell only under the same limit)", s.MaxSteps, maxSteps)
	}
	for i, r := range s.Results {
		if r.Steps < 5 || r.Steps > maxSteps {
			t.Errorf("episode %d: %d steps, want 5..%d (the bridge truncates at --max-steps)", i, r.Steps, maxSteps)
		}
		if want := uint64(100 + i); r.PolicySeed != want || r.Seed != 100+i {
			t.Errorf("episode %d: policy seed %d, scene seed %d; want both %d", i, r.PolicySeed, r.Seed, want)
		}
		if r.Inferences == 0 || r.InferP50 == nil || *r.InferP50 <= 0 {
			t.Errorf("episode %d: %d inferences, p50 %v ms: want the measured latency", i, r.Inferences, r.InferP50)
		}
		if r.End == "" {
			t.Errorf("episode %d: no end reason", i)
		}
	}
	if s.InferP50 == nil || *s.InferP50 <= 0 || s.InferP90 == nil || *s.InferP90 < *s.InferP50 {
		t.Errorf("cell inference p50 %v, p90 %v ms", s.InferP50, s.InferP90)
	}
	// at 5 Hz a period is 200 ms; the shipped 20 Hz calibration records no plan latency
	if p := s.InferP90Periods; p == nil || math.Abs(*p-*s.InferP90/200) > 1e-9 || s.PlanLateLimit != nil || s.LateEpisodes != 0 {
		t.Errorf("inference_p90_periods %v, plan_late_limit_periods %v, late_episodes %d", p, s.PlanLateLimit, s.LateEpisodes)
	}
	if s.Successes == 0 && !bytes.Contains(data, []byte(`"mean_steps_to_success": null`)) {
		t.Errorf("no success, but mean_steps_to_success is not null:\n%s", data)
	}
	lines, err := os.ReadFile(scores)
	if err != nil || bytes.Count(lines, []byte("\n")) < 10 || !bytes.Contains(lines, []byte(`"energy":`)) {
		t.Fatalf("per-tick scores missing (%v):\n%.500s", err, lines)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var tick struct {
			Episode    int     `json:"episode"`
			PolicySeed *uint64 `json:"policy_seed"`
		}
		if err := json.Unmarshal(l, &tick); err != nil || tick.PolicySeed == nil || *tick.PolicySeed != uint64(100+tick.Episode) {
			t.Fatalf("score line without the episode's policy seed (%v): %s", err, l)
		}
	}
}

// TestSimEvalNeverArmed checks that an episode in which auto-start is
// refused on every tick is reported as never_armed, not as a step-limit
// failure: the shipped ButtonPress bundle with its recommended threshold
// set below any energy the policy can produce (and its closed-loop bands
// removed), watched with --watch energy (the default watch is its state
// term).
func TestSimEvalNeverArmed(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episode")
	}
	root := moduleRoot(t)
	requireVenv(t, root)
	dir := t.TempDir()
	bundle := shippedBundleCopy(t, root, "metaworld-button-press")
	mf := filepath.Join(bundle, "manifest.json")
	raw, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	cal := m["calibration"].(map[string]any)
	cal["recommended"].(map[string]any)["threshold"] = -1e6
	delete(cal, "closed_loop") // else its bands, not the recommendation, set the threshold
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.json")
	var out, errb bytes.Buffer
	t.Setenv("ENERGYFLOW_ROOT", root)
	code := realMain([]string{"sim", "eval", "--bundle", bundle, "--episodes", "1", "--max-steps", "12",
		"--seed", "100", "--rate", "5", "--watch", "energy", "--json", summary}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sim eval exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var s evalSummary
	data, err := os.ReadFile(summary)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil || len(s.Results) != 1 {
		t.Fatalf("summary (%v):\n%s", err, data)
	}
	if r := s.Results[0]; r.End != "never_armed" || s.NeverArmed != 1 || r.StopKind != "" {
		t.Errorf("end %q, never_armed %d, stop %q: want never_armed, 1, none\n%s", r.End, s.NeverArmed, r.StopKind, errb.String())
	}
	if !strings.Contains(out.String(), "never armed (auto-start refused all episode): 1") {
		t.Errorf("summary line does not say the arm never moved:\n%s", out.String())
	}
}

// TestSimCalibrate drives a few short level-0 episodes through the runtime
// against the real bridge, fits the closed-loop thresholds and writes them
// into a copy of the shipped ButtonPress bundle: at 10 Hz, beside its 20 Hz
// closed_loop (calibration.closed_loop_others). The manifest still parses,
// keeps its other fields, and a 10 Hz loop takes the new thresholds.
func TestSimCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episodes")
	}
	root := moduleRoot(t)
	requireVenv(t, root)
	dir := t.TempDir()
	bundle := shippedBundleCopy(t, root, "metaworld-button-press")
	before, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "calibration.json")
	var out, errb bytes.Buffer
	t.Setenv("ENERGYFLOW_ROOT", root)
	code := realMain([]string{"sim", "calibrate", "--bundle", bundle, "--episodes", "4", "--alpha", "0.5",
		"--max-steps", "40", "--rate", "10", "--json", report}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sim calibrate exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"closed-loop calibration on 4 level-0 episodes of button-press (seeds 2000–2003", "2 fit the bands, 2 set q",
		"alpha 0.5", "bands by running ticks since arming (band_unit ticks)", "running ticks 0 ",
		"wrote calibration.closed_loop_others[0] (10 Hz, K=20; closed_loop, at 20 Hz and K=20, is kept for other rates)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	after, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatalf("calibrated bundle does not load: %v", err)
	}
	cal := after.Manifest.Calibration
	if cal == nil || len(cal.ClosedLoopOthers) != 1 || !slices.Equal(cal.ClosedLoop.Bands, before.Manifest.Calibration.ClosedLoop.Bands) {
		t.Fatalf("want the 20 Hz closed_loop kept and one closed_loop_others written:\n%s", out.String())
	}
	cl, ok := cal.ClosedLoopFor(10, 20)
	if !ok || cl != cal.ClosedLoopOthers[0] {
		t.Fatalf("ClosedLoopFor(10 Hz, K=20) = %+v, %v: want the new calibration", cl, ok)
	}
	if cl.Alpha != 0.5 || cl.Task != "button-press" || cl.Episodes != 4 || cl.Seeds != [2]int{2000, 2003} || len(cl.Bands) == 0 || cl.Bands[0].From != 0 ||
		cl.BandUnit != calibration.BandTicks {
		t.Errorf("closed_loop = %+v", cl)
	}
	if cal.Recommended != before.Manifest.Calibration.Recommended || after.Manifest.Name != before.Manifest.Name {
		t.Errorf("the rest of the manifest changed: recommended %+v, was %+v", cal.Recommended, before.Manifest.Calibration.Recommended)
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("no --json report: %v", err)
	}
	// bundle verify shows what the stop will use.
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"bundle", "verify", bundle}, &out, &errb); code != exitOK {
		t.Fatalf("bundle verify exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "closed-loop for 10 Hz and K=20 (closed_loop_others[0])") || !strings.Contains(out.String(), "alpha 0.5") {
		t.Errorf("bundle verify does not show the closed-loop calibration:\n%s", out.String())
	}
	// The calibration records how late its plans landed; the runtime warns past that.
	pl := cl.PlanLatency
	if pl == nil || pl.Measured != calibration.PlanLatencyFromCalibration || pl.Episodes != 4 || pl.Seeds != [2]int{2000, 2003} ||
		pl.Plans < 4 || !(pl.P50Ms > 0 && pl.P90Ms >= pl.P50Ms) {
		t.Fatalf("plan_latency = %+v, want the calibration's own driving", pl)
	}
	if !strings.Contains(out.String(), "in the calibration's own driving): the runtime warns when its own p90 passes") {
		t.Errorf("bundle verify does not show the plan latency:\n%s", out.String())
	}
	// --latency-only records it again from later episodes and keeps the thresholds.
	out.Reset()
	errb.Reset()
	code = realMain([]string{"sim", "calibrate", "--bundle", bundle, "--latency-only", "--episodes", "2", "--seed", "2100",
		"--max-steps", "30", "--rate", "10"}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "wrote calibration.closed_loop_others[0].plan_latency into") ||
		!strings.Contains(out.String(), "plan latency over ") {
		t.Fatalf("sim calibrate --latency-only: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	again, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	cl2, _ := again.Manifest.Calibration.ClosedLoopFor(10, 20)
	if pl := cl2.PlanLatency; pl == nil || pl.Measured != calibration.PlanLatencyAfterwards || pl.Episodes != 2 || pl.Seeds != [2]int{2100, 2101} {
		t.Fatalf("--latency-only wrote %+v", cl2.PlanLatency)
	}
	was := *cl
	was.PlanLatency = cl2.PlanLatency
	if !reflect.DeepEqual(&was, cl2) {
		t.Errorf("--latency-only changed more than plan_latency:\n%+v\n%+v", cl, cl2)
	}
}

// TestSimDemoLevelSwitch checks the bridge's two ways to change the OOD
// level (docs/sim.md) against a real bridge: the pending level is taken by
// the demo's next episode (demoNextEpisode, as its auto-reset loop calls
// it), and "now" starts an episode at that level at once.
func TestSimDemoLevelSwitch(t *testing.T) {
	b, root := startTestBridgeWith(t, func(o *bridgeOptions) { o.maxSteps = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := actuators.DefaultConfig()
	cfg.Address, cfg.Map, cfg.Timeout = b.Modbus, filepath.Join(root, simMapFile), 2*time.Second
	arm, err := actuators.Open(cfg, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	if err := arm.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	post := func(body string) episode {
		t.Helper()
		var req map[string]any
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatalf("body %s is not JSON: %v", body, err)
		}
		var ep episode
		if err := b.do(ctx, "POST", "/episode/level", req, &ep); err != nil {
			t.Fatalf("POST /episode/level %s: %v", body, err)
		}
		return ep
	}
	hints := []string{`{"level":"L"}`, `{"level":"L","now":true}`}

	// From the next episode on.
	ep := post(hints[0])
	if ep.Level != "0" || ep.PendingLevel != "L" {
		t.Fatalf("after %s: level %q pending %q, want 0 and L", hints[0], ep.Level, ep.PendingLevel)
	}
	if _, ep, reset, err := demoNextEpisode(ctx, b, nil); err != nil || reset || ep.Level != "0" {
		t.Fatalf("episode still running: reset %v, level %q, err %v; want no reset", reset, ep.Level, err)
	}
	for i := 0; i < 3; i++ { // the bridge truncates at 3 steps: the episode ends
		if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 0}, Gripper: -1}); err != nil {
			t.Fatal(err)
		}
	}
	ended, ep, reset, err := demoNextEpisode(ctx, b, nil)
	if err != nil || !reset {
		t.Fatalf("ended episode: reset %v, err %v; want a new episode", reset, err)
	}
	if ep.Level != "L" || ep.PendingLevel != "" || ep.Seed != 4 || ep.Step != 0 || ep.Task != "button-press" {
		t.Fatalf("new episode %+v, want button-press level L seed 4 step 0, nothing pending", ep)
	}
	if !ended.Done || ended.Seed != 3 || ended.Level != "0" {
		t.Errorf("ended episode %+v, want the finished level-0 seed 3", ended)
	}

	// At once.
	if _, err := b.Reset(ctx, "", "0", 10, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 0}, Gripper: -1}); err != nil {
		t.Fatal(err)
	}
	ep = post(hints[1])
	if ep.Level != "L" || ep.Step != 0 || ep.Seed != 11 || ep.PendingLevel != "" {
		t.Fatalf("after %s: %+v, want level L, step 0, seed 11 at once", hints[1], ep)
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
