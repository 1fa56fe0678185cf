package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// bundle verify prints the state_energy block and evaluates the state term
// once, for an energyflow bundle (where re-scoring must agree) and a
// diffusion one; a state graph that breaks the contract fails the check.
func TestBundleVerifyStateTerm(t *testing.T) {
	diffusion := filepath.Join(t.TempDir(), "dp")
	if err := os.CopyFS(diffusion, os.DirFS(filepath.Join(moduleRoot(t), "runtime", "testdata", "simarm-diffusion"))); err != nil {
		t.Fatal(err)
	}
	enginestest.AddStateTerm(t, diffusion, 6.5)
	cases := []struct {
		name string
		dir  string
		want []string
	}{
		{"energyflow (the parity fixture's trained state term)", filepath.Join(moduleRoot(t), "engines", "testdata", "parity-state", "bundle"),
			[]string{"ok    state term state_energy.onnx: reading max_sigma_z over 4 noise levels (σ 0.05–3); held-out q99.9 4.00", "n=512",
				"ok    test sample", "ok    state term test evaluation (observations at their mean): state_energy ", "verify: OK"}},
		{"diffusion", diffusion,
			[]string{"over 3 noise levels (σ 0.05–3); held-out q99.9 6.5 (n=100", "ok    test sample", "state term test evaluation (observations at their mean): state_energy -1 (held-out q99.9 6.5)", "verify: OK"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := realMain([]string{"bundle", "verify", "--threads", "1", tc.dir}, &out, &errb); code != exitOK {
				t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	// Without the block, nothing about a state term is printed.
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", writeTestBundle(t)}, &out, &errb); code != exitOK || strings.Contains(out.String(), "state term") {
		t.Errorf("a bundle without the state term: exit %d\n%s", code, out.String())
	}
	// A block naming a graph that is not a state graph fails the check.
	bad := writeTestBundle(t)
	enginestest.AddStateTerm(t, bad, 6.5)
	mf := filepath.Join(bad, "manifest.json")
	raw, _ := os.ReadFile(mf)
	if err := os.WriteFile(mf, bytes.Replace(raw, []byte(`"graph": "state_energy.onnx"`), []byte(`"graph": "energy_grad.onnx"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"bundle", "verify", "--threads", "1", bad}, &out, &errb); code != exitCheckFailed ||
		!strings.Contains(errb.String(), "state term energy_grad.onnx") || !strings.Contains(errb.String(), `"state_energy"`) {
		t.Errorf("a state term that is not a state graph: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

// sim calibrate --score state_energy writes a closed-loop calibration of the
// state score into a bundle with the state term (refused, before anything
// is written, into one without); bundle verify then shows it.
func TestWriteClosedLoopOfTheStateScore(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "state_energy", Alpha: 0.1, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 1, Std: 2, Threshold: 4}, {From: 10, Mean: 0.5, Std: 1, Threshold: 2}},
		Task: "button-press", Level: "0", RateHz: 10, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20,
		Seeds: [2]int{2000, 2039}}
	plain := writeTestBundle(t)
	if err := checkCalibratable(plain, "state_energy", 20, 20); err == nil || !strings.Contains(err.Error(), `no "state_energy" block`) {
		t.Fatalf("checkCalibratable(state_energy) of a bundle without the state term: %v", err)
	}
	for _, name := range []string{"energyflow", "diffusion"} {
		t.Run(name, func(t *testing.T) {
			dir := writeTestBundle(t)
			if name == "diffusion" {
				dir = filepath.Join(t.TempDir(), "dp")
				if err := os.CopyFS(dir, os.DirFS(filepath.Join(moduleRoot(t), "runtime", "testdata", "simarm-diffusion"))); err != nil {
					t.Fatal(err)
				}
				if err := checkCalibratable(dir, "state_energy", 20, 20); err == nil {
					t.Fatal("a diffusion bundle without the state term took a state_energy calibration")
				}
			}
			enginestest.AddStateTerm(t, dir, 6.5)
			if err := checkCalibratable(dir, "state_energy", 20, 20); err != nil {
				t.Fatal(err)
			}
			if _, err := writeClosedLoop(dir, cl); err != nil {
				t.Fatal(err)
			}
			b, err := engines.LoadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Manifest.Calibration.ClosedLoop; got == nil || got.Score != "state_energy" || len(got.Bands) != 2 {
				t.Fatalf("closed_loop read back as %+v", got)
			}
			var out, errb bytes.Buffer
			if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
				t.Fatalf("verify exit %d\n%s\n%s", code, out.String(), errb.String())
			}
			for _, w := range []string{"calibration: closed-loop", "state_energy over 40 level-0 episodes", "state term state_energy.onnx"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("verify output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestSimCalibrateStateScore drives short level-0 episodes of a ButtonPress
// bundle given the analytic state term: sim calibrate --score state_energy
// fits and writes the state score's threshold (one standardized band, every
// episode conformal), and the per-tick scores file
// carries state_energy next to the energies.
func TestSimCalibrateStateScore(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episodes")
	}
	root := moduleRoot(t)
	requireVenv(t, root)
	bundle := shippedBundleCopy(t, root, "metaworld-button-press")
	enginestest.AddStateTerm(t, bundle, 1e6)
	scores := filepath.Join(t.TempDir(), "scores.jsonl")
	var out, errb bytes.Buffer
	t.Setenv("ENERGYFLOW_ROOT", root)
	code := realMain([]string{"sim", "calibrate", "--bundle", bundle, "--score", "state_energy", "--episodes", "4", "--alpha", "0.5",
		"--max-steps", "40", "--rate", "10", "--scores", scores}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sim calibrate exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "one band (the score is standardized), 4 set q; score state_energy") || !strings.Contains(out.String(), "wrote calibration.closed_loop") {
		t.Errorf("output:\n%s", out.String())
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
