package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestRun drives a few short level-0 episodes through the runtime
// against the real bridge, fits the closed-loop thresholds and writes them
// into a copy of the shipped ButtonPress bundle: at 10 Hz, beside its 20 Hz
// closed_loop (calibration.closed_loop_others). The manifest still parses,
// keeps its other fields, and a 10 Hz loop takes the new thresholds
// (bundle verify's printout of it is cmd/energyflow's test).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episodes")
	}
	root := harnesstest.ModuleRoot(t)
	harnesstest.RequireVenv(t, root)
	dir := t.TempDir()
	bundle := harnesstest.ShippedBundleCopy(t, "metaworld-button-press")
	before, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "calibration.json")
	// 80 steps (ButtonPress succeeds at about 65): a loaded CI host scores
	// only about half the ticks fresh, and one band needs 50 fresh scores
	// from the 2 fit episodes; 40 steps left that to luck (37 ticks each).
	out, errb, err := runCalibrate(t, "--bundle", bundle, "--episodes", "4", "--alpha", "0.5",
		"--max-steps", "80", "--rate", "10", "--json", report)
	if err != nil {
		t.Fatalf("sim calibrate: %v\n%s\n%s", err, out, errb)
	}
	for _, want := range []string{"closed-loop calibration on 4 level-0 episodes of button-press (seeds 2000–2003", "2 fit the bands, 2 set q",
		"alpha 0.5", "bands by running ticks since arming (band_unit ticks)", "running ticks 0 ",
		"wrote calibration.closed_loop_others[0] (10 Hz, K=20; closed_loop, at 20 Hz and K=20, is kept for other rates)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	after, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatalf("calibrated bundle does not load: %v", err)
	}
	cal := after.Manifest.Calibration
	if cal == nil || len(cal.ClosedLoopOthers) != 1 || !slices.Equal(cal.ClosedLoop.Bands, before.Manifest.Calibration.ClosedLoop.Bands) {
		t.Fatalf("want the 20 Hz closed_loop kept and one closed_loop_others written:\n%s", out)
	}
	cl, ok := cal.ClosedLoopFor(10, 20)
	if !ok || cl != cal.ClosedLoopOthers[0] {
		t.Fatalf("ClosedLoopFor(10 Hz, K=20) = %+v, %v: want the new calibration", cl, ok)
	}
	if cl.Alpha != 0.5 || cl.Task != "button-press" || cl.Episodes != 4 || cl.Seeds != [2]int{2000, 2003} || len(cl.Bands) == 0 || cl.Bands[0].From != 0 ||
		cl.BandUnit != calibration.BandTicks {
		t.Errorf("closed_loop = %+v", cl)
	}
	if cal.Recommended != before.Manifest.Calibration.Recommended || after.Manifest.Name != before.Manifest.Name {
		t.Errorf("the rest of the manifest changed: recommended %+v, was %+v", cal.Recommended, before.Manifest.Calibration.Recommended)
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("no --json report: %v", err)
	}
	// The calibration records how late its plans landed; the runtime warns past that.
	pl := cl.PlanLatency
	if pl == nil || pl.Measured != calibration.PlanLatencyFromCalibration || pl.Episodes != 4 || pl.Seeds != [2]int{2000, 2003} ||
		pl.Plans < 4 || !(pl.P50Ms > 0 && pl.P90Ms >= pl.P50Ms) {
		t.Fatalf("plan_latency = %+v, want the calibration's own driving", pl)
	}
	// --latency-only records it again from later episodes and keeps the thresholds.
	out, errb, err = runCalibrate(t, "--bundle", bundle, "--latency-only", "--episodes", "2", "--seed", "2100",
		"--max-steps", "30", "--rate", "10")
	if err != nil || !strings.Contains(out, "wrote calibration.closed_loop_others[0].plan_latency into") ||
		!strings.Contains(out, "plan latency over ") {
		t.Fatalf("sim calibrate --latency-only: %v\n%s\n%s", err, out, errb)
	}
	again, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	cl2, _ := again.Manifest.Calibration.ClosedLoopFor(10, 20)
	if pl := cl2.PlanLatency; pl == nil || pl.Measured != calibration.PlanLatencyAfterwards || pl.Episodes != 2 || pl.Seeds != [2]int{2100, 2101} {
		t.Fatalf("--latency-only wrote %+v", cl2.PlanLatency)
	}
	was := *cl
	was.PlanLatency = cl2.PlanLatency
	if !reflect.DeepEqual(&was, cl2) {
		t.Errorf("--latency-only changed more than plan_latency:\n%+v\n%+v", cl, cl2)
	}
}

// A calibration driven with --delay is measured with --dry-run only: written
// into the bundle it would pass for the host's own timing. The refusal is
// one line, before any episode runs.
func TestRefusesADelayedCalibrationIntoTheBundle(t *testing.T) {
	bundle := harnesstest.ShippedBundleCopy(t, "metaworld-button-press")
	_, _, err := runCalibrate(t, "--bundle", bundle, "--delay", "2", "--score", "state_energy", "--alpha", "0.5")
	var u harness.UsageError
	if want := "--delay 2: the bundle's calibration would not record the added delay"; !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
		t.Fatalf("sim calibrate --delay 2 without --dry-run: %v; want a usage error with %q", err, want)
	}
}

// TestRunStateScore drives short level-0 episodes of a ButtonPress
// bundle given the analytic state term: sim calibrate --score state_energy
// fits and writes the state score's threshold (one standardized band, every
// episode conformal), and the per-tick scores file
// carries state_energy next to the energies.
func TestRunStateScore(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episodes")
	}
	root := harnesstest.ModuleRoot(t)
	harnesstest.RequireVenv(t, root)
	bundle := harnesstest.ShippedBundleCopy(t, "metaworld-button-press")
	enginestest.AddStateTerm(t, bundle, 1e6)
	scores := filepath.Join(t.TempDir(), "scores.jsonl")
	out, errb, err := runCalibrate(t, "--bundle", bundle, "--score", "state_energy", "--episodes", "4", "--alpha", "0.5",
		"--max-steps", "40", "--rate", "10", "--scores", scores)
	if err != nil {
		t.Fatalf("sim calibrate: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(out, "one band (the score is standardized), 4 set q; score state_energy") || !strings.Contains(out, "wrote calibration.closed_loop") {
		t.Errorf("output:\n%s", out)
	}
	b, err := engines.LoadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Manifest.Calibration.ClosedLoop
	if cl == nil || cl.Score != "state_energy" || len(cl.Bands) != 1 || cl.Bands[0].Mean != 0 || cl.Bands[0].Std != 1 || cl.FitEpisodes != 0 ||
		cl.Bands[0].Threshold != cl.Q || cl.Q < -1 {
		t.Fatalf("closed_loop %+v: want one standardized band, q the threshold (the analytic state energy is ≥ −1)", cl)
	}
	lines, err := os.ReadFile(scores)
	if err != nil {
		t.Fatal(err)
	}
	fresh := 0
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var tick map[string]any
		if err := json.Unmarshal(l, &tick); err != nil {
			t.Fatal(err)
		}
		se, ok := tick["state_energy"]
		if !ok {
			t.Fatalf("score line without state_energy: %s", l)
		}
		if se != nil {
			fresh++
		}
	}
	if fresh < 10 {
		t.Errorf("%d score lines with a state energy, want ≥ 10", fresh)
	}
}
