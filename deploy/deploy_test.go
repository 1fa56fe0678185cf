// Package deploy holds the systemd unit and install script; its test checks
// the unit with systemd-analyze.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitVerifiesClean runs `systemd-analyze verify` on the unit, with
// ExecStart pointed at an executable that exists here, and fails on any
// output: systemd-analyze only warns (exit 0) about unknown keys.
func TestUnitVerifiesClean(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found: make deps installs Debian's systemd package")
		}
		t.Skip("systemd-analyze not installed (make deps installs it)")
	}
	unit, err := os.ReadFile("energyflow.service")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "/usr/local/bin/energyflow", self, 1)
	if text == string(unit) {
		t.Fatal("unit has no ExecStart=/usr/local/bin/energyflow")
	}
	path := filepath.Join(t.TempDir(), "energyflow.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: err=%v\n%s", err, out)
	}
}

// TestUnitHasRequiredSettings pins the settings the runtime relies on.
func TestUnitHasRequiredSettings(t *testing.T) {
	unit, err := os.ReadFile("energyflow.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Type=notify", "WatchdogSec=", "Restart=on-failure", "NoNewPrivileges=yes",
		"ProtectSystem=strict", "ReadWritePaths=", "DevicePolicy=closed",
		"DeviceAllow=char-video4linux rw", "DeviceAllow=char-ttyUSB rw",
		"Nice=-10", "CPUWeight=1000", // plans in time on a busy host (docs/deploy.md)
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
}
