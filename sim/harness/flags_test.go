package harness_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestFlagsNormalize: the Go check accepts what the bridge accepts
// (sim/world.py normalize_task, sim/ood.py normalize_level) and passes it on
// in the bridge's spelling.
func TestFlagsNormalize(t *testing.T) {
	tests := []struct{ task, level, wantTask, wantLevel string }{
		{"button-press", "0", "button-press", "0"},
		{"Drawer-Open", "m", "drawer-open", "M"},
		{" hammer-v3 ", " l ", "hammer", "L"},
	}
	for _, tc := range tests {
		f := harness.Flags{Task: tc.task, Level: tc.level, Rate: 10, Camera: "96x96"}
		if err := f.Validate(); err != nil || f.Task != tc.wantTask || f.Level != tc.wantLevel {
			t.Errorf("Validate(%q, %q) = %q, %q, %v; want %q, %q", tc.task, tc.level, f.Task, f.Level, err, tc.wantTask, tc.wantLevel)
		}
	}
}

// TestFlagsRefuse: out-of-range camera checks are refused in one line
// naming the flag.
func TestFlagsRefuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*harness.Flags)
		want string
	}{
		{"camera moved over 1", func(f *harness.Flags) { f.CameraMoved = 1.5 }, "--camera-moved 1.5"},
		{"camera moved negative", func(f *harness.Flags) { f.CameraMoved = -0.5 }, "--camera-moved -0.5"},
		{"camera unseen negative", func(f *harness.Flags) { f.CameraUnseen = -1 }, "--camera-unseen -1"},
		{"frozen motion negative", func(f *harness.Flags) { f.FrozenMotion = -1 }, "--camera-frozen-motion -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := harness.Flags{Task: "button-press", Level: "0", Rate: 10, Camera: "96x96"}
			tc.set(&f)
			err := f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate: %v, want one line naming %q", err, tc.want)
			}
		})
	}
}

func TestRobotState(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
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
			got, err := harness.RobotState(filepath.Join(root, c.bundle), c.flag)
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

// TestPrepareNamesAnotherTasksBundle: Prepare notices a bundle whose
// closed-loop stop was calibrated on another task (it would run every
// episode never armed) and says which.
func TestPrepareNamesAnotherTasksBundle(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		task, bundle, want string
	}{
		{"button-press", "", ""},
		{"assembly", "bundles/metaworld-button-press", "button-press"},
		{"button-press", "bundles/metaworld-button-press", ""},
	} {
		f := harness.Flags{Task: tc.task, Level: "0", Rate: 20, Camera: "96x96"}
		if tc.bundle != "" {
			f.Bundle = filepath.Join(root, tc.bundle)
		}
		if err := f.Prepare(root); err != nil {
			t.Fatalf("%s on %s: %v", tc.bundle, tc.task, err)
		}
		if f.CalibratedOn != tc.want {
			t.Errorf("%s on %s: CalibratedOn = %q, want %q", tc.bundle, tc.task, f.CalibratedOn, tc.want)
		}
		var warn strings.Builder
		f.WarnTask(&warn, "energyflow sim eval")
		if (tc.want != "") != strings.Contains(warn.String(), "was calibrated on task "+tc.want) {
			t.Errorf("%s on %s: WarnTask printed %q", tc.bundle, tc.task, warn.String())
		}
	}
}

// TestDefaultBundle: every command defaults to the task's state bundle
// (the demo too: the camera bundle's stop still trips at the press in
// continuous operation, docs/evaluation.md); --bundle wins, and Prepare
// takes the camera the bundle was trained on.
func TestDefaultBundle(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		name       string
		task       string
		bundle     string
		want       string // bundle folder under root
		wantCamera string
		wantImages bool
	}{
		{"default", "button-press", "", "bundles/metaworld-button-press", "corner2", false},
		{"another task", "drawer-open", "", "bundles/metaworld-drawer-open", "corner2", false},
		{"--bundle, a camera bundle", "button-press", "bundles/metaworld-button-press-camera", "bundles/metaworld-button-press-camera", "topview", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := harness.Flags{Task: tc.task, Level: "0", Rate: 10, Camera: "96x96"}
			if tc.bundle != "" {
				f.Bundle = filepath.Join(root, tc.bundle)
			}
			if err := f.Prepare(root); err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.want); f.BundleDir != want {
				t.Errorf("bundle %s, want %s", f.BundleDir, want)
			}
			if f.CameraName != tc.wantCamera {
				t.Errorf("camera %q, want %q", f.CameraName, tc.wantCamera)
			}
			if f.Images != tc.wantImages {
				t.Errorf("Images %v, want %v", f.Images, tc.wantImages)
			}
		})
	}
}

// TestPrepareTakesTheBundlesWarmStart: with no warm flag, Prepare gives the
// runtime the bundle's sampler.warm_start (so summaries record what ran),
// except with --cold, another K or rate, real-time chunking, or a flag's
// own σ.
func TestPrepareTakesTheBundlesWarmStart(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(root, "bundles/metaworld-assembly/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	s := m["sampler"].(map[string]any)
	s["steps"], s["warm_start"] = 10, map[string]any{"sigma": 1, "steps": 5, "rate_hz": 20}
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		flags     func(*harness.Flags)
		wantSigma float64
		wantSteps int
	}{
		{"the bundle's", func(*harness.Flags) {}, 1, 5},
		{"--cold", func(f *harness.Flags) { f.Cold = true }, 0, 0},
		{"--steps 20", func(f *harness.Flags) { f.Steps = 20 }, 0, 0},
		{"--steps 10, the bundle's K", func(f *harness.Flags) { f.Steps = 10 }, 1, 5},
		{"--chunking denoised", func(f *harness.Flags) { f.Chunking, f.ChunkingStrength = "denoised", 1 }, 0, 0},
		{"--warm-sigma 2", func(f *harness.Flags) { f.WarmSigma = 2 }, 2, 0},
		{"--rate 10, not the bundle's warm start's", func(f *harness.Flags) { f.Rate = 10 }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := harness.Flags{Task: "assembly", Level: "0", Rate: 20, Camera: "96x96", Bundle: dir}
			tc.flags(&f)
			if err := f.Prepare(root); err != nil {
				t.Fatal(err)
			}
			if f.WarmSigma != tc.wantSigma || f.WarmSteps != tc.wantSteps {
				t.Errorf("warm σ %v steps %d, want %v and %d", f.WarmSigma, f.WarmSteps, tc.wantSigma, tc.wantSteps)
			}
		})
	}
	f := harness.Flags{Task: "assembly", Level: "0", Rate: 20, Camera: "96x96", Cold: true, WarmSigma: 1}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "--cold with --warm-sigma 1") {
		t.Errorf("--cold with --warm-sigma: %v", err)
	}
}

// prepared parses args (after --bundle root/bundle, unless bundle is "") as
// a command line does, notes the flags given and prepares them.
func prepared(t *testing.T, root, bundle string, args ...string) *harness.Flags {
	t.Helper()
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	f := new(harness.Flags)
	f.Register(fs)
	if bundle != "" {
		args = append([]string{"--bundle", filepath.Join(root, bundle)}, args...)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	f.NoteGiven(fs)
	if err := f.Prepare(root); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPrepareTakesTaskAndRateFromTheBundle: a --bundle given without --task
// or --rate runs the task and the rate its stop was certified on; a flag
// the command line gave wins, and the default rate stays where the bundle
// is also certified at it.
func TestPrepareTakesTaskAndRateFromTheBundle(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		name, bundle string
		args         []string
		wantTask     string
		wantRate     float64
		wantFrom     string
	}{
		{"a 20 Hz camera bundle", "bundles/metaworld-hammer-camera", nil, "hammer", 20, "task hammer, 20 Hz"},
		{"--task and --rate given", "bundles/metaworld-hammer-camera", []string{"--task", "hammer", "--rate", "10"}, "hammer", 10, ""},
		{"--rate given", "bundles/metaworld-drawer-open-camera", []string{"--rate", "10"}, "drawer-open", 10, "task drawer-open"},
		{"certified at the default rate too", "bundles/metaworld-button-press-camera", nil, "button-press", 10, ""},
		{"a state bundle certified at 10 Hz too", "bundles/metaworld-assembly", nil, "assembly", 10, "task assembly"},
		{"its closed loop is of a score the stop does not watch", "bundles/metaworld-drawer-open", nil, "drawer-open", 10, "task drawer-open"},
		{"no --bundle: the flags' defaults", "", nil, "button-press", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := prepared(t, root, tc.bundle, tc.args...)
			if f.Task != tc.wantTask || f.Rate != tc.wantRate || f.FromBundle != tc.wantFrom {
				t.Errorf("task %s, %g Hz, from the bundle %q; want %s, %g Hz, %q", f.Task, f.Rate, f.FromBundle, tc.wantTask, tc.wantRate, tc.wantFrom)
			}
			var out strings.Builder
			f.WarnTask(&out, "energyflow sim")
			if (tc.wantFrom != "") != strings.Contains(out.String(), "as its stop was certified") || strings.Contains(out.String(), "was calibrated on task") {
				t.Errorf("WarnTask printed %q", out.String())
			}
		})
	}
}

// TestUnseenCheckOnlyWithAPalette: sim sets safety.watchdog.camera_unseen
// for a bundle whose image carries a palette; for one without, only when
// --camera-unseen is given (the runtime then says it watches nothing).
func TestUnseenCheckOnlyWithAPalette(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		name, bundle string
		args         []string
		want         int
	}{
		{"a palette", "bundles/metaworld-button-press-camera", nil, harness.DefaultCameraUnseen},
		{"no palette", "bundles/metaworld-hammer-camera", []string{"--watch-camera", "off"}, 0},
		{"no palette, the flag given", "bundles/metaworld-hammer-camera", []string{"--watch-camera", "off", "--camera-unseen", "4"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := prepared(t, root, tc.bundle, tc.args...)
			cfg, err := f.RuntimeConfig(root, &harness.Bridge{Modbus: "127.0.0.1:5020", HTTP: "127.0.0.1:8090"}, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Safety.Watchdog.CameraUnseen; got != tc.want {
				t.Errorf("camera_unseen %d, want %d", got, tc.want)
			}
		})
	}
}

// TestWatchCamera: a bundle's watch camera is rendered by the bridge and read
// by the runtime (camera_watch, the unseen-colour check on) unless
// --watch-camera off; a bridge that serves none is refused in one line.
func TestWatchCamera(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	withWatch := &harness.Bridge{Modbus: "127.0.0.1:5020", HTTP: "127.0.0.1:8090", Watch: "http://127.0.0.1:8090/watch"}
	for _, tc := range []struct {
		name, bundle string
		args         []string
		bridge       *harness.Bridge
		watch        string // the watch camera run ("": none)
		unseen       int
		err          string
	}{
		{"the bundle's", "bundles/metaworld-hammer-camera", nil, withWatch, "corner", harness.DefaultCameraUnseen, ""},
		{"the other bundle's", "bundles/metaworld-drawer-open-camera", nil, withWatch, "corner4", harness.DefaultCameraUnseen, ""},
		{"off", "bundles/metaworld-hammer-camera", []string{"--watch-camera", "off"}, withWatch, "", 0, ""},
		{"a bundle without one", "bundles/metaworld-button-press-camera", nil, withWatch, "", harness.DefaultCameraUnseen, ""},
		{"a bridge without it", "bundles/metaworld-hammer-camera", nil, &harness.Bridge{Modbus: "127.0.0.1:5020", HTTP: "127.0.0.1:8090"}, "corner", 0, "serves none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := prepared(t, root, tc.bundle, tc.args...)
			if f.WatchCamera != tc.watch {
				t.Fatalf("WatchCamera %q, want %q", f.WatchCamera, tc.watch)
			}
			cfg, err := f.RuntimeConfig(root, tc.bridge, "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("RuntimeConfig: %v, want one line naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cw := cfg.CameraWatch; cw.On() != (tc.watch != "") || cw.Enabled == nil || tc.watch != "" && (cw.Name != tc.watch || cw.URL != tc.bridge.Watch) {
				t.Errorf("camera_watch %+v, want camera %q at %s", cw, tc.watch, tc.bridge.Watch)
			}
			if got := cfg.Safety.Watchdog.CameraUnseen; got != tc.unseen {
				t.Errorf("camera_unseen %d, want %d", got, tc.unseen)
			}
		})
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	f := harness.Flags{Task: "button-press", Level: "0", Rate: 10, Camera: "96x96"}
	f.Register(fs)
	if err := fs.Parse([]string{"--watch-camera", "on"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), `--watch-camera "on"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Validate: %v, want one line naming --watch-camera \"on\"", err)
	}
}
