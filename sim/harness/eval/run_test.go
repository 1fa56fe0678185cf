package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestRunEpisodes runs two short closed-loop episodes through the whole
// stack — bridge camera → runtime → policy (the shipped bundle on ONNX
// Runtime) → safety → Modbus → Meta-World — with the evaluation command (Run).
// It checks the pipeline and the report, not the success rate: each
// episode samples with its own seed, the measured inference latency is
// reported, and an episode's normal end logs no warning.
func TestRunEpisodes(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episode")
	}
	root := harnesstest.ModuleRoot(t)
	harnesstest.RequireVenv(t, root)
	dir := t.TempDir()
	scores, summary := filepath.Join(dir, "scores.jsonl"), filepath.Join(dir, "summary.json")
	const maxSteps = 15
	out, errb, err := runEval(t, "--task", "button-press", "--episodes", "2", "--max-steps", fmt.Sprint(maxSteps),
		"--seed", "100", "--rate", "5", "--scores", scores, "--json", summary)
	if err != nil {
		t.Fatalf("sim eval: %v\n%s\n%s", err, out, errb)
	}
	for _, want := range []string{"task button-press level 0", "inference p50 ", "steps to success"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary line lacks %q:\n%s", want, out)
		}
	}
	// The harness ends every episode on purpose: no warnings for that.
	for _, line := range strings.Split(errb, "\n") {
		if (strings.Contains(line, "level=WARN") && strings.Contains(line, "by runtime: shutdown")) ||
			(strings.Contains(line, "WARNING") && strings.Contains(line, "heartbeat lapsed")) {
			t.Errorf("normal episode end logged as a warning: %s", line)
		}
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Episodes != 2 || len(s.Results) != 2 {
		t.Fatalf("want 2 episodes: %s\n%s", data, errb)
	}
	if s.MaxSteps != maxSteps {
		t.Errorf("summary max_steps = %d, want %d (scripts/evaluate.sh keeps a cell only under the same limit)", s.MaxSteps, maxSteps)
	}
	for i, r := range s.Results {
		if r.Steps < 5 || r.Steps > maxSteps {
			t.Errorf("episode %d: %d steps, want 5..%d (the bridge truncates at --max-steps)", i, r.Steps, maxSteps)
		}
		if want := uint64(100 + i); r.PolicySeed != want || r.Seed != 100+i {
			t.Errorf("episode %d: policy seed %d, scene seed %d; want both %d", i, r.PolicySeed, r.Seed, want)
		}
		if r.Inferences == 0 || r.InferP50 == nil || *r.InferP50 <= 0 {
			t.Errorf("episode %d: %d inferences, p50 %v ms: want the measured latency", i, r.Inferences, r.InferP50)
		}
		if r.End == "" {
			t.Errorf("episode %d: no end reason", i)
		}
	}
	if s.InferP50 == nil || *s.InferP50 <= 0 || s.InferP90 == nil || *s.InferP90 < *s.InferP50 {
		t.Errorf("cell inference p50 %v, p90 %v ms", s.InferP50, s.InferP90)
	}
	// at 5 Hz a period is 200 ms; the shipped 20 Hz calibration records no plan latency
	if p := s.InferP90Periods; p == nil || math.Abs(*p-*s.InferP90/200) > 1e-9 || s.PlanLateLimit != nil || s.LateEpisodes != 0 {
		t.Errorf("inference_p90_periods %v, plan_late_limit_periods %v, late_episodes %d", p, s.PlanLateLimit, s.LateEpisodes)
	}
	if s.Successes == 0 && !bytes.Contains(data, []byte(`"mean_steps_to_success": null`)) {
		t.Errorf("no success, but mean_steps_to_success is not null:\n%s", data)
	}
	lines, err := os.ReadFile(scores)
	if err != nil || bytes.Count(lines, []byte("\n")) < 10 || !bytes.Contains(lines, []byte(`"energy":`)) {
		t.Fatalf("per-tick scores missing (%v):\n%.500s", err, lines)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var tick struct {
			Episode    int     `json:"episode"`
			PolicySeed *uint64 `json:"policy_seed"`
		}
		if err := json.Unmarshal(l, &tick); err != nil || tick.PolicySeed == nil || *tick.PolicySeed != uint64(100+tick.Episode) {
			t.Fatalf("score line without the episode's policy seed (%v): %s", err, l)
		}
	}
}

// TestRunNeverArmed checks that an episode in which auto-start is
// refused on every tick is reported as never_armed, not as a step-limit
// failure: the shipped ButtonPress bundle with its recommended threshold
// set below any energy the policy can produce (and its closed-loop bands
// removed), watched with --watch energy (the default watch is its state
// term).
func TestRunNeverArmed(t *testing.T) {
	if testing.Short() {
		t.Skip("closed-loop episode")
	}
	root := harnesstest.ModuleRoot(t)
	harnesstest.RequireVenv(t, root)
	dir := t.TempDir()
	bundle := harnesstest.ShippedBundleCopy(t, "metaworld-button-press")
	mf := filepath.Join(bundle, "manifest.json")
	raw, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	cal := m["calibration"].(map[string]any)
	cal["recommended"].(map[string]any)["threshold"] = -1e6
	delete(cal, "closed_loop") // else its bands, not the recommendation, set the threshold
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.json")
	out, errb, err := runEval(t, "--bundle", bundle, "--episodes", "1", "--max-steps", "12",
		"--seed", "100", "--rate", "5", "--watch", "energy", "--json", summary)
	if err != nil {
		t.Fatalf("sim eval: %v\n%s\n%s", err, out, errb)
	}
	var s Summary
	data, err := os.ReadFile(summary)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	if err != nil || len(s.Results) != 1 {
		t.Fatalf("summary (%v):\n%s", err, data)
	}
	if r := s.Results[0]; r.End != "never_armed" || s.NeverArmed != 1 || r.StopKind != "" {
		t.Errorf("end %q, never_armed %d, stop %q: want never_armed, 1, none\n%s", r.End, s.NeverArmed, r.StopKind, errb)
	}
	if !strings.Contains(out, "never armed (auto-start refused all episode): 1") {
		t.Errorf("summary line does not say the arm never moved:\n%s", out)
	}
}

// runEval runs sim eval with args as its command line (the repository
// as ENERGYFLOW_ROOT) and returns what it printed and its error.
func runEval(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	fs := flag.NewFlagSet("sim eval", flag.ContinueOnError)
	var o Options
	o.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	root := harnesstest.ModuleRoot(t)
	t.Setenv("ENERGYFLOW_ROOT", root)
	var out, errb bytes.Buffer
	_, err = Run(context.Background(), harness.Output{Stdout: &out, Stderr: &errb}, root, &o)
	return out.String(), errb.String(), err
}
