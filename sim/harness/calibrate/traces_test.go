package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

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
	// The whole command (Run) on them: --successful-only keeps the one episode that succeeded.
	bdir := harnesstest.ShippedBundleCopy(t, "metaworld-button-press")
	out, errb, err := runCalibrate(t, "--bundle", bdir, "--score", "state_energy", "--alpha", "0.5", "--rate", "20",
		"--traces", good, "--successful-only", "--dry-run")
	if err != nil || !strings.Contains(errb, "1 of 2 episodes succeeded and are kept") ||
		!strings.Contains(out, "closed-loop calibration on 1 level-0 episodes of button-press (seeds 3000–3001") {
		t.Errorf("sim calibrate --traces --successful-only: %v\n%s\n%s", err, out, errb)
	}
	// With a one-tick ceiling: fitted on the same episodes, printed beside the threshold.
	out, errb, err = runCalibrate(t, "--bundle", bdir, "--score", "state_energy", "--alpha", "0.5", "--ceiling-alpha", "0.5", "--rate", "20",
		"--traces", good, "--dry-run")
	if err != nil || !strings.Contains(out, "one-tick ceiling: ceiling alpha 0.5: q = 3 (the episodes' conformal quantile); a fresh episode trips either rule with probability at most 1") ||
		!strings.Contains(out, "threshold 1 ceiling 3") {
		t.Errorf("sim calibrate --traces --ceiling-alpha: %v\n%s\n%s", err, out, errb)
	}
	// --ceiling-only adds a ceiling to the bundle's calibration at the rate and K, keeping the rest of it.
	before, err := engines.LoadBundle(bdir)
	if err != nil {
		t.Fatal(err)
	}
	out, errb, err = runCalibrate(t, "--bundle", bdir, "--score", "energy", "--ceiling-only", "--ceiling-alpha", "0.5", "--rate", "20", "--steps", "20",
		"--traces", good)
	if err != nil || !strings.Contains(out, "(rule 3 of 5 at q 2.522, alpha 0.1, kept), fitted on 2 level-0 episodes of button-press (seeds 3000–3001)") ||
		!strings.Contains(out, "wrote calibration.closed_loop.ceiling into") {
		t.Fatalf("sim calibrate --ceiling-only: %v\n%s\n%s", err, out, errb)
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
	out, errb, err = runCalibrate(t, "--bundle", bdir, "--score", "energy", "--ceiling-only", "--ceiling-alpha", "0.5", "--ceiling-min", "40", "--rate", "20", "--steps", "20",
		"--traces", good, "--dry-run")
	if err != nil || !strings.Contains(out, "q = 40 (the floor --ceiling-min; the episodes' quantile is") {
		t.Fatalf("sim calibrate --ceiling-min: %v\n%s\n%s", err, out, errb)
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
		{[]string{"--delay", "2", "--dry-run"}, "--delay 2 with --traces: the traces were driven already"},
	} {
		args := append([]string{"--bundle", bdir, "--traces", good}, tc.args...)
		var u harness.UsageError
		if _, _, err := runCalibrate(t, args...); !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error with %q", tc.args, err, tc.want)
		}
	}
	if _, _, _, err := readTraces(good, "centered", 20); err == nil || !strings.Contains(err.Error(), "want a sim eval --scores line with episode, state and centered") {
		t.Errorf("a score the lines lack: %v", err)
	}
}

// runCalibrate runs sim calibrate with args as its command line and
// returns what it printed and its error.
func runCalibrate(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	fs := flag.NewFlagSet("sim calibrate", flag.ContinueOnError)
	var o Options
	o.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.Visited(fs)
	root := harnesstest.ModuleRoot(t)
	t.Setenv("ENERGYFLOW_ROOT", root)
	var out, errb bytes.Buffer
	err = Run(context.Background(), harness.Output{Stdout: &out, Stderr: &errb}, root, &o)
	return out.String(), errb.String(), err
}
