package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimBadArguments: a bad flag value is refused before the bridge
// starts, with one line per mistake naming the value (and the valid ones),
// and exit 2. No case here may reach the bridge: none needs .venv.
func TestSimBadArguments(t *testing.T) {
	root := moduleRoot(t)
	empty := t.TempDir() // a checkout without trained bundles
	noTerm := withoutStateTerm(t, filepath.Join(root, "bundles/metaworld-button-press"))
	tests := []struct {
		name string
		args []string
		root string // ENERGYFLOW_ROOT; "": the repository
		code int
		want []string // each must appear in stderr
		not  []string // none may appear
	}{
		{"unknown task", []string{"sim", "--task", "nonsense"}, "", exitUsage,
			[]string{`--task "nonsense": unknown task; want one of button-press, drawer-open, assembly, bin-picking, hammer`}, nil},
		{"unknown level", []string{"sim", "--level", "X"}, "", exitUsage,
			[]string{`--level "X": unknown OOD level; want one of 0, S, M, L`}, nil},
		{"eval: unknown task", []string{"sim", "eval", "--task", "push-back"}, "", exitUsage, []string{`--task "push-back"`}, nil},
		{"eval: no steps", []string{"sim", "eval", "--max-steps", "0"}, "", exitUsage, []string{"--max-steps 0: must be at least 1"}, nil},
		{"eval: negative steps", []string{"sim", "eval", "--max-steps", "-5"}, "", exitUsage, []string{"--max-steps -5: must be at least 1"}, nil},
		{"eval: no episodes", []string{"sim", "eval", "--episodes", "0"}, "", exitUsage, []string{"--episodes 0: must be at least 1"}, nil},
		{"eval: unknown fault", []string{"sim", "eval", "--fault", "earthquake"}, "", exitUsage,
			[]string{`--fault "earthquake": unknown fault; want one of push, object, occlusion, zero_state`}, nil},
		{"eval: negative fault step", []string{"sim", "eval", "--fault", "push", "--fault-step", "-1"}, "", exitUsage, []string{"--fault-step -1"}, nil},
		{"eval: every mistake at once", []string{"sim", "eval", "--episodes", "0", "--level", "XL", "--rate", "0"}, "", exitUsage,
			[]string{"--episodes 0", `--level "XL"`, "--rate 0"}, nil},
		{"negative seed", []string{"sim", "--seed", "-1"}, "", exitUsage, []string{"--seed -1"}, nil},
		{"bad camera size", []string{"sim", "eval", "--camera-size", "96"}, "", exitUsage, []string{`--camera-size "96"`}, nil},
		{"unknown camera", []string{"sim", "eval", "--camera", "sideview"}, "", exitUsage, []string{`--camera "sideview"`, "topview"}, nil},
		{"unknown fault", []string{"sim", "eval", "--fault", "smoke"}, "", exitUsage, []string{`--fault "smoke"`, "camera_shift"}, nil},
		{"bundle state width", []string{"sim", "eval", "--bundle", filepath.Join(root, "runtime/testdata/simarm-vision-bundle")}, "", exitUsage,
			[]string{"15-wide state input", "observation (39) or position,gripper (4)"}, nil},
		{"no such bundle", []string{"sim", "--bundle", "bundles/nope"}, "", exitUsage,
			[]string{"--bundle bundles/nope: no such folder"}, []string{"pass --bundle"}},
		{"bundle is a file", []string{"sim", "eval", "--bundle", filepath.Join(root, "go.mod")}, "", exitUsage, []string{"not a folder"}, nil},
		{"eval: record into a file", []string{"sim", "eval", "--record", filepath.Join(root, "go.mod")}, "", exitUsage, []string{"--record: mkdir", "not a directory"}, nil},
		{"folder without manifest", []string{"sim", "--bundle", empty}, "", exitUsage, []string{"no manifest.json — is it an engine bundle?"}, nil},
		{"calibrate: too few episodes for alpha", []string{"sim", "calibrate", "--episodes", "10", "--alpha", "0.05"}, "", exitUsage,
			[]string{"leaves 5 conformal episodes, which cannot certify --alpha 0.05: need at least 19 (pass --episodes 38, or a larger --alpha)"}, nil},
		{"calibrate: alpha out of range", []string{"sim", "calibrate", "--alpha", "1.5"}, "", exitUsage, []string{"--alpha 1.5: must be in (0, 1)"}, nil},
		{"calibrate: not level 0", []string{"sim", "calibrate", "--level", "L"}, "", exitUsage, []string{"--level L: calibration drives level-0"}, nil},
		{"calibrate: a diffusion bundle", []string{"sim", "calibrate", "--bundle", filepath.Join(root, "engines/testdata/parity-diffusion/bundle"), "--robot-state", "position,gripper"}, "", exitUsage,
			[]string{`is a "diffusion" policy: it has no energy to calibrate`}, nil},
		{"calibrate: unknown score", []string{"sim", "calibrate", "--score", "vibes"}, "", exitUsage,
			[]string{`--score "vibes": unknown score to calibrate; want one of energy, state_energy`}, nil},
		{"calibrate: state score without a state term", []string{"sim", "calibrate", "--bundle", noTerm, "--score", "state_energy"}, "", exitUsage,
			[]string{"--score state_energy: bundle ", `has no state term (no "state_energy" block in its manifest)`, "or calibrate --score energy"}, nil},
		{"calibrate: alpha and a rate per hour", []string{"sim", "calibrate", "--alpha", "0.1", "--trips-per-hour", "1"}, "", exitUsage,
			[]string{"--alpha 0.1 with --trips-per-hour 1: give one false-alarm level, per episode or per hour"}, nil},
		{"calibrate: a negative rate per hour", []string{"sim", "calibrate", "--trips-per-hour", "-2"}, "", exitUsage,
			[]string{"--trips-per-hour -2: must be a number > 0"}, nil},
		{"calibrate: fit episodes of the state score", []string{"sim", "calibrate", "--score", "state_energy", "--fit-episodes", "5"}, "", exitUsage,
			[]string{"--fit-episodes 5 with --score state_energy: the state score is standardized", "drop --fit-episodes"}, nil},
		{"calibrate: too few episodes for the state score", []string{"sim", "calibrate", "--score", "state_energy", "--episodes", "5"}, "", exitUsage,
			[]string{"--episodes 5 cannot certify --alpha 0.1: the state score needs at least 9 conformal episodes (pass --episodes 9"}, nil},
		{"calibrate: ceiling alpha out of range", []string{"sim", "calibrate", "--ceiling-alpha", "0"}, "", exitUsage,
			[]string{"--ceiling-alpha 0: must be in (0, 1), e.g. 0.02 (or leave it out: no ceiling)"}, nil},
		{"calibrate: too few episodes for the ceiling", []string{"sim", "calibrate", "--score", "state_energy", "--episodes", "20", "--ceiling-alpha", "0.02"}, "", exitUsage,
			[]string{"--episodes 20 leaves 20 conformal episodes, which cannot certify --ceiling-alpha 0.02: need at least 49 conformal episodes"}, nil},
		{"calibrate: latency only, with a threshold's flag", []string{"sim", "calibrate", "--latency-only", "--alpha", "0.2"}, "", exitUsage,
			[]string{"--alpha with --latency-only: it records how late these episodes' plans land and leaves the thresholds alone; drop --alpha"}, nil},
		{"calibrate: latency only, from traces", []string{"sim", "calibrate", "--latency-only", "--traces", "x.jsonl"}, "", exitUsage,
			[]string{"--traces with --latency-only"}, nil},
		{"calibrate: latency only, no calibration at the rate", []string{"sim", "calibrate", "--latency-only", "--rate", "7"}, "", exitUsage,
			[]string{"--latency-only: bundle ", "has no closed-loop calibration at 7 Hz and K=20 to record the plan latency into"}, nil},
		{"calibrate: episodes of recorded traces", []string{"sim", "calibrate", "--traces", "x.jsonl", "--episodes", "5"}, "", exitUsage,
			[]string{"--episodes 5 with --traces: the traces' episodes are the calibration's; drop --episodes"}, nil},
		{"eval: observe only, watching", []string{"sim", "eval", "--observe-only", "--watch", "energy"}, "", exitUsage,
			[]string{`--watch "energy" with --observe-only: an observing stop watches nothing`}, nil},
		{"eval: unknown watched score", []string{"sim", "eval", "--watch", "energy,vibes"}, "", exitUsage,
			[]string{`--watch "energy,vibes": "vibes" is not a score (energy, centered_energy, state_energy)`}, nil},
		{"eval: watched score named twice", []string{"sim", "eval", "--watch", "energy,energy"}, "", exitUsage,
			[]string{`--watch "energy,energy": energy is named twice`}, nil},
		{"eval: watch the state term of a bundle without one", []string{"sim", "eval", "--bundle", noTerm, "--watch", "state_energy"}, "", exitUsage,
			[]string{`--watch "state_energy": bundle `, "has no state term (add one with python -m energyflow state-term)"}, nil},
		{"shipped bundle not trained", []string{"sim", "eval", "--task", "hammer"}, empty, exitFailure,
			[]string{"no bundle for task hammer", "or pass --bundle"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.root
			if r == "" {
				r = root
			}
			t.Setenv("ENERGYFLOW_ROOT", r)
			var out, errb bytes.Buffer
			code := realMain(tc.args, &out, &errb)
			msg := errb.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr lacks %q:\n%s", w, msg)
				}
			}
			for _, n := range append(tc.not, "Traceback", "bridge:") {
				if strings.Contains(msg, n) {
					t.Errorf("stderr has %q:\n%s", n, msg)
				}
			}
			// One line per mistake, each saying which command refused it.
			lines := strings.Split(strings.TrimSpace(msg), "\n")
			wantLines := 1
			if strings.HasPrefix(tc.name, "eval: every mistake") {
				wantLines = len(tc.want)
			}
			if len(lines) != wantLines {
				t.Errorf("%d lines, want %d (one per mistake):\n%s", len(lines), wantLines, msg)
			}
			for _, l := range lines {
				if !strings.HasPrefix(l, "energyflow sim") {
					t.Errorf("line %q does not name the command", l)
				}
			}
		})
	}
}

// withoutStateTerm copies the Meta-World bundle src into a temporary folder
// without its state term (no state_energy block, no state_energy.onnx):
// a bundle the simulator runs that the state score cannot be asked of.
func withoutStateTerm(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(src, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "state_energy")
	files := m["files"].(map[string]any)
	delete(files, "state_energy.onnx")
	for name := range files {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
