package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mitchellh/go-homedir"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bundle"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExampleConfigIsValid(t *testing.T) {
	ex := string(ExampleConfig())
	ex = strings.Replace(ex, "/var/lib/energyflow/bundle", "bundle", 1)
	p := writeConfig(t, ex)
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	if c.Policy.Bundle != filepath.Join(filepath.Dir(p), "bundle") {
		t.Fatalf("relative bundle path not resolved: %s", c.Policy.Bundle)
	}
	if c.Loop.RateHz != 10 || len(c.Safety.Limits.MaxVelocity) != 7 || c.Period().Milliseconds() != 100 {
		t.Fatalf("unexpected values: %+v", c.Loop)
	}
}

const minimal = `robot:
  address: 127.0.0.1:5020
  map: map.yaml
camera:
  enabled: false
policy:
  bundle: bundle
safety:
  limits:
    max_velocity: [1, 1, 1]
telemetry:
  enabled: false
`

func TestConfigErrorsCarryKeyAndLine(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		wants []string // substrings, each must appear
	}{
		{"unknown key", minimal + "loop:\n  rate: 10\n", []string{"config.yaml:14", "unknown key loop.rate (did you mean loop.rate_hz?)"}},
		{"unknown section", minimal + "robto: {}\n", []string{"config.yaml:13", "unknown key robto (did you mean robot?)"}},
		{"typo in a nested key", strings.Replace(minimal, "safety:\n", "safety:\n  watchdog:\n    loop_max_lat: 50ms\n", 1), []string{"config.yaml:10", "unknown key safety.watchdog.loop_max_lat (did you mean safety.watchdog.loop_max_late?)"}},
		{"typo in robot", strings.Replace(minimal, "  address:", "  adress:", 1), []string{"config.yaml:2", "unknown key robot.adress (did you mean robot.address?)"}},
		{"no near key: the valid ones", minimal + "loop:\n  zzzzzz: 1\n", []string{"unknown key loop.zzzzzz (valid keys here: ", "rate_hz"}},
		{"every problem reported", strings.Replace(minimal, "bundle: bundle", "bundle: bundle\n  backend: cuda\n  steps: -1", 1) + "loop:\n  rate_hz: 0\nlog:\n  level: loud\n",
			[]string{"config.yaml:8: policy.backend", "config.yaml:9: policy.steps", "config.yaml:16: loop.rate_hz", "config.yaml:18: log.level"}},
		{"live view url", strings.Replace(minimal, "telemetry:\n  enabled: false\n", "telemetry:\n  enabled: true\n  video:\n    url: rtsp://127.0.0.1/view\n", 1),
			[]string{"config.yaml:14: telemetry.video.url", "scheme must be http or https"}},
		{"real-time chunking", minimal + "loop:\n  realtime_chunking:\n    mode: on\n    delay: -1\n",
			[]string{`realtime_chunking.mode: "on"`, "realtime_chunking.delay: -1 is negative"}},
		{"real-time chunking strength", minimal + "loop:\n  realtime_chunking:\n    mode: denoised\n    strength: 2\n",
			[]string{"realtime_chunking.strength 2 with mode denoised, want at most 1"}},
		{"real-time chunking strength not finite", minimal + "loop:\n  realtime_chunking:\n    mode: noisy\n    strength: -.inf\n",
			[]string{"realtime_chunking.strength -Inf, want a finite value above 0"}},
		{"missing bundle dir", strings.Replace(minimal, "bundle: bundle", "bundle: nowhere", 1), []string{"policy.bundle", "nowhere is not a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tt.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// A section's package prefixes its own messages with the section name; the
// located error must say it once, with the key and line of the value.
func TestConfigErrorsNameTheSectionOnce(t *testing.T) {
	tests := []struct {
		name, body, want, doubled string
	}{
		{"telemetry", strings.Replace(minimal, "telemetry:\n  enabled: false\n", "telemetry:\n  enabled: true\n  listen: nope\n", 1),
			`config.yaml:13: telemetry.listen: "nope" is not host:port`, "telemetry: telemetry:"},
		{"safety, key not in the file", strings.Replace(minimal, "  limits:\n    max_velocity: [1, 1, 1]\n", "  watchdog:\n    loop_max_late: 50ms\n", 1),
			"safety: limits.max_velocity: required", "safety: safety:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, tt.body))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.doubled) {
				t.Fatalf("want %q and not %q in:\n%v", tt.want, tt.doubled, err)
			}
		})
	}
}

// A tracking tolerance or window that is negative, zero where it must be
// positive, or not finite is refused when the file loads (config check),
// in one line naming the key and its line.
func TestTrackingConfigErrors(t *testing.T) {
	tests := []struct{ name, entry, want string }{
		{"negative window", "window: -100ms", "config.yaml:11: safety.tracking.window: must be in (0, 10s]"},
		{"zero window", "window: 0s", "config.yaml:11: safety.tracking.window: must be in (0, 10s]"},
		{"zero tolerance", "tolerance: 0", "config.yaml:11: safety.tracking.tolerance: must be a finite number > 0"},
		{"negative tolerance", "tolerance: -0.02", "config.yaml:11: safety.tracking.tolerance: must be a finite number > 0"},
		{"NaN tolerance", "tolerance: .nan", "config.yaml:11: safety.tracking.tolerance: must be a finite number > 0"},
		{"infinite tolerance", "tolerance: .inf", "config.yaml:11: safety.tracking.tolerance: must be a finite number > 0"},
		{"negative response", "response: -1s", "config.yaml:11: safety.tracking.response: must be in [0, 10s]"},
		{"scale of zero", "scale: [0.01, 0, 0.01]", "config.yaml:11: safety.tracking.scale[1]: must be > 0"},
		{"unknown per", "per: step", `config.yaml:11: safety.tracking.per: "step": want "second"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Replace(minimal, "safety:\n", "safety:\n  tracking:\n    enabled: true\n    "+tt.entry+"\n", 1)
			_, err := LoadConfig(writeConfig(t, body))
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") != 0 {
				t.Fatalf("want one line with %q, got:\n%v", tt.want, msg)
			}
		})
	}
}

func TestConfigStateFieldValidation(t *testing.T) {
	body := strings.Replace(minimal, "  map: map.yaml\n", "  map: map.yaml\n  state: [torque]\n", 1)
	_, err := LoadConfig(writeConfig(t, body))
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `unknown arm-state field "torque"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestFindConfigSearchOrder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	homedir.DisableCache = true // go-homedir caches $HOME; the test changes it
	t.Cleanup(func() { homedir.DisableCache = false })
	if _, err := FindConfig(""); !errors.Is(err, ErrNoConfig) && !fileExistsT("/etc/energyflow/config.yaml") {
		t.Fatalf("err = %v, want ErrNoConfig", err)
	}
	user := filepath.Join(home, ".config", "energyflow", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(user, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindConfig(""); err != nil || got != user {
		t.Fatalf("FindConfig = %q, %v; want %q", got, err, user)
	}
	explicit := filepath.Join(home, "x.yaml")
	if _, err := FindConfig(explicit); err == nil {
		t.Fatal("missing explicit config accepted")
	}
	os.WriteFile(explicit, []byte("{}"), 0o644)
	if got, err := FindConfig("~/x.yaml"); err != nil || got != explicit {
		t.Fatalf("~ not expanded: %q %v", got, err)
	}
}

func fileExistsT(p string) bool { _, err := os.Stat(p); return err == nil }
