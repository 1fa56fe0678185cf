package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines/manifestedit"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/eval"
)

// Visited records which flags of fs the command line set (after
// fs.Parse): some checks and defaults depend on whether a flag was given.
func (c *Options) Visited(fs *flag.FlagSet) {
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
}

// Run is sim calibrate: it drives level-0 episodes through the runtime with
// the energy stop off (or reads recorded ones, --traces), fits the
// closed-loop conformal thresholds on the score the gate would have
// observed (--score: the energy, or the bundle's state term), and writes
// them into the bundle's calibration (calibration.closed_loop,
// docs/safety.md), printing what it fitted on out.Stdout. With
// --ceiling-only it adds a one-tick ceiling to the calibration at this
// rate and K, with --latency-only the plan latency of these episodes.
// Command-line mistakes are harness.UsageErrors. root is the repository;
// Visited must have been called.
func Run(ctx context.Context, out harness.Output, root string, c *Options) error {
	if c.set == nil {
		c.set = map[string]bool{}
	}
	if err := c.Prepare(root); err != nil {
		return err
	}
	var (
		traces  [][]float64
		results []eval.Result
		prov    provenance
		err     error
	)
	var ok []bool // per trace, did its episode succeed
	if c.traces != "" {
		traces, ok, prov, err = readTraces(c.traces, c.score, c.Rate)
	} else {
		traces, results, err = c.drive(ctx, out, root)
		prov = provenance{task: c.Task, steps: c.Steps, maxSteps: c.MaxSteps, seeds: [2]int{c.Seed, c.Seed + len(traces) - 1}}
		for _, r := range results {
			ok = append(ok, r.Success)
		}
	}
	if err != nil {
		return err
	}
	if c.successful {
		kept := traces[:0:0]
		for i, tr := range traces {
			if ok[i] {
				kept = append(kept, tr)
			}
		}
		fmt.Fprintf(out.Stderr, "--successful-only: %d of %d episodes succeeded and are kept\n", len(kept), len(traces))
		traces = kept
	}
	if c.ceilingOnly {
		return c.addCeiling(out, traces, prov, results)
	}
	if c.latencyOnly {
		return c.addLatency(out, prov, results)
	}
	// the window the gate judges this score with (state_energy: its own 2 of 5)
	rule := safety.ScoreNOfM(c.score, runtime.DefaultConfig().Safety.Energy.Rule.NOfM)
	cl, err := Fit(traces, FitOptions{Alpha: c.alpha, TripsPerHour: c.tripsPerHour, RateHz: c.Rate,
		Standardized: c.standardized(), N: rule.N, M: rule.M, FitEpisodes: c.fitEpisodes, Score: c.TraceScore, CeilingAlpha: c.ceilingAlpha, CeilingMin: c.ceilingMin})
	if err != nil {
		return err
	}
	cl.Task, cl.Level, cl.RateHz, cl.StepsK, cl.MaxSteps = prov.task, "0", c.Rate, prov.steps, prov.maxSteps
	cl.Seeds = prov.seeds
	cl.SuccessfulOnly = c.successful
	if cl.Ceiling != nil {
		cl.Ceiling.Seeds, cl.Ceiling.SuccessfulOnly = prov.seeds, c.successful
	}
	printClosedLoop(out.Stdout, c.BundleDir, cl, traces, rule)
	if c.traces == "" {
		cl.PlanLatency = planLatency(results, prov.seeds, calibration.PlanLatencyFromCalibration)
		printPlanLatency(out.Stdout, cl.PlanLatency, c.Rate)
	} else {
		fmt.Fprintln(out.Stdout, "plan latency not recorded (--traces): record it with sim calibrate --latency-only at this rate and K")
	}
	if err := c.writeSummary("closed_loop", cl, results); err != nil {
		return err
	}
	if c.dryRun {
		fmt.Fprintln(out.Stdout, "dry run: the bundle was not changed")
		return nil
	}
	where, err := WriteClosedLoop(c.BundleDir, cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out.Stdout, "wrote %s into %s\n", where, filepath.Join(c.BundleDir, "manifest.json"))
	return nil
}

// addLatency is sim calibrate --latency-only: it records the plan latency
// of the episodes just driven into c.base, the bundle's closed-loop
// calibration at this rate and K, measured afterwards, and keeps its
// thresholds.
func (c *Options) addLatency(out harness.Output, prov provenance, results []eval.Result) error {
	pl := planLatency(results, prov.seeds, calibration.PlanLatencyAfterwards)
	if pl == nil {
		return errors.New("no plan finished in these episodes: nothing to record")
	}
	w := out.Stdout
	fmt.Fprintf(w, "bundle %s: the closed-loop calibration of %s at %g Hz and K=%d (seeds %d–%d) is kept; ", c.BundleDir, c.base.Score, c.base.RateHz, c.base.StepsK, c.base.Seeds[0], c.base.Seeds[1])
	printPlanLatency(w, pl, c.Rate)
	if err := c.writeSummary("plan_latency", pl, results); err != nil {
		return err
	}
	if c.dryRun {
		fmt.Fprintln(w, "dry run: the bundle was not changed")
		return nil
	}
	where, err := writeManifest(c.BundleDir, func(cal *manifestedit.Object) (string, error) {
		return placeInLoop(cal, c.base.RateHz, c.base.StepsK, "plan_latency", pl)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s into %s\n", where, filepath.Join(c.BundleDir, "manifest.json"))
	return nil
}

// addCeiling is sim calibrate --ceiling-only: it fits a one-tick ceiling
// on traces (every episode the ceiling's) for c.base, the bundle's
// closed-loop calibration at the run's rate and K, prints it with what it
// and the kept window rule would have tripped on these episodes, and
// writes it into that calibration (placeCeiling) unless --dry-run.
func (c *Options) addCeiling(out harness.Output, traces [][]float64, prov provenance, results []eval.Result) error {
	cl := *c.base // the calibration the ceiling is for, without the one it may have
	cl.Ceiling = nil
	ceil, err := FitCeiling(traces, &cl, c.ceilingAlpha, c.ceilingMin)
	if err != nil {
		return err
	}
	ceil.Seeds, ceil.SuccessfulOnly = prov.seeds, c.successful
	rule := safety.NOfMConfig{N: cl.Rule.N, M: cl.Rule.M}
	w := out.Stdout
	only := ""
	if c.successful {
		only = ", the ones that succeeded"
	}
	fmt.Fprintf(w, "bundle %s: a one-tick ceiling for its closed-loop calibration of %s at %g Hz and K=%d (rule %d of %d at q %.4g, alpha %.4g, kept), fitted on %d level-0 episodes of %s (seeds %d–%d%s)\n",
		c.BundleDir, cl.Score, cl.RateHz, cl.StepsK, rule.N, rule.M, cl.Q, cl.Alpha, ceil.Episodes, prov.task, prov.seeds[0], prov.seeds[1], only)
	fmt.Fprintf(w, "ceiling alpha %.4g: q = %.4g %s; a fresh episode trips either rule with probability at most %.4g (the window's alpha + the ceiling's)\n",
		ceil.Alpha, ceil.Q, ceilingWhy(ceil), cl.Alpha+ceil.Alpha)
	for i, b := range cl.Bands {
		fmt.Fprintf(w, "  band %d (%s %d on): threshold %.6g, ceiling %.6g\n", i, cl.Unit().Noun(), b.From, b.Threshold, ceil.Level(b))
	}
	window, either := 0, 0
	for _, tr := range traces {
		window += btoi(tripsWithBands(&cl, rule, tr))
		with := cl
		with.Ceiling = ceil
		either += btoi(tripsWithBands(&with, rule, tr))
	}
	fmt.Fprintf(w, "these episodes that would have tripped: %d/%d with the window rule alone, %d/%d with the ceiling beside it\n", window, len(traces), either, len(traces))
	if err := c.writeSummary("ceiling", ceil, results); err != nil {
		return err
	}
	if c.dryRun {
		fmt.Fprintln(w, "dry run: the bundle was not changed")
		return nil
	}
	where, err := writeManifest(c.BundleDir, func(cal *manifestedit.Object) (string, error) { return placeCeiling(cal, cl.RateHz, cl.StepsK, ceil) })
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s into %s\n", where, filepath.Join(c.BundleDir, "manifest.json"))
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeSummary writes --json, when given: the fitted block under key
// ("closed_loop", or "ceiling" with --ceiling-only) and the episodes'
// evaluation summary under "episodes".
func (c *Options) writeSummary(key string, block any, results []eval.Result) error {
	if c.Summary == "" {
		return nil
	}
	s := c.Options.Summarize(results)
	data, err := json.MarshalIndent(map[string]any{key: block, "episodes": s}, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return os.WriteFile(c.Summary, data, 0o644)
}

// drive runs the calibration's level-0 episodes with the energy stop
// observing only: --episodes of them, or with --trips-per-hour as many as
// it takes for the conformal ones to add up to 1/rate running hours (2 %
// over, so that rounding cannot leave them short).
func (c *Options) drive(ctx context.Context, out harness.Output, root string) ([][]float64, []eval.Result, error) {
	c.ObserveOnly = true
	b, err := c.StartBridge(ctx, root, out.Stderr, true, c.MaxSteps, false)
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	scoreFile, closeScores, err := eval.OpenScores(c.Scores)
	if err != nil {
		return nil, nil, err
	}
	defer closeScores()
	fit := c.fitEpisodes
	if c.standardized() {
		fit = 0
	}
	needTicks := 0 // conformal running ticks to reach, with --trips-per-hour
	if c.tripsPerHour > 0 {
		needTicks = int(math.Ceil(1.02 / c.tripsPerHour * 3600 * c.Rate))
		fmt.Fprintf(out.Stderr, "driving until the conformal episodes add up to %.3g running hours (%d ticks at %g Hz) for %g false trips per hour\n",
			float64(needTicks)/c.Rate/3600, needTicks, c.Rate, c.tripsPerHour)
	}
	var traces [][]float64
	var results []eval.Result
	conformalTicks := 0
	for ep := 0; ; ep++ {
		if needTicks > 0 && ep >= fit+2 && conformalTicks >= needTicks || needTicks == 0 && ep >= c.Episodes {
			break
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("interrupted after %d episodes: nothing written", ep)
		}
		r, err := eval.RunEpisode(ctx, out, root, &c.Options, b, ep, scoreFile)
		if err != nil {
			return nil, nil, fmt.Errorf("episode %d: %w", ep, err)
		}
		fresh := freshScores(r.Trace())
		if fresh == 0 {
			return nil, nil, fmt.Errorf("episode %d (seed %d): no fresh %s score on any of its %d running ticks; nothing written", ep, r.Seed, c.score, len(r.Trace()))
		}
		traces = append(traces, r.Trace())
		results = append(results, r)
		if ep >= fit {
			conformalTicks += len(r.Trace())
		}
		fmt.Fprintf(out.Stderr, "episode %d seed %d: success=%v steps=%d running ticks=%d fresh scores=%d\n", ep, r.Seed, r.Success, r.Steps, len(r.Trace()), fresh)
	}
	return traces, results, nil
}

// provenance is where a calibration's traces come from.
type provenance struct {
	task            string // the task, or the tasks of recorded traces, comma-separated
	steps, maxSteps int    // K and the step limit; 0 when recorded traces differ in them
	seeds           [2]int // the first and last episode seed
}
