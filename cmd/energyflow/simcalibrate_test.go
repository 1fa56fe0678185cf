package main

import (
	"bytes"
	"math"
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
			if err := checkCalibratable(dir, "energy"); err != nil {
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
		if err := checkCalibratable(dir, "energy"); err == nil || !strings.Contains(err.Error(), "want a JSON object") {
			t.Fatalf("err = %v", err)
		}
	})
}

// The printouts of a closed-loop calibration say what the bands count:
// sim calibrate's (with the fresh scores per running tick of the traces)
// and bundle verify's, for a manifest in ticks, in fresh scores, and one
// without band_unit (calibrated before the key: fresh scores).
func TestClosedLoopPrintoutsNameTheUnit(t *testing.T) {
	cases := []struct {
		unit  safety.BandUnit
		bands string // how the bands' header reads
		noun  string // what each band line counts
	}{
		{safety.BandTicks, "bands by running ticks since arming (band_unit ticks)", "running ticks"},
		{safety.BandFreshScores, "bands by fresh scores since arming (band_unit fresh_scores): they shift with the scorer's throughput", "fresh scores"},
		{"", "bands by fresh scores since arming (no band_unit: calibrated before it existed): they shift with the scorer's throughput", "fresh scores"},
	}
	for _, tc := range cases {
		t.Run("band_unit="+string(tc.unit), func(t *testing.T) {
			cl := &safety.ClosedLoop{Score: "energy", Alpha: 0.1, Q: 1.5, Rule: safety.ClosedLoopRule{Kind: safety.RuleNOfM, N: 3, M: 5},
				BandUnit: tc.unit, Bands: []safety.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
				Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
				Seeds: [2]int{2000, 2001}}
			var out bytes.Buffer
			nan := math.NaN()
			printClosedLoop(&out, "b", cl, [][]float64{{1, nan, 1, 1}, {nan, 1, 1, 1}}, safety.NOfMConfig{N: 3, M: 5})
			for _, w := range []string{"bands by " + tc.noun + " since arming (band_unit " + string(cl.Unit()) + "); 6 fresh scores on 8 running ticks (0.75 per tick)",
				tc.noun + " 0 to 9 since arming: mean 10", tc.noun + " 10 on since arming: mean 8"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("sim calibrate's printout lacks %q:\n%s", w, out.String())
				}
			}

			dir := writeTestBundle(t)
			if err := writeClosedLoop(dir, cl); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			var errb bytes.Buffer
			if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
				t.Fatalf("verify exit %d\n%s\n%s", code, out.String(), errb.String())
			}
			for _, w := range []string{tc.bands, tc.noun + " 0 to 9 since arming: threshold 13", tc.noun + " 10 on since arming: threshold 9.5"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("bundle verify's output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
