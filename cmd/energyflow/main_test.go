package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp checks that `energyflow <cmd> --help` prints a
// usage text and exits 0, and that unknown commands are usage errors.
func TestEveryCommandHasHelp(t *testing.T) {
	for name := range commands() {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := realMain([]string{name, "--help"}, &out, &errb)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
			}
			if text := out.String() + errb.String(); !strings.Contains(strings.ToLower(text), "usage") {
				t.Fatalf("no usage text:\n%s", text)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"--help"}, exitOK},
		{[]string{"version"}, exitOK},
		{[]string{"config", "check", "--config", "/nonexistent/config.yaml"}, exitCheckFailed},
		{[]string{"config", "bogus"}, exitUsage},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if got := realMain(tt.args, &out, &errb); got != tt.want {
			t.Errorf("energyflow %v: exit %d, want %d\n%s", tt.args, got, tt.want, errb.String())
		}
	}
}
