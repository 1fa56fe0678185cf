package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines/enginestest"
	"github.com/energyflow/edge/sim/harness/calibrate"
)

// verifiedCalibration writes cl into the bundle dir (a test bundle when
// "") and returns what bundle verify prints about it (failing the test
// unless it verifies).
func verifiedCalibration(t *testing.T, dir string, cl *calibration.ClosedLoop) string {
	t.Helper()
	if dir == "" {
		dir = writeTestBundle(t)
	}
	if _, err := calibrate.WriteClosedLoop(dir, cl); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	return out.String()
}

// bundle verify says what a closed-loop calibration's bands count: in
// ticks, in fresh scores, and without band_unit (calibrated before the
// key: fresh scores).
func TestBundleVerifyNamesTheBandUnit(t *testing.T) {
	cases := []struct {
		unit  calibration.BandUnit
		bands string // how the bands' header reads
		noun  string // what each band line counts
	}{
		{calibration.BandTicks, "bands by running ticks since arming (band_unit ticks)", "running ticks"},
		{calibration.BandFreshScores, "bands by fresh scores since arming (band_unit fresh_scores): they shift with the scorer's throughput", "fresh scores"},
		{"", "bands by fresh scores since arming (no band_unit: calibrated before it existed): they shift with the scorer's throughput", "fresh scores"},
	}
	for _, tc := range cases {
		t.Run("band_unit="+string(tc.unit), func(t *testing.T) {
			cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
				BandUnit: tc.unit, Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
				Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
				Seeds: [2]int{2000, 2001}}
			out := verifiedCalibration(t, "", cl)
			for _, w := range []string{tc.bands, tc.noun + " 0 to 9 since arming: threshold 13", tc.noun + " 10 on since arming: threshold 9.5"} {
				if !strings.Contains(out, w) {
					t.Errorf("bundle verify's output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A calibration with a one-tick ceiling: bundle verify gives each band's
// ceiling beside its threshold, and the episode bound alpha + ceiling
// alpha.
func TestBundleVerifyShowsTheCeiling(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.05, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
		Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
		Seeds: [2]int{2000, 2001}, Ceiling: &calibration.Ceiling{Alpha: 0.02, Q: 4, Quantile: 3.5, Episodes: 1, Seeds: [2]int{2000, 2001}}}
	out := verifiedCalibration(t, "", cl)
	for _, w := range []string{"one-tick ceiling: one score above mean + 4·std of its band trips at once (quantile 3.5); ceiling alpha 0.02 over 1 episodes (seeds 2000–2001): a fresh episode trips either rule with probability at most 0.07",
		"running ticks 0 to 9 since arming: threshold 13, ceiling 18 (mean 10", "running ticks 10 on since arming: threshold 9.5, ceiling 12 (mean 8"} {
		if !strings.Contains(out, w) {
			t.Errorf("bundle verify's output lacks %q:\n%s", w, out)
		}
	}
}

// bundle verify shows a closed-loop calibration of the state score, of an
// energyflow and of a diffusion bundle with the state term.
func TestBundleVerifyShowsTheStateScoreClosedLoop(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "state_energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 1, Std: 2, Threshold: 4}, {From: 10, Mean: 0.5, Std: 1, Threshold: 2}},
		Task: "button-press", Level: "0", RateHz: 10, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{2000, 2039}}
	for _, name := range []string{"energyflow", "diffusion"} {
		t.Run(name, func(t *testing.T) {
			dir := writeTestBundle(t)
			if name == "diffusion" {
				dir = filepath.Join(t.TempDir(), "dp")
				if err := os.CopyFS(dir, os.DirFS(filepath.Join(moduleRoot(t), "runtime", "testdata", "simarm-diffusion"))); err != nil {
					t.Fatal(err)
				}
			}
			enginestest.AddStateTerm(t, dir, 6.5)
			out := verifiedCalibration(t, dir, cl)
			for _, w := range []string{"calibration: closed-loop", "state_energy over 40 level-0 episodes", "state term state_energy.onnx"} {
				if !strings.Contains(out, w) {
					t.Errorf("verify output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A calibration at another rate beside the shipped bundle's closed_loop:
// bundle verify names it with its rate and K and shows the plan latency it
// recorded, and the lateness limit the runtime derives from it.
func TestBundleVerifyShowsACalibrationPerRate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(moduleRoot(t), "bundles", "metaworld-button-press"))); err != nil {
		t.Fatal(err)
	}
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.5, Q: 3, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 1e5, Std: 1e4, Threshold: 1.3e5}},
		Task: "button-press", Level: "0", RateHz: 10, StepsK: 20, MaxSteps: 40, Episodes: 4, ConformalEpisodes: 4, Seeds: [2]int{2000, 2003},
		PlanLatency: &calibration.PlanLatency{P50Ms: 40, P90Ms: 60, Plans: 40, Episodes: 4, Seeds: [2]int{2000, 2003}, Measured: calibration.PlanLatencyFromCalibration}}
	out := verifiedCalibration(t, dir, cl)
	for _, w := range []string{"closed-loop for 10 Hz and K=20 (closed_loop_others[0])", "alpha 0.5",
		"in the calibration's own driving): the runtime warns when its own p90 passes"} {
		if !strings.Contains(out, w) {
			t.Errorf("bundle verify does not show %q:\n%s", w, out)
		}
	}
}
