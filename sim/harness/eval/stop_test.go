package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// The energy stop of the shipped ButtonPress bundle, end to end: the real
// bridge, the runtime, the bundle's default watch set (its state term alone,
// at its held-out q99.9). Faults are injected at 20 Hz, the rate of the
// evaluation's fault table; the level-0 check runs at the bundle's default
// rate, 10 Hz, where its plans (warm-started) land inside the period.
const (
	stopTestBundle = "metaworld-button-press"
	stopTestRateHz = 20
	// level0RateHz is the rate sim eval and the demo drive this bundle at
	// by default (docs/engines.md, "Warm starts").
	level0RateHz = 10
)

// tickLine is one line of sim eval --scores.
type tickLine struct {
	Episode int    `json:"episode"`
	Tick    int64  `json:"tick"`
	State   string `json:"state"`
}

// runStopEval runs sim eval on the shipped ButtonPress bundle at rateHz with
// no --watch, so with its default watch set, and returns the summary (its
// results with the typed stop of each episode, Result.Stop) and the
// per-tick lines by episode. It skips under -short and without the Python
// environment.
func runStopEval(t *testing.T, rateHz int, args ...string) (Summary, map[int][]tickLine) {
	t.Helper()
	if testing.Short() {
		t.Skip("closed-loop episodes")
	}
	root := harnesstest.ModuleRoot(t)
	harnesstest.RequireVenv(t, root)
	dir := t.TempDir()
	scores, summary := filepath.Join(dir, "scores.jsonl"), filepath.Join(dir, "summary.json")
	t.Setenv("ENERGYFLOW_ROOT", root)
	fs := flag.NewFlagSet("sim eval", flag.ContinueOnError)
	var o Options
	o.Register(fs)
	args = append([]string{"--bundle", filepath.Join(root, "bundles", stopTestBundle), "--task", "button-press",
		"--rate", fmt.Sprint(rateHz), "--scores", scores, "--json", summary}, args...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	s, err := Run(context.Background(), harness.Output{Stdout: &out, Stderr: &errb}, root, &o)
	if err != nil {
		t.Fatalf("sim eval: %v\n%s\n%s", err, out.String(), errb.String())
	}
	// The stop of each episode reached the harness typed: what the summary
	// reports is that stop, and its message names the score and threshold.
	for _, r := range s.Results {
		st := r.Stop()
		if st.Kind == safety.KindNone || st.Kind == safety.KindOperator {
			if r.StopKind != "" {
				t.Errorf("episode %d: stop_kind %q without a typed stop (%+v)", r.Episode, r.StopKind, st)
			}
			continue
		}
		t.Logf("episode %d: stop %s at tick %d: %s", r.Episode, st.Kind, st.Tick, st.Message)
		if r.StopKind != st.Kind.String() || r.StopTick != st.Tick || r.End != "safety_stop" || st.Message == "" {
			t.Errorf("episode %d: summary stop %q at tick %d (end %s), typed stop %+v", r.Episode, r.StopKind, r.StopTick, r.End, st)
		}
		if st.Kind == safety.KindEnergy && (r.StopScore != st.Score.String() || !strings.Contains(st.Message, st.Score.String())) {
			t.Errorf("episode %d: energy stop on %q, typed %v: %s", r.Episode, r.StopScore, st.Score, st.Message)
		}
	}
	var written Summary
	data, err := os.ReadFile(summary)
	if err == nil {
		err = json.Unmarshal(data, &written)
	}
	if err != nil {
		t.Fatalf("summary (%v):\n%s", err, data)
	}
	if want := []string{"state_energy"}; !slices.Equal(written.Watch, want) || !slices.Equal(s.Watch, want) {
		t.Errorf("the summary's watch is %q, want the default watch set %q", written.Watch, want)
	}
	raw, err := os.ReadFile(scores)
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[int][]tickLine{}
	for _, l := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var tl tickLine
		if err := json.Unmarshal(l, &tl); err != nil {
			t.Fatalf("score line %s: %v", l, err)
		}
		ticks[tl.Episode] = append(ticks[tl.Episode], tl)
	}
	return s, ticks
}

// faultOnsetTick returns the tick after whose arm write the bridge has
// taken faultStep environment steps, i.e. the tick from which the fault is
// in the simulated world. In lockstep every write with a fresh heartbeat is
// one step; each tick writes once (a command while running, a halt while
// stopped) and has one line, and arming adds one write (Enable writes the
// halt block first). Tick numbers count deadlines, so a skipped deadline
// (a slow tick) leaves a gap in them but no write. It fails when the gate
// did not arm before the onset or the episode ended before it.
func faultOnsetTick(lines []tickLine, faultStep int) (int64, error) {
	armed := -1 // the line of the tick that decided the reset: the one before the first running tick
	for i, l := range lines {
		if l.State == "RUNNING" {
			armed = i - 1
			break
		}
	}
	if armed < 0 {
		return 0, errors.New("the gate never armed")
	}
	for i, l := range lines {
		steps := i + 1
		if i >= armed {
			steps++
		}
		if steps < faultStep {
			continue
		}
		if i <= armed {
			return 0, fmt.Errorf("the fault (step %d) comes at tick %d, before the gate armed after tick %d: use a later --fault-step", faultStep, l.Tick, lines[armed].Tick)
		}
		return l.Tick, nil
	}
	return 0, fmt.Errorf("the episode ended after %d ticks, before the fault at step %d", len(lines), faultStep)
}

// hostStop reports whether a stop kind is a watchdog of the machine's own
// pace (a score, a tick or an inference too late), which a loaded
// development machine can trip whatever the arm does (docs/evaluation.md
// counts them apart as host stops).
func hostStop(kind string) bool {
	return slices.Contains([]string{"score_stale", "loop_late", "inference_deadline", "camera_stale"}, kind)
}

// TestSimEvalZeroStateStops checks that an absurd arm state stops the arm
// within 0.5 s: the arm's state reads all zeros from environment step 40
// (--fault zero_state, sim/world.py) and the energy stop, with the shipped
// bundle's default watch set, trips within 0.5 s of the fault's onset at
// the control rate. The stopping score's window (2 of 5 for state_energy,
// 3 of 5 for the policy energy) needs that many fresh scores over the
// threshold, and the first fresh score on the zeroed state comes at the
// tick after the onset at the earliest (the arm read, the re-score): with
// the policy energy's 3 of 5, before state_energy was scored every tick,
// 150–550 ms on a loaded 2-core machine, median 300 ms (docs/safety.md).
// The hand's position reading jumps to the origin with the rest, which the
// tracking monitor sees at that first tick: a tracking stop, within the
// same 0.5 s, stops the episode before the energy rule has its scores.
func TestSimEvalZeroStateStops(t *testing.T) {
	const faultStep = 40
	const maxDelay = 500 * time.Millisecond
	rec := t.TempDir()
	s, ticks := runStopEval(t, stopTestRateHz, "--episodes", "2", "--max-steps", "100", "--seed", "1000",
		"--fault", "zero_state", "--fault-step", fmt.Sprint(faultStep), "--record", rec)
	if len(s.Results) != 2 {
		t.Fatalf("%d episodes, want 2", len(s.Results))
	}
	period := time.Second / stopTestRateHz
	rule := safety.DefaultConfig().Energy.Rule.NOfM // the policy energies' window
	checked := 0
	for _, r := range s.Results {
		// n: fresh scores over the threshold the stopping score's window
		// needs (state_energy's is 2 of 5, safety.StateEnergyNOfM).
		n := safety.ScoreNOfM(r.StopScore, rule).N
		lines := ticks[r.Episode]
		if len(lines) == 0 {
			t.Fatalf("episode %d: no per-tick scores", r.Episode)
		}
		// Every environment step is a write counted by faultOnsetTick: the
		// ticks', the enable's and, at the end, the runtime's shutdown halt.
		if r.Steps > len(lines)+2 {
			t.Fatalf("episode %d: %d environment steps for %d ticks: writes the onset count misses", r.Episode, r.Steps, len(lines))
		}
		onset, err := faultOnsetTick(lines, faultStep)
		switch {
		case err != nil && hostStop(r.StopKind):
			t.Logf("episode %d: inconclusive: a host stop (%s) at tick %d: %v", r.Episode, r.StopKind, r.StopTick, err)
			continue
		case err != nil:
			t.Errorf("episode %d: ended %s (stop %q at tick %d): %v", r.Episode, r.End, r.StopKind, r.StopTick, err)
			continue
		}
		// --record: the episode, up to its trip, is on disk, complete.
		if saved, _ := filepath.Glob(filepath.Join(rec, fmt.Sprintf("button-press_%d", r.Seed), "*.hdf5")); len(saved) != 1 {
			t.Errorf("episode %d: --record saved %q, want one recording in %s", r.Episode, saved, fmt.Sprintf("button-press_%d", r.Seed))
		}
		delay := time.Duration(r.StopTick-onset) * period
		switch {
		case r.StopKind == "energy" && r.StopTick < onset+int64(n):
			// The runtime reads the zero state at tick onset+1 at the
			// earliest, and the rule needs n fresh scores over the threshold.
			t.Logf("episode %d: inconclusive: energy stop on %s at tick %d, before the zero state from tick %d could trip it (%d fresh scores): a false stop, TestSimEvalLevel0NoFalseStop's business",
				r.Episode, r.StopScore, r.StopTick, onset, n)
		case r.StopKind == "energy":
			checked++
			t.Logf("episode %d (seed %d): zero state from tick %d (step %d), energy stop on %s at tick %d: %v after the onset (%d ticks at %d Hz)",
				r.Episode, r.Seed, onset, faultStep, r.StopScore, r.StopTick, delay, r.StopTick-onset, stopTestRateHz)
			if delay > maxDelay {
				t.Errorf("episode %d: the energy stop came %v after the fault, want at most %v", r.Episode, delay, maxDelay)
			}
		case r.StopKind == "tracking":
			checked++
			t.Logf("episode %d (seed %d): zero state from tick %d (step %d), tracking stop at tick %d: %v after the onset",
				r.Episode, r.Seed, onset, faultStep, r.StopTick, delay)
			if r.StopTick <= onset || delay > maxDelay {
				t.Errorf("episode %d: the tracking stop came at tick %d, %v after the fault at tick %d; want after it and within %v", r.Episode, r.StopTick, delay, onset, maxDelay)
			}
		case hostStop(r.StopKind) && delay <= maxDelay:
			t.Logf("episode %d: inconclusive: a host stop (%s) at tick %d, %v after the fault at tick %d, before the energy stop had its 0.5 s", r.Episode, r.StopKind, r.StopTick, delay, onset)
		default:
			t.Errorf("episode %d: ended %s (stop %q at tick %d), want an energy or tracking stop within %v of the fault at tick %d", r.Episode, r.End, r.StopKind, r.StopTick, maxDelay, onset)
		}
	}
	if checked == 0 && !t.Failed() {
		t.Skip("no episode could check the stop (host or false stops, above): on a machine this loaded, 20 Hz is not kept")
	}
}

// TestSimEvalLevel0NoFalseStop checks the other side: one normal (level 0)
// episode with the shipped bundle's default watch set, at its default rate,
// ends without an energy stop. At 10 Hz its warm plans land inside the
// period, so the episode drives alike on a quiet or a loaded host; at 20 Hz
// they land periods late, the path follows the host's load, and the
// held-out q99.9 stops 2 of 50 level-0 episodes (docs/safety.md). 150 steps
// give the policy time to succeed, about twice its usual episode.
func TestSimEvalLevel0NoFalseStop(t *testing.T) {
	s, ticks := runStopEval(t, level0RateHz, "--episodes", "1", "--max-steps", "150", "--seed", "1000")
	if len(s.Results) != 1 {
		t.Fatalf("%d episodes, want 1", len(s.Results))
	}
	r := s.Results[0]
	t.Logf("level 0, seed %d: %s after %d steps (%d ticks), stop %q, %d late spells", r.Seed, r.End, r.Steps, len(ticks[r.Episode]), r.StopKind, r.LateSpells)
	switch {
	case r.StopKind == "energy" && r.LateSpells > 0:
		// The stop is calibrated at the latency its closed-loop episodes had; the
		// loop warned that its plans landed later than that (plan_late_limit): on
		// a host this loaded the arm drives paths the calibration never saw.
		t.Skipf("inconclusive: an energy stop at tick %d while the loop's plans ran past the latency the stop was calibrated at (%d late spells, %d late plans): the machine is too loaded for 20 Hz", r.StopTick, r.LateSpells, r.LatePlans)
	case r.StopKind == "energy":
		t.Errorf("a false energy stop on %s at tick %d of a level-0 episode", r.StopScore, r.StopTick)
	case r.StopKind == "tracking":
		t.Errorf("a false tracking stop at tick %d of a level-0 episode: %s", r.StopTick, r.Stop().Message)
	case hostStop(r.StopKind):
		t.Skipf("inconclusive: a host stop (%s) at tick %d ended the episode before its end: the machine is too loaded for 20 Hz", r.StopKind, r.StopTick)
	case r.End != "success" && r.End != "truncated":
		t.Errorf("the episode ended %s (stop %q at tick %d), want success or the step limit", r.End, r.StopKind, r.StopTick)
	}
}
