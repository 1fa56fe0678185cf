package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// TestWriteClosedLoop: the closed-loop calibration goes into the manifest of
// a bundle with a held-out calibration and of one without any, the rest of
// the file keeps its bytes, and a manifest that could not take it is
// refused before anything is written.
func TestWriteClosedLoop(t *testing.T) {
	root := moduleRoot(t)
	cl := &safety.ClosedLoop{Score: "energy", Alpha: 0.1, Q: 1.5, Rule: safety.ClosedLoopRule{Kind: safety.RuleNOfM, N: 3, M: 5},
		Bands: []safety.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
		Task:  "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{2000, 2039}}
	tests := []struct {
		name, src   string
		recommended bool // the source bundle has a held-out recommendation
	}{
		{"held-out calibration", "bundles/metaworld-button-press", true},
		{"no calibration", "runtime/testdata/simarm-bundle", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, tt.src))); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCalibratable(dir); err != nil {
				t.Fatalf("checkCalibratable: %v", err)
			}
			if err := writeClosedLoop(dir, cl); err != nil {
				t.Fatal(err)
			}
			b, err := engines.LoadBundle(dir)
			if err != nil {
				t.Fatalf("calibrated bundle does not load: %v", err)
			}
			got := b.Manifest.Calibration.ClosedLoop
			if got == nil || len(got.Bands) != 2 || got.Bands[1].Threshold != 9.5 || got.Seeds != cl.Seeds {
				t.Fatalf("closed_loop read back as %+v", got)
			}
			if has := b.Manifest.Calibration.Recommended.Score != ""; has != tt.recommended {
				t.Errorf("recommended present = %v, want %v", has, tt.recommended)
			}
			after, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
			// Everything before the calibration block is byte for byte the same.
			cut := bytes.Index(before, []byte(`"calibration"`))
			if cut < 0 || !bytes.Equal(before[:cut], after[:cut]) {
				t.Errorf("the manifest changed outside its calibration block")
			}
		})
	}
	t.Run("not a manifest", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("[1, 2]"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := checkCalibratable(dir); err == nil || !strings.Contains(err.Error(), "want a JSON object") {
			t.Fatalf("err = %v", err)
		}
	})
}
