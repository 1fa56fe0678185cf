package calibrate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestWriteClosedLoop: the closed-loop calibration goes into the manifest of
// a bundle with a held-out calibration and of one without any, the rest of
// the file keeps its bytes, and a manifest that could not take it is
// refused before anything is written.
func TestWriteClosedLoop(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
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
			if err := checkCalibratable(dir, "energy", 20, 20); err != nil {
				t.Fatalf("checkCalibratable: %v", err)
			}
			if _, err := WriteClosedLoop(dir, cl); err != nil {
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
		if err := checkCalibratable(dir, "energy", 20, 20); err == nil || !strings.Contains(err.Error(), "want a JSON object") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestWriteClosedLoopPerRate: a calibration at another rate or K goes
// beside closed_loop (which stays the one used at any other loop), one at a
// rate and K already calibrated replaces that one, and one of another score
// replaces closed_loop and drops the others; the runtime's ClosedLoopFor
// then finds each.
func TestWriteClosedLoopPerRate(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	dir := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "bundles/metaworld-button-press"))); err != nil {
		t.Fatal(err)
	}
	at := func(score string, rate float64, k int, thr float64) *calibration.ClosedLoop {
		return &calibration.ClosedLoop{Score: score, Alpha: 0.1, Q: 1, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
			BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 0, Std: 1, Threshold: thr}},
			Task: "button-press", Level: "0", RateHz: rate, StepsK: k, MaxSteps: 500, Episodes: 10, ConformalEpisodes: 10, Seeds: [2]int{1, 10}}
	}
	steps := []struct {
		cl     *calibration.ClosedLoop
		where  string // prefix of where it went
		others int    // len(closed_loop_others) after
	}{
		{at("energy", 20, 20, 1), "calibration.closed_loop", 0}, // the shipped one is also energy at 20 Hz, K=20: replaced
		{at("energy", 10, 20, 2), "calibration.closed_loop_others[0] (10 Hz, K=20; closed_loop, at 20 Hz and K=20, is kept", 1},
		{at("energy", 10, 20, 3), "calibration.closed_loop_others[0]", 1},
		{at("energy", 20, 10, 4), "calibration.closed_loop_others[1]", 2},
	}
	for i, st := range steps {
		where, err := WriteClosedLoop(dir, st.cl)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if !strings.HasPrefix(where, st.where) {
			t.Errorf("write %d went to %q, want %q…", i, where, st.where)
		}
		b, err := engines.LoadBundle(dir)
		if err != nil {
			t.Fatalf("write %d: the bundle does not load: %v", i, err)
		}
		if n := len(b.Manifest.Calibration.ClosedLoopOthers); n != st.others {
			t.Errorf("write %d: %d closed_loop_others, want %d", i, n, st.others)
		}
	}
	b, err := engines.LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rate  float64
		k     int
		thr   float64
		match bool
	}{{20, 20, 1, true}, {10, 20, 3, true}, {20, 10, 4, true}, {10, 10, 1, false}, {30, 20, 1, false}} {
		cl, ok := b.Manifest.Calibration.ClosedLoopFor(tc.rate, tc.k)
		if cl == nil || cl.Bands[0].Threshold != tc.thr || ok != tc.match {
			t.Errorf("ClosedLoopFor(%g Hz, K=%d) = %+v, %v; want threshold %g, %v", tc.rate, tc.k, cl, ok, tc.thr, tc.match)
		}
	}
	where, err := WriteClosedLoop(dir, at("state_energy", 10, 20, 5))
	if err != nil || !strings.Contains(where, "its 2 closed_loop_others, of score energy, dropped") {
		t.Fatalf("another score: went to %q (%v)", where, err)
	}
	if b, err = engines.LoadBundle(dir); err != nil || len(b.Manifest.Calibration.ClosedLoopOthers) != 0 || b.Manifest.Calibration.ClosedLoop.Score != "state_energy" {
		t.Fatalf("after another score: %v", err)
	}
}

// sim calibrate --score state_energy writes a closed-loop calibration of the
// state score into a bundle with the state term (refused, before anything
// is written, into one without).
func TestWriteClosedLoopOfTheStateScore(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "state_energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 1, Std: 2, Threshold: 4}, {From: 10, Mean: 0.5, Std: 1, Threshold: 2}},
		Task: "button-press", Level: "0", RateHz: 10, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{2000, 2039}}
	plain := harnesstest.CopyDir(t, "runtime/testdata/simarm-bundle")
	if err := checkCalibratable(plain, "state_energy", 20, 20); err == nil || !strings.Contains(err.Error(), `no "state_energy" block`) {
		t.Fatalf("checkCalibratable(state_energy) of a bundle without the state term: %v", err)
	}
	for _, name := range []string{"energyflow", "diffusion"} {
		t.Run(name, func(t *testing.T) {
			dir := harnesstest.CopyDir(t, "runtime/testdata/simarm-bundle")
			if name == "diffusion" {
				dir = harnesstest.CopyDir(t, "runtime/testdata/simarm-diffusion")
				if err := checkCalibratable(dir, "state_energy", 20, 20); err == nil {
					t.Fatal("a diffusion bundle without the state term took a state_energy calibration")
				}
			}
			enginestest.AddStateTerm(t, dir, 6.5)
			if err := checkCalibratable(dir, "state_energy", 20, 20); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteClosedLoop(dir, cl); err != nil {
				t.Fatal(err)
			}
			b, err := engines.LoadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Manifest.Calibration.ClosedLoop; got == nil || got.Score != "state_energy" || len(got.Bands) != 2 {
				t.Fatalf("closed_loop read back as %+v", got)
			}
		})
	}
}
