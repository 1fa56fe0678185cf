package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// TestWriteClosedLoop: the closed-loop calibration goes into the manifest of
// a bundle with a held-out calibration and of one without any, the rest of
// the file keeps its bytes, and a manifest that could not take it is
// refused before anything is written.
func TestWriteClosedLoop(t *testing.T) {
	root := moduleRoot(t)
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
			if _, err := writeClosedLoop(dir, cl); err != nil {
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
	root := moduleRoot(t)
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
		where, err := writeClosedLoop(dir, st.cl)
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
	where, err := writeClosedLoop(dir, at("state_energy", 10, 20, 5))
	if err != nil || !strings.Contains(where, "its 2 closed_loop_others, of score energy, dropped") {
		t.Fatalf("another score: went to %q (%v)", where, err)
	}
	if b, err = engines.LoadBundle(dir); err != nil || len(b.Manifest.Calibration.ClosedLoopOthers) != 0 || b.Manifest.Calibration.ClosedLoop.Score != "state_energy" {
		t.Fatalf("after another score: %v", err)
	}
}

// The printouts of a closed-loop calibration say what the bands count:
// sim calibrate's (with the fresh scores per running tick of the traces)
// and bundle verify's, for a manifest in ticks, in fresh scores, and one
// without band_unit (calibrated before the key: fresh scores).
func TestClosedLoopPrintoutsNameTheUnit(t *testing.T) {
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
			var out bytes.Buffer
			nan := math.NaN()
			printClosedLoop(&out, "b", cl, [][]float64{{1, nan, 1, 1}, {nan, 1, 1, 1}}, safety.NOfMConfig{N: 3, M: 5})
			for _, w := range []string{"bands by " + tc.noun + " since arming (band_unit " + string(cl.Unit()) + "); 6 fresh scores on 8 running ticks (0.75 per tick)",
				tc.noun + " 0 to 9 since arming: mean 10", tc.noun + " 10 on since arming: mean 8"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("sim calibrate's printout lacks %q:\n%s", w, out.String())
				}
			}

			out.Reset()
			out.WriteString(verifiedCalibration(t, cl))
			for _, w := range []string{tc.bands, tc.noun + " 0 to 9 since arming: threshold 13", tc.noun + " 10 on since arming: threshold 9.5"} {
				if !strings.Contains(out.String(), w) {
					t.Errorf("bundle verify's output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// sim calibrate --traces fits on recorded sim eval traces: each episode's
// trace is its score on every RUNNING tick after the arming one (NaN for a
// tick without one), and the provenance comes from the summaries beside the
// files. Shifted, faulted or other-rate recordings are refused in one line.
func TestReadTraces(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, sum map[string]any, lines []string) string {
		base := filepath.Join(dir, name)
		data, _ := json.Marshal(sum)
		if err := os.WriteFile(base+".json", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".jsonl", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return base + ".jsonl"
	}
	line := func(ep int, state string, x any) string {
		b, _ := json.Marshal(map[string]any{"episode": ep, "state": state, "state_energy": x, "energy": 1.0})
		return string(b)
	}
	good := write("button-press_3000", map[string]any{"task": "button-press", "level": "0", "rate_hz": 20, "steps_k": 20, "max_steps": 500, "episodes": 2,
		"results": []map[string]any{{"episode": 0, "seed": 3000, "success": true}, {"episode": 1, "seed": 3001}}},
		[]string{line(0, "STOPPED", nil), line(0, "RUNNING", 9.0), line(0, "RUNNING", 1.0), line(0, "RUNNING", nil), line(0, "RUNNING", 2.0),
			line(1, "STOPPED", 0.5), line(1, "RUNNING", 7.0), line(1, "RUNNING", 3.0), line(1, "STOPPED", 4.0)})
	other := write("hammer_3000", map[string]any{"task": "hammer", "level": "0", "steps_k": 10, "max_steps": 500, "episodes": 1,
		"results": []map[string]any{{"episode": 0, "seed": 3100}}},
		[]string{line(0, "RUNNING", 1.0), line(0, "RUNNING", 2.0)})
	traces, ok, p, err := readTraces(good+","+other, "state_energy", 20)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{1, math.NaN(), 2}, {3}, {2}}
	if len(traces) != len(want) {
		t.Fatalf("traces %v, want %v", traces, want)
	}
	for e := range want {
		if len(traces[e]) != len(want[e]) {
			t.Fatalf("trace %d = %v, want %v", e, traces[e], want[e])
		}
		for i, x := range want[e] {
			if g := traces[e][i]; g != x && !(math.IsNaN(g) && math.IsNaN(x)) {
				t.Fatalf("trace %d = %v, want %v", e, traces[e], want[e])
			}
		}
	}
	if p.task != "button-press,hammer" || p.steps != 0 || p.maxSteps != 500 || p.seeds != [2]int{3000, 3100} {
		t.Errorf("provenance %+v", p)
	}
	if want := []bool{true, false, false}; !slices.Equal(ok, want) {
		t.Errorf("successes %v, want %v (from the summaries' results)", ok, want)
	}

	shifted := write("shifted", map[string]any{"task": "button-press", "level": "L", "episodes": 0}, nil)
	faulted := write("faulted", map[string]any{"task": "button-press", "level": "0", "episodes": 1,
		"results": []map[string]any{{"episode": 0, "seed": 1, "fault": "push"}}}, []string{line(0, "RUNNING", 1.0)})
	fast := write("fast", map[string]any{"task": "button-press", "level": "0", "rate_hz": 50, "episodes": 0}, nil)
	short := write("short", map[string]any{"task": "button-press", "level": "0", "episodes": 3}, []string{line(0, "RUNNING", 1.0)})
	for _, tc := range []struct{ list, want string }{
		{shifted, "level L, calibration needs level-0"},
		{faulted, "has the fault push, calibration needs episodes without faults"},
		{fast, "recorded at 50 Hz, not --rate 20"},
		{short, "1 episodes of scores, its summary says 3"},
		{filepath.Join(dir, "nope.jsonl"), "its summary"},
		{filepath.Join(dir, "scores.txt"), "expected a .jsonl per-tick scores file"},
	} {
		if _, _, _, err := readTraces(tc.list, "state_energy", 20); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("readTraces(%s): %v, want one line with %q", filepath.Base(tc.list), err, tc.want)
		}
	}
	// The whole command on them: --successful-only keeps the one episode that succeeded.
	bdir := shippedBundleCopy(t, moduleRoot(t), "metaworld-button-press")
	var out, errb bytes.Buffer
	code := realMain([]string{"sim", "calibrate", "--bundle", bdir, "--score", "state_energy", "--alpha", "0.5", "--rate", "20",
		"--traces", good, "--successful-only", "--dry-run"}, &out, &errb)
	if code != exitOK || !strings.Contains(errb.String(), "1 of 2 episodes succeeded and are kept") ||
		!strings.Contains(out.String(), "closed-loop calibration on 1 level-0 episodes of button-press (seeds 3000–3001") {
		t.Errorf("sim calibrate --traces --successful-only: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	// With a one-tick ceiling: fitted on the same episodes, printed beside the threshold.
	out.Reset()
	errb.Reset()
	code = realMain([]string{"sim", "calibrate", "--bundle", bdir, "--score", "state_energy", "--alpha", "0.5", "--ceiling-alpha", "0.5", "--rate", "20",
		"--traces", good, "--dry-run"}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "one-tick ceiling: ceiling alpha 0.5: q = 3 (the episodes' conformal quantile); a fresh episode trips either rule with probability at most 1") ||
		!strings.Contains(out.String(), "threshold 1 ceiling 3") {
		t.Errorf("sim calibrate --traces --ceiling-alpha: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	// --ceiling-only adds a ceiling to the bundle's calibration at the rate and K, keeping the rest of it.
	before, err := engines.LoadBundle(bdir)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code = realMain([]string{"sim", "calibrate", "--bundle", bdir, "--score", "energy", "--ceiling-only", "--ceiling-alpha", "0.5", "--rate", "20", "--steps", "20",
		"--traces", good}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "(rule 3 of 5 at q 2.522, alpha 0.1, kept), fitted on 2 level-0 episodes of button-press (seeds 3000–3001)") ||
		!strings.Contains(out.String(), "wrote calibration.closed_loop.ceiling into") {
		t.Fatalf("sim calibrate --ceiling-only: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	after, err := engines.LoadBundle(bdir)
	if err != nil {
		t.Fatal(err)
	}
	got := after.Manifest.Calibration.ClosedLoop
	if got.Ceiling == nil || got.Ceiling.Q < got.Q || got.Ceiling.Episodes != 2 || got.Ceiling.Seeds != [2]int{3000, 3001} || got.Ceiling.Alpha != 0.5 {
		t.Fatalf("ceiling written %+v", got.Ceiling)
	}
	was := *before.Manifest.Calibration.ClosedLoop
	was.Ceiling = got.Ceiling
	if !reflect.DeepEqual(&was, got) {
		t.Fatalf("--ceiling-only changed more than the ceiling:\n%+v\n%+v", before.Manifest.Calibration.ClosedLoop, got)
	}
	// --ceiling-min raises it to a floor, the quantile kept beside it.
	out.Reset()
	errb.Reset()
	code = realMain([]string{"sim", "calibrate", "--bundle", bdir, "--score", "energy", "--ceiling-only", "--ceiling-alpha", "0.5", "--ceiling-min", "40", "--rate", "20", "--steps", "20",
		"--traces", good, "--dry-run"}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "q = 40 (the floor --ceiling-min; the episodes' quantile is") {
		t.Fatalf("sim calibrate --ceiling-min: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ceiling-min", "40"}, "--ceiling-min 40 without --ceiling-alpha"},
		{[]string{"--ceiling-alpha", "0.5", "--ceiling-min", "-1"}, "--ceiling-min -1: must be a finite number ≥ 0"},
		{[]string{"--ceiling-only", "--ceiling-alpha", "0.5", "--alpha", "0.1"}, "--alpha with --ceiling-only: the calibration's window rule is kept as it is"},
		{[]string{"--ceiling-only"}, "--ceiling-only needs --ceiling-alpha"},
		{[]string{"--ceiling-only", "--ceiling-alpha", "0.5", "--rate", "10"}, "has no closed-loop calibration of energy at 10 Hz and K=20 to add a ceiling to"},
	} {
		errb.Reset()
		args := append([]string{"sim", "calibrate", "--bundle", bdir, "--traces", good}, tc.args...)
		if code := realMain(args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, errb.String(), tc.want)
		}
	}
	if _, _, _, err := readTraces(good, "centered", 20); err == nil || !strings.Contains(err.Error(), "want a sim eval --scores line with episode, state and centered") {
		t.Errorf("a score the lines lack: %v", err)
	}
}

// A calibration with a one-tick ceiling: sim calibrate's printout and
// bundle verify give each band's ceiling beside its threshold, and the
// episode bound alpha + ceiling alpha.
func TestClosedLoopPrintoutsShowTheCeiling(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "energy", Alpha: 0.05, Q: 1.5, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		BandUnit: calibration.BandTicks, Bands: []calibration.Band{{From: 0, Mean: 10, Std: 2, Threshold: 13}, {From: 10, Mean: 8, Std: 1, Threshold: 9.5}},
		Task: "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 2, FitEpisodes: 1, ConformalEpisodes: 1,
		Seeds: [2]int{2000, 2001}, Ceiling: &calibration.Ceiling{Alpha: 0.02, Q: 4, Quantile: 3.5, Episodes: 1, Seeds: [2]int{2000, 2001}}}
	var out bytes.Buffer
	printClosedLoop(&out, "b", cl, [][]float64{{1, 1, 1, 1}, {1, 1, 1, 30}}, safety.NOfMConfig{N: 3, M: 5})
	for _, w := range []string{"one-tick ceiling: ceiling alpha 0.02: q = 4 (the window's q: the episodes' quantile, 3.5, is below it", "a fresh episode trips either rule with probability at most 0.07",
		"running ticks 0 to 9 since arming: mean 10 std 2 threshold 13 ceiling 18", "running ticks 10 on since arming: mean 8 std 1 threshold 9.5 ceiling 12",
		"0/1 fit, 1/1 conformal (at most (alpha + ceiling alpha)·(n+1)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("sim calibrate's printout lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	out.WriteString(verifiedCalibration(t, cl))
	for _, w := range []string{"one-tick ceiling: one score above mean + 4·std of its band trips at once (quantile 3.5); ceiling alpha 0.02 over 1 episodes (seeds 2000–2001): a fresh episode trips either rule with probability at most 0.07",
		"running ticks 0 to 9 since arming: threshold 13, ceiling 18 (mean 10", "running ticks 10 on since arming: threshold 9.5, ceiling 12 (mean 8"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("bundle verify's output lacks %q:\n%s", w, out.String())
		}
	}
}

// verifiedCalibration writes cl into a test bundle and returns what
// bundle verify prints about it (failing the test unless it verifies).
func verifiedCalibration(t *testing.T, cl *calibration.ClosedLoop) string {
	t.Helper()
	dir := writeTestBundle(t)
	if _, err := writeClosedLoop(dir, cl); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", dir}, &out, &errb); code != exitOK {
		t.Fatalf("verify exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	return out.String()
}
