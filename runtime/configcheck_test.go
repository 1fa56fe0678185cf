package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/trt"
)

// checkedConfig writes a config whose map and bundle are real (the
// Meta-World map and the parity fixture bundle), edited by edit, and
// returns Check's error.
func checkedConfig(t *testing.T, edit func(body, dir string) string) error {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	body := "robot:\n  address: 127.0.0.1:5020\n  map: " + filepath.Join(root, "examples", "maps", "metaworld.yaml") +
		"\n  state: [observation]\ncamera:\n  enabled: false\npolicy:\n  bundle: " + filepath.Join(root, "engines", "testdata", "parity", "bundle") +
		"\nsafety:\n  limits:\n    max_velocity: [1, 1, 1]\ntelemetry:\n  enabled: true\n  auth:\n    token_file: " + filepath.Join(dir, "tokens.yaml") + "\n"
	body = edit(body, dir)
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatalf("LoadConfig: %v\n%s", err, body)
	}
	return c.Check()
}

func TestConfigCheckFindsWhatCannotRun(t *testing.T) {
	same := func(b, _ string) string { return b }
	cases := []struct {
		name  string
		edit  func(body, dir string) string
		wants []string // substrings of the error; none: no error
	}{
		{"everything there", same, nil},
		{"register map missing", func(b, _ string) string {
			return strings.Replace(b, "metaworld.yaml", "nope.yaml", 1)
		}, []string{"config.yaml:3: robot.map", "nope.yaml"}},
		{"register map does not parse", func(b, dir string) string {
			p := filepath.Join(dir, "bad-map.yaml")
			_ = os.WriteFile(p, []byte("format: 1\nsignals: [oops\n"), 0o644)
			return strings.Replace(b, b[strings.Index(b, "map: ")+5:strings.Index(b, "\n  state")], p, 1)
		}, []string{"robot.map"}},
		{"bundle folder without a manifest", func(b, dir string) string {
			e := filepath.Join(dir, "empty-bundle")
			_ = os.Mkdir(e, 0o755)
			return strings.Replace(b, b[strings.Index(b, "bundle: ")+8:strings.Index(b, "\nsafety")], e, 1)
		}, []string{"policy.bundle"}},
		{"token folder missing", func(b, dir string) string {
			return strings.Replace(b, filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, "no", "such", "tokens.yaml"), 1)
		}, []string{"telemetry.auth.token_file", "no such folder"}},
		{"state_energy watched on a bundle without the state term", func(b, _ string) string {
			return strings.Replace(b, "safety:\n", "safety:\n  energy:\n    scores:\n      - name: state_energy\n", 1)
		}, []string{"config.yaml:11: safety.energy.scores", `"state_energy", but bundle`, "no state term"}},
		{"state_energy watched on a bundle with it", func(b, _ string) string {
			b = strings.Replace(b, "safety:\n", "safety:\n  energy:\n    scores:\n      - name: state_energy\n", 1)
			return strings.Replace(b, filepath.Join("testdata", "parity", "bundle"), filepath.Join("testdata", "parity-state", "bundle"), 1)
		}, nil},
		{"tracking on a map with the position", func(b, _ string) string {
			return strings.Replace(b, "safety:\n", "safety:\n  tracking:\n    enabled: true\n", 1)
		}, nil},
		{"tracking on a map without the position", func(b, dir string) string {
			root, _ := filepath.Abs("..")
			src, _ := os.ReadFile(filepath.Join(root, "examples", "maps", "metaworld.yaml"))
			var kept []string
			for _, l := range strings.Split(string(src), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "position:") {
					kept = append(kept, l)
				}
			}
			p := filepath.Join(dir, "no-position.yaml")
			_ = os.WriteFile(p, []byte(strings.Join(kept, "\n")), 0o644)
			b = strings.Replace(b, filepath.Join(root, "examples", "maps", "metaworld.yaml"), p, 1)
			return strings.Replace(b, "safety:\n", "safety:\n  tracking:\n    enabled: true\n", 1)
		}, []string{"config.yaml:11: safety.tracking.enabled", "no position signal"}},
		{"a watch camera on for a bundle without one", func(b, _ string) string {
			return b + "camera_watch:\n  enabled: true\n  name: side\n  source: http\n  url: http://127.0.0.1:8090/watch\n"
		}, []string{"camera_watch.enabled", "no watch camera"}},
		{"a watch camera replaying a missing folder", func(b, dir string) string {
			return b + "camera_watch:\n  enabled: true\n  name: side\n  source: replay\n  replay:\n    dir: " + filepath.Join(dir, "nope") + "\n"
		}, []string{"camera_watch.replay.dir"}},
		{"TensorRT asked of a build without it", func(b, _ string) string {
			return strings.Replace(b, "policy:\n", "policy:\n  backend: trt\n", 1)
		}, []string{"policy.backend", "built without TensorRT"}},
	}
	_, probeErr := trt.Probe(0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.name, "TensorRT") && !errors.Is(probeErr, trt.ErrNoTensorRT) {
				t.Skip("this test binary was built with TensorRT")
			}
			err := checkedConfig(t, c.edit)
			if len(c.wants) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed, want an error with %q", c.wants)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
