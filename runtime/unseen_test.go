package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// paletteBundle copies the vision test bundle with a palette on its image
// input whose cells all hold mark: 0xff, every colour seen; 0, none.
func paletteBundle(t *testing.T, mark byte) string {
	t.Helper()
	return editedVisionBundle(t, func(m map[string]any) {
		n := 0
		for _, o := range m["obs"].([]any) {
			if o := o.(map[string]any); o["kind"] == "image" {
				o["palette"] = markedPalette(mark)
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d image inputs, want 1", n)
		}
	})
}

// markedPalette is a 16-level palette whose cells all hold mark.
func markedPalette(mark byte) map[string]any {
	seen := make([]byte, 512)
	for i := range seen {
		seen[i] = mark
	}
	return map[string]any{"levels": 16, "seen": base64.StdEncoding.EncodeToString(seen), "frames": 1}
}

// editedVisionBundle copies the vision test bundle with its manifest
// edited by edit.
func editedVisionBundle(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.CopyFS(dir, os.DirFS(visionBundle(t))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "manifest.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The unseen-colour stop end to end, on the image bundle against the
// simulated arm with replayed camera frames: with a palette that has seen
// every colour the policy drives on; with one that has seen none, every
// pixel of the camera's frames is unseen and the gate refuses to arm,
// naming the cause; a bundle without a palette is not watched.
func TestCameraUnseenEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test (≈ 10 s)")
	}
	for _, tc := range []struct {
		name    string
		bundle  func(t *testing.T) string
		watched bool
		stop    bool
	}{
		{"every colour seen", func(t *testing.T) string { return paletteBundle(t, 0xff) }, true, false},
		{"no colour seen", func(t *testing.T) string { return paletteBundle(t, 0) }, true, true},
		{"no palette", func(t *testing.T) string { return visionBundle(t) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bundle(t)
			s := startStack(t, 5, func(c *Config) {
				c.Policy.Bundle = b
				c.Safety.Watchdog.CameraUnseen = 4
			})
			if got := s.app.WatchesUnseen(); got != tc.watched {
				t.Fatalf("WatchesUnseen %v, want %v", got, tc.watched)
			}
			if !tc.stop {
				s.waitState(t, StateRunning, 60*time.Second)
				time.Sleep(2 * time.Second)
				if st, reason := s.app.Loop().Machine().State(); st != StateRunning {
					t.Fatalf("state %s (%s), want RUNNING", st, reason)
				}
				return
			}
			// Every pixel of the replayed frames is unseen from the first
			// frame on: the gate never arms, and a reset is refused naming
			// the cause.
			s.waitState(t, StateReady, 60*time.Second)
			var err error
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if err = s.app.Loop().Arm(context.Background(), "test"); err != nil && strings.Contains(err.Error(), "unseen") {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), "something unseen in view") {
				t.Fatalf("reset with every pixel unseen: %v, want it refused for something unseen in view", err)
			}
			if st, reason := s.app.Loop().Machine().State(); st == StateRunning {
				t.Fatalf("state %s (%s) with every pixel unseen", st, reason)
			}
		})
	}
}
