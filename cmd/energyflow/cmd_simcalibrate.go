package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/manifestedit"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness/calibrate"
)

// defaultCalibrateSeed is sim calibrate's first episode seed: apart from the
// demonstrations (0–199) and the evaluation's scenes (1000–1049), so the
// evaluation checks the calibrated false-alarm level on fresh seeds.
const defaultCalibrateSeed = 2000

// calibrateFlags are sim calibrate's flags: the evaluation's episode flags
// (task, bundle, rate, K, step limit) plus the conformal level.
type calibrateFlags struct {
	evalFlags
	alpha        float64
	ceilingAlpha float64 // > 0: also fit a one-tick ceiling at this level
	ceilingMin   float64 // the ceiling's floor (0: none)
	ceilingOnly  bool    // add a ceiling to the bundle's calibration at this rate and K, keeping its window rule
	latencyOnly  bool    // record the plan latency of these episodes into the bundle's calibration at this rate and K
	tripsPerHour float64 // > 0: certify this false-trip rate per running hour instead of alpha
	traces       string  // comma-separated sim eval --scores files to fit on instead of driving
	successful   bool    // fit on the episodes that succeeded only
	fitEpisodes  int     // episodes that fit the bands' mean and std; the rest set q
	dryRun       bool    // fit and report, leave the bundle alone
	score        string  // the score the bands are fitted on: energy or state_energy
	set          map[string]bool
	base         *calibration.ClosedLoop // with ceilingOnly or latencyOnly: the calibration added to
}

// standardized: the state score is a z-score of held-out demonstration
// steps with no start transient of its own (it does not depend on the
// sampler), so it is calibrated as one band, every episode conformal; bands
// in time would make the threshold depend on when a fault comes.
func (c *calibrateFlags) standardized() bool { return c.score == engines.ScoreStateEnergy }

// calibrateScores are the scores sim calibrate fits bands on.
const calibrateScores = "energy state_energy"

func (c *calibrateFlags) register(fs *flag.FlagSet) {
	c.evalFlags.register(fs)
	// The evaluation's defaults, changed where calibration differs.
	c.episodes, c.seed = 40, defaultCalibrateSeed
	fs.Lookup("episodes").DefValue = "40"
	fs.Lookup("episodes").Usage = "level-0 episodes to calibrate on (fit + conformal)"
	fs.Lookup("seed").DefValue = fmt.Sprint(defaultCalibrateSeed)
	fs.Lookup("seed").Usage = "first episode seed (scene and sampler); apart from the demonstrations' 0–199 and the evaluation's 1000–1049"
	fs.Float64Var(&c.alpha, "alpha", 0.1, "false-alarm level: a fresh level-0 episode trips the energy stop with probability at most alpha")
	fs.Float64Var(&c.ceilingAlpha, "ceiling-alpha", 0, "also fit a one-tick ceiling: one score above it trips at once (an absurd state at its first tick); a fresh level-0 episode exceeds it with probability at most this, so either rule trips with at most alpha + this (0: no ceiling)")
	fs.Float64Var(&c.ceilingMin, "ceiling-min", 0, "the ceiling's floor, in the score's band standard deviations (the state score's own units): the ceiling is the larger of its fitted quantile, the window's q and this; its alpha holds at any higher level, and a ceiling meant for absurd readings is best kept well above the episodes' own (0: none)")
	fs.BoolVar(&c.ceilingOnly, "ceiling-only", false, "add a one-tick ceiling (--ceiling-alpha) to the bundle's closed-loop calibration of --score at this --rate and K, fitted on these episodes (all of them conformal); its window rule, q and bands are kept")
	fs.BoolVar(&c.latencyOnly, "latency-only", false, "record how long the plans of these episodes took (plan_latency, measured \"afterwards\") into the bundle's closed-loop calibration at this --rate and K, for one that does not record its own: the runtime warns when its plans land later than that (loop.plan_late_limit); the thresholds are kept")
	fs.IntVar(&c.fitEpisodes, "fit-episodes", 0, "episodes that fit each band's mean and std (0: half of --episodes); the others set the conformal quantile")
	fs.BoolVar(&c.dryRun, "dry-run", false, "fit and print the calibration without writing it into the bundle")
	fs.StringVar(&c.score, "score", "energy", "the score to fit the bands on: energy, or state_energy (the bundle's state term, docs/safety.md; one band, every episode conformal)")
	fs.Float64Var(&c.tripsPerHour, "trips-per-hour", 0, "certify a false-trip rate per running hour instead of --alpha: drives level-0 episodes until the conformal ones add up to 1/RATE hours (e.g. 1: an hour), or fits on --traces")
	fs.BoolVar(&c.successful, "successful-only", false, "fit on the level-0 episodes that succeeded only (as FIPER calibrates on successful rollouts): alpha then bounds the trips of episodes that would succeed, and a failing episode may trip more often")
	fs.StringVar(&c.traces, "traces", "", "fit on recorded level-0 traces instead of driving: comma-separated `sim eval --observe-only --scores` files (each with its --json summary beside it as FILE.json without the l), e.g. from research/stop/level0_hours.sh")
}

// prepare checks every flag before the bridge starts: a calibration that
// cannot certify alpha is refused before minutes of episodes are spent.
func (c *calibrateFlags) prepare(root string) error {
	var errs []error
	if c.level != "0" {
		errs = append(errs, usageError{fmt.Errorf("--level %s: calibration drives level-0 (in-distribution) episodes; drop --level", c.level)})
	}
	if c.fault != "" {
		errs = append(errs, usageError{fmt.Errorf("--fault %s: calibration drives episodes without faults; drop --fault", c.fault)})
	}
	perHour := c.tripsPerHour != 0
	switch {
	case perHour && c.set["alpha"]:
		errs = append(errs, usageError{fmt.Errorf("--alpha %v with --trips-per-hour %v: give one false-alarm level, per episode or per hour", c.alpha, c.tripsPerHour)})
	case perHour && !(c.tripsPerHour > 0 && !math.IsInf(c.tripsPerHour, 0)):
		errs = append(errs, usageError{fmt.Errorf("--trips-per-hour %v: must be a number > 0, e.g. 1", c.tripsPerHour)})
	case !perHour && !(c.alpha > 0 && c.alpha < 1):
		errs = append(errs, usageError{fmt.Errorf("--alpha %v: must be in (0, 1), e.g. 0.1", c.alpha)})
	}
	if c.set["ceiling-alpha"] && !(c.ceilingAlpha > 0 && c.ceilingAlpha < 1) {
		errs = append(errs, usageError{fmt.Errorf("--ceiling-alpha %v: must be in (0, 1), e.g. 0.02 (or leave it out: no ceiling)", c.ceilingAlpha)})
	}
	if c.set["ceiling-min"] && !c.set["ceiling-alpha"] {
		errs = append(errs, usageError{fmt.Errorf("--ceiling-min %v without --ceiling-alpha: the floor is for a one-tick ceiling; add --ceiling-alpha, e.g. 0.025", c.ceilingMin)})
	} else if c.ceilingMin < 0 || math.IsNaN(c.ceilingMin) || math.IsInf(c.ceilingMin, 0) {
		errs = append(errs, usageError{fmt.Errorf("--ceiling-min %v: must be a finite number ≥ 0", c.ceilingMin)})
	}
	if c.ceilingOnly {
		for _, f := range []string{"alpha", "trips-per-hour", "fit-episodes"} {
			if c.set[f] {
				errs = append(errs, usageError{fmt.Errorf("--%s with --ceiling-only: the calibration's window rule is kept as it is; give --ceiling-alpha only", f)})
			}
		}
		if !c.set["ceiling-alpha"] {
			errs = append(errs, usageError{errors.New("--ceiling-only needs --ceiling-alpha, e.g. 0.02: the tolerated probability that a fresh level-0 episode has one score above the ceiling")})
		}
	}
	if c.latencyOnly {
		for _, f := range []string{"alpha", "trips-per-hour", "fit-episodes", "ceiling-alpha", "ceiling-min", "ceiling-only", "traces", "successful-only"} {
			if c.set[f] {
				errs = append(errs, usageError{fmt.Errorf("--%s with --latency-only: it records how late these episodes' plans land and leaves the thresholds alone; drop --%s", f, f)})
			}
		}
	}
	if c.traces != "" && c.set["episodes"] {
		errs = append(errs, usageError{fmt.Errorf("--episodes %d with --traces: the traces' episodes are the calibration's; drop --episodes", c.episodes)})
	}
	if c.episodes < 2 && c.traces == "" {
		errs = append(errs, usageError{fmt.Errorf("--episodes %d: must be at least 2 (fit and conformal episodes)", c.episodes)})
	}
	if sc, err := oneOf("--score", "score to calibrate", c.score, calibrateScores, strings.ToLower); err != nil {
		errs = append(errs, err)
	} else {
		c.score = sc
		c.traceScore, _ = safety.ParseScore(sc)
	}
	halves := c.fitEpisodes == 0 // the default split: half fit, half conformal
	switch {
	case c.standardized() && c.set["fit-episodes"]:
		errs = append(errs, usageError{fmt.Errorf("--fit-episodes %d with --score state_energy: the state score is standardized and calibrated as one band, every episode conformal; drop --fit-episodes", c.fitEpisodes)})
	case c.standardized():
		c.fitEpisodes = 0
	case halves && c.traces == "":
		c.fitEpisodes = c.episodes / 2
	}
	if !c.standardized() && c.traces == "" && (c.fitEpisodes < 1 || c.fitEpisodes >= c.episodes) {
		errs = append(errs, usageError{fmt.Errorf("--fit-episodes %d: must be in 1..%d (fewer than --episodes %d)", c.fitEpisodes, c.episodes-1, c.episodes)})
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fit := c.fitEpisodes
	if c.standardized() {
		fit = 0
	}
	if need := calibrate.MinConformalEpisodes(c.alpha); !perHour && !c.ceilingOnly && !c.latencyOnly && c.traces == "" && c.episodes-fit < need {
		if c.standardized() {
			return usageError{fmt.Errorf("--episodes %d cannot certify --alpha %v: the state score needs at least %d conformal episodes (pass --episodes %d, or a larger --alpha)",
				c.episodes, c.alpha, need, need)}
		}
		enough := c.fitEpisodes + need
		if halves {
			enough = 2 * need
		}
		return usageError{fmt.Errorf("--episodes %d with --fit-episodes %d leaves %d conformal episodes, which cannot certify --alpha %v: need at least %d (pass --episodes %d, or a larger --alpha)",
			c.episodes, c.fitEpisodes, c.episodes-c.fitEpisodes, c.alpha, need, enough)}
	}
	if c.ceilingOnly {
		fit = 0 // every episode is the ceiling's
	}
	if need := calibrate.MinConformalEpisodes(c.ceilingAlpha); c.ceilingAlpha > 0 && c.traces == "" && c.episodes-fit < need {
		return usageError{fmt.Errorf("--episodes %d leaves %d conformal episodes, which cannot certify --ceiling-alpha %v: need at least %d conformal episodes (or a larger --ceiling-alpha)",
			c.episodes, c.episodes-fit, c.ceilingAlpha, need)}
	}
	if err := c.evalFlags.prepare(root); err != nil {
		return err
	}
	b, err := engines.LoadBundle(c.bundleDir)
	if err != nil {
		return err
	}
	switch m := &b.Manifest; {
	case c.score == engines.ScoreStateEnergy && !m.HasStateEnergy():
		return usageError{fmt.Errorf("--score state_energy: bundle %s has no state term (no \"state_energy\" block in its manifest): train one (python -m energyflow state-term --bundle %s --data D.hdf5) or calibrate --score energy", c.bundleDir, c.bundleDir)}
	case c.score == engines.ScoreEnergy && !m.HasEnergy() && m.HasStateEnergy():
		return usageError{fmt.Errorf("bundle %s is a %q policy: it has no energy to calibrate; calibrate its state term with --score state_energy", c.bundleDir, m.Policy)}
	case c.score == engines.ScoreEnergy && !m.HasEnergy():
		return usageError{fmt.Errorf("bundle %s is a %q policy: it has no energy to calibrate (the energy stop is off for it)", c.bundleDir, m.Policy)}
	}
	if c.steps == 0 {
		c.steps = b.Manifest.Sampler.Steps
	}
	if c.latencyOnly {
		cl, ok := b.Manifest.Calibration.ClosedLoopFor(c.rate, c.steps)
		if !ok || cl.RateHz != c.rate || cl.StepsK != c.steps {
			return usageError{fmt.Errorf("--latency-only: bundle %s has no closed-loop calibration at %g Hz and K=%d to record the plan latency into: calibrate one (sim calibrate --rate %g --steps %d), which records its own",
				c.bundleDir, c.rate, c.steps, c.rate, c.steps)}
		}
		c.base = cl
		return nil
	}
	if c.ceilingOnly {
		cl, ok := b.Manifest.Calibration.ClosedLoopFor(c.rate, c.steps)
		if !ok || cl.Score != c.score || cl.RateHz != c.rate || cl.StepsK != c.steps {
			return usageError{fmt.Errorf("--ceiling-only: bundle %s has no closed-loop calibration of %s at %g Hz and K=%d to add a ceiling to: calibrate one first (sim calibrate --score %s --rate %g --steps %d), with --ceiling-alpha to fit both at once",
				c.bundleDir, c.score, c.rate, c.steps, c.score, c.rate, c.steps)}
		}
		c.base = cl
		return nil
	}
	if !c.dryRun {
		return checkCalibratable(c.bundleDir, c.score, c.rate, c.steps)
	}
	return nil
}

// cmdSimCalibrate drives level-0 episodes through the runtime with the energy
// stop off, fits the closed-loop conformal thresholds on the score the gate
// would have observed (--score: the energy, or the bundle's state term), and
// writes them into the bundle's calibration (calibration.closed_loop,
// docs/safety.md).
func cmdSimCalibrate(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim calibrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c calibrateFlags
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	fail := func(err error) int { return report(env, "energyflow sim calibrate", err) }
	root, err := projectRoot()
	if err != nil {
		return fail(err)
	}
	if err := c.prepare(root); err != nil {
		return fail(err)
	}
	var (
		traces  [][]float64
		results []evalResult
		prov    provenance
	)
	var ok []bool // per trace, did its episode succeed
	if c.traces != "" {
		traces, ok, prov, err = readTraces(c.traces, c.score, c.rate)
	} else {
		traces, results, err = c.drive(ctx, env, root)
		prov = provenance{task: c.task, steps: c.steps, maxSteps: c.maxSteps, seeds: [2]int{c.seed, c.seed + len(traces) - 1}}
		for _, r := range results {
			ok = append(ok, r.Success)
		}
	}
	if err != nil {
		return fail(err)
	}
	if c.successful {
		kept := traces[:0:0]
		for i, tr := range traces {
			if ok[i] {
				kept = append(kept, tr)
			}
		}
		fmt.Fprintf(env.stderr, "--successful-only: %d of %d episodes succeeded and are kept\n", len(kept), len(traces))
		traces = kept
	}
	if c.ceilingOnly {
		return c.addCeiling(env, traces, prov, results, fail)
	}
	if c.latencyOnly {
		return c.addLatency(env, prov, results, fail)
	}
	// the window the gate judges this score with (state_energy: its own 2 of 5)
	rule := safety.ScoreNOfM(c.score, runtime.DefaultConfig().Safety.Energy.Rule.NOfM)
	cl, err := calibrate.Fit(traces, calibrate.FitOptions{Alpha: c.alpha, TripsPerHour: c.tripsPerHour, RateHz: c.rate,
		Standardized: c.standardized(), N: rule.N, M: rule.M, FitEpisodes: c.fitEpisodes, Score: c.traceScore, CeilingAlpha: c.ceilingAlpha, CeilingMin: c.ceilingMin})
	if err != nil {
		return fail(err)
	}
	cl.Task, cl.Level, cl.RateHz, cl.StepsK, cl.MaxSteps = prov.task, "0", c.rate, prov.steps, prov.maxSteps
	cl.Seeds = prov.seeds
	cl.SuccessfulOnly = c.successful
	if cl.Ceiling != nil {
		cl.Ceiling.Seeds, cl.Ceiling.SuccessfulOnly = prov.seeds, c.successful
	}
	printClosedLoop(env.stdout, c.bundleDir, cl, traces, rule)
	if c.traces == "" {
		cl.PlanLatency = planLatency(results, prov.seeds, calibration.PlanLatencyFromCalibration)
		printPlanLatency(env.stdout, cl.PlanLatency, c.rate)
	} else {
		fmt.Fprintln(env.stdout, "plan latency not recorded (--traces): record it with sim calibrate --latency-only at this rate and K")
	}
	if err := c.writeSummary("closed_loop", cl, results); err != nil {
		return fail(err)
	}
	if c.dryRun {
		fmt.Fprintln(env.stdout, "dry run: the bundle was not changed")
		return exitOK
	}
	where, err := writeClosedLoop(c.bundleDir, cl)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(env.stdout, "wrote %s into %s\n", where, filepath.Join(c.bundleDir, "manifest.json"))
	return exitOK
}

// planLatency summarizes every plan latency of results (nil: none).
func planLatency(results []evalResult, seeds [2]int, measured string) *calibration.PlanLatency {
	var ms []float64
	for _, r := range results {
		ms = append(ms, r.inferMs...)
	}
	if len(ms) == 0 {
		return nil
	}
	return &calibration.PlanLatency{P50Ms: *quantile(ms, 0.5), P90Ms: *quantile(ms, 0.9), Plans: len(ms),
		Episodes: len(results), Seeds: seeds, Measured: measured}
}

// printPlanLatency prints pl and the lateness limit the runtime derives
// from it at rateHz.
func printPlanLatency(w io.Writer, pl *calibration.PlanLatency, rateHz float64) {
	if pl == nil {
		fmt.Fprintln(w, "plan latency: no plan finished, nothing recorded")
		return
	}
	p := pl.P90Ms / 1000 * rateHz
	fmt.Fprintf(w, "plan latency over %d plans of %d episodes: p50 %.4g ms, p90 %.4g ms = %.2f periods at %g Hz; the runtime warns when its recent plans' p90 passes %.2f periods\n",
		pl.Plans, pl.Episodes, pl.P50Ms, pl.P90Ms, p, rateHz, p+runtime.PlanLateMargin)
}

// addLatency is sim calibrate --latency-only: it records the plan latency
// of the episodes just driven into c.base, the bundle's closed-loop
// calibration at this rate and K, measured afterwards, and keeps its
// thresholds.
func (c *calibrateFlags) addLatency(env *cliEnv, prov provenance, results []evalResult, fail func(error) int) int {
	pl := planLatency(results, prov.seeds, calibration.PlanLatencyAfterwards)
	if pl == nil {
		return fail(errors.New("no plan finished in these episodes: nothing to record"))
	}
	w := env.stdout
	fmt.Fprintf(w, "bundle %s: the closed-loop calibration of %s at %g Hz and K=%d (seeds %d–%d) is kept; ", c.bundleDir, c.base.Score, c.base.RateHz, c.base.StepsK, c.base.Seeds[0], c.base.Seeds[1])
	printPlanLatency(w, pl, c.rate)
	if err := c.writeSummary("plan_latency", pl, results); err != nil {
		return fail(err)
	}
	if c.dryRun {
		fmt.Fprintln(w, "dry run: the bundle was not changed")
		return exitOK
	}
	where, err := writeManifest(c.bundleDir, func(cal *manifestedit.Object) (string, error) {
		return placeInLoop(cal, c.base.RateHz, c.base.StepsK, "plan_latency", pl)
	})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "wrote %s into %s\n", where, filepath.Join(c.bundleDir, "manifest.json"))
	return exitOK
}

// writeSummary writes --json, when given: the fitted block under key
// ("closed_loop", or "ceiling" with --ceiling-only) and the episodes'
// evaluation summary under "episodes".
func (c *calibrateFlags) writeSummary(key string, block any, results []evalResult) error {
	if c.summary == "" {
		return nil
	}
	s := summarize(c.simFlags, results, map[string]int{})
	s.MaxSteps = c.maxSteps
	data, err := json.MarshalIndent(map[string]any{key: block, "episodes": s}, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return os.WriteFile(c.summary, data, 0o644)
}

// drive runs the calibration's level-0 episodes with the energy stop
// observing only: --episodes of them, or with --trips-per-hour as many as
// it takes for the conformal ones to add up to 1/rate running hours (2 %
// over, so that rounding cannot leave them short).
func (c *calibrateFlags) drive(ctx context.Context, env *cliEnv, root string) ([][]float64, []evalResult, error) {
	c.observeOnly = true
	b, err := startSimBridge(ctx, env, root, &c.simFlags, true, c.maxSteps, false)
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	scoreFile, closeScores, err := createScores(c.scores)
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
		needTicks = int(math.Ceil(1.02 / c.tripsPerHour * 3600 * c.rate))
		fmt.Fprintf(env.stderr, "driving until the conformal episodes add up to %.3g running hours (%d ticks at %g Hz) for %g false trips per hour\n",
			float64(needTicks)/c.rate/3600, needTicks, c.rate, c.tripsPerHour)
	}
	var traces [][]float64
	var results []evalResult
	conformalTicks := 0
	for ep := 0; ; ep++ {
		if needTicks > 0 && ep >= fit+2 && conformalTicks >= needTicks || needTicks == 0 && ep >= c.episodes {
			break
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("interrupted after %d episodes: nothing written", ep)
		}
		r, err := evalEpisode(ctx, env, root, &c.evalFlags, b, ep, scoreFile)
		if err != nil {
			return nil, nil, fmt.Errorf("episode %d: %w", ep, err)
		}
		fresh := freshScores(r.trace)
		if fresh == 0 {
			return nil, nil, fmt.Errorf("episode %d (seed %d): no fresh %s score on any of its %d running ticks; nothing written", ep, r.Seed, c.score, len(r.trace))
		}
		traces = append(traces, r.trace)
		results = append(results, r)
		if ep >= fit {
			conformalTicks += len(r.trace)
		}
		fmt.Fprintf(env.stderr, "episode %d seed %d: success=%v steps=%d running ticks=%d fresh scores=%d\n", ep, r.Seed, r.Success, r.Steps, len(r.trace), fresh)
	}
	return traces, results, nil
}

// provenance is where a calibration's traces come from.
type provenance struct {
	task            string // the task, or the tasks of recorded traces, comma-separated
	steps, maxSteps int    // K and the step limit; 0 when recorded traces differ in them
	seeds           [2]int // the first and last episode seed
}

// readTraces reads recorded level-0 traces for sim calibrate --traces:
// each comma-separated FILE is a `sim eval --scores` file, FILE's --json
// summary (FILE less its final "l": x.jsonl → x.json) beside it says what
// was driven. Each episode's trace is the score of every RUNNING tick after
// the one that armed the gate, NaN without a fresh score, as sim calibrate
// records it while driving. Faulted or shifted episodes, or a control rate
// other than rate, are refused. ok says, per trace, whether its episode
// succeeded (the summary's results, in episode order).
func readTraces(list, score string, rate float64) ([][]float64, []bool, provenance, error) {
	var (
		traces [][]float64
		ok     []bool
		p      = provenance{seeds: [2]int{math.MaxInt, math.MinInt}}
		tasks  []string
		first  = true
	)
	for _, path := range strings.Split(list, ",") {
		path = strings.TrimSpace(path)
		sumPath := strings.TrimSuffix(path, "l")
		if sumPath == path || !strings.HasSuffix(sumPath, ".json") {
			return nil, nil, p, usageError{fmt.Errorf("--traces %s: expected a .jsonl per-tick scores file (sim eval --scores) with its .json summary beside it", path)}
		}
		var sum evalSummary
		raw, err := os.ReadFile(sumPath)
		if err == nil {
			err = json.Unmarshal(raw, &sum)
		}
		if err != nil {
			return nil, nil, p, fmt.Errorf("--traces %s: its summary %s: %w", path, sumPath, err)
		}
		switch {
		case sum.Level != "0":
			return nil, nil, p, usageError{fmt.Errorf("--traces %s: level %s, calibration needs level-0 (in-distribution) episodes", path, sum.Level)}
		case sum.RateHz != 0 && sum.RateHz != rate:
			return nil, nil, p, usageError{fmt.Errorf("--traces %s: recorded at %g Hz, not --rate %g", path, sum.RateHz, rate)}
		}
		for _, r := range sum.Results {
			if r.Fault != "" {
				return nil, nil, p, usageError{fmt.Errorf("--traces %s: episode %d has the fault %s, calibration needs episodes without faults", path, r.Episode, r.Fault)}
			}
		}
		eps, err := readScoreLines(path, score)
		if err != nil {
			return nil, nil, p, err
		}
		if len(eps) != sum.Episodes {
			return nil, nil, p, fmt.Errorf("--traces %s: %d episodes of scores, its summary says %d", path, len(eps), sum.Episodes)
		}
		traces = append(traces, eps...)
		for i := range eps {
			ok = append(ok, i < len(sum.Results) && sum.Results[i].Success)
		}
		if !slices.Contains(tasks, sum.Task) {
			tasks = append(tasks, sum.Task)
		}
		if first {
			p.steps, p.maxSteps, first = sum.Steps, sum.MaxSteps, false
		}
		if sum.Steps != p.steps {
			p.steps = 0
		}
		if sum.MaxSteps != p.maxSteps {
			p.maxSteps = 0
		}
		for _, r := range sum.Results {
			p.seeds[0], p.seeds[1] = min(p.seeds[0], r.Seed), max(p.seeds[1], r.Seed)
		}
	}
	p.task = strings.Join(tasks, ",")
	return traces, ok, p, nil
}

// readScoreLines is the per-episode traces of score in a sim eval --scores
// file, in episode order (see readTraces).
func readScoreLines(path, score string) ([][]float64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--traces: %w", err)
	}
	defer fh.Close()
	var (
		out        [][]float64
		cur        = -1
		wasRunning bool
	)
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("--traces %s:%d: %w", path, n, err)
		}
		ep, ok := l["episode"].(float64)
		st, ok2 := l["state"].(string)
		x, has := l[score]
		if !ok || !ok2 || !has {
			return nil, fmt.Errorf("--traces %s:%d: want a sim eval --scores line with episode, state and %s", path, n, score)
		}
		if int(ep) != cur {
			cur, wasRunning = int(ep), false
			out = append(out, nil)
		}
		v := math.NaN()
		if f, ok := x.(float64); ok {
			v = f
		}
		running := st == safety.Running.String()
		if running && wasRunning {
			out[len(out)-1] = append(out[len(out)-1], v)
		}
		wasRunning = running
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--traces %s: %w", path, err)
	}
	return out, nil
}

// freshScores counts the fresh scores of a per-tick trace (its finite
// entries; NaN: a running tick without one).
func freshScores(trace []float64) int {
	n := 0
	for _, x := range trace {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// printClosedLoop prints the fitted thresholds and how many calibration
// episodes each part would have tripped with them.
func printClosedLoop(w io.Writer, bundle string, cl *calibration.ClosedLoop, traces [][]float64, rule safety.NOfMConfig) {
	split := fmt.Sprintf("%d fit the bands, %d set q", cl.FitEpisodes, cl.ConformalEpisodes)
	if cl.FitEpisodes == 0 {
		split = fmt.Sprintf("one band (the score is standardized), %d set q", cl.ConformalEpisodes)
	}
	fmt.Fprintf(w, "bundle %s: closed-loop calibration on %d level-0 episodes of %s (seeds %d–%d, %g Hz, K=%d): %s; score %s\n",
		bundle, cl.Episodes, cl.Task, cl.Seeds[0], cl.Seeds[1], cl.RateHz, cl.StepsK, split, cl.Score)
	if cl.TripsPerHour > 0 {
		fmt.Fprintf(w, "certified for %g false trips per running hour: the %d conformal episodes ran %.3g h, so alpha = %.4g per episode\n",
			cl.TripsPerHour, cl.ConformalEpisodes, cl.ConformalHours, cl.Alpha)
	}
	if cl.FitEpisodes == 0 {
		fmt.Fprintf(w, "rule %d of the last %d scores over the threshold; alpha %.4g: q = %.4g, the threshold in the score's own units\n", rule.N, rule.M, cl.Alpha, cl.Q)
	} else {
		fmt.Fprintf(w, "rule %d of the last %d scores over the band's threshold; alpha %.4g: q = %.4g band stds\n", rule.N, rule.M, cl.Alpha, cl.Q)
	}
	ticks, fresh := 0, 0
	for _, tr := range traces {
		ticks += len(tr)
		fresh += freshScores(tr)
	}
	fmt.Fprintf(w, "bands by %s since arming (band_unit %s); %d fresh scores on %d running ticks (%.2f per tick)\n",
		cl.Unit().Noun(), cl.Unit(), fresh, ticks, float64(fresh)/float64(max(ticks, 1)))
	if c := cl.Ceiling; c != nil {
		fmt.Fprintf(w, "one-tick ceiling: ceiling alpha %.4g: q = %.4g %s; a fresh episode trips either rule with probability at most %.4g\n", c.Alpha, c.Q, ceilingWhy(c), cl.Alpha+c.Alpha)
	}
	for i, b := range cl.Bands {
		to := "on"
		if i+1 < len(cl.Bands) {
			to = fmt.Sprintf("to %d", cl.Bands[i+1].From-1)
		}
		ceil := ""
		if c := cl.Ceiling; c != nil {
			ceil = fmt.Sprintf(" ceiling %.6g", c.Level(b))
		}
		fmt.Fprintf(w, "  %s %d %s since arming: mean %.6g std %.4g threshold %.6g%s\n", cl.Unit().Noun(), b.From, to, b.Mean, b.Std, b.Threshold, ceil)
	}
	fit, conf := 0, 0
	for i, tr := range traces {
		if tripsWithBands(cl, rule, tr) {
			if i < cl.FitEpisodes {
				fit++
			} else {
				conf++
			}
		}
	}
	bound := "alpha"
	if cl.Ceiling != nil {
		bound = "(alpha + ceiling alpha)"
	}
	fmt.Fprintf(w, "episodes that would have tripped: %d/%d fit, %d/%d conformal (at most %s·(n+1) by construction)\n",
		fit, cl.FitEpisodes, conf, cl.ConformalEpisodes, bound)
}

// tripsWithBands replays one trace through the n-of-m rule with the fitted
// band thresholds, and the one-tick ceiling when cl has one.
func tripsWithBands(cl *calibration.ClosedLoop, rule safety.NOfMConfig, trace []float64) bool {
	score, _ := safety.ParseScore(cl.Score)
	th := safety.Threshold{Score: score, Value: cl.Bands[0].Threshold, Bands: cl.Bands, BandUnit: cl.Unit(), Ceiling: cl.Ceiling}
	trips, err := safety.Replay(safety.RuleConfig{Kind: safety.RuleNOfM, NOfM: rule}, th, trace)
	return err == nil && len(trips) > 0
}

// writeClosedLoop writes cl, with the plan latency of its driving when it
// records one, into the bundle's manifest.json (where: placeClosedLoop) and
// leaves every other byte of meaning alone: keys keep their order, numbers
// their text (the manifest's file hashes do not cover manifest.json
// itself). It returns where cl went.
func writeClosedLoop(bundle string, cl *calibration.ClosedLoop) (string, error) {
	return writeManifest(bundle, func(cal *manifestedit.Object) (string, error) { return placeClosedLoop(cal, cl) })
}

// writeManifest writes the bundle's manifest.json with its calibration
// object edited by place (calibratedManifest), atomically, and returns
// where place said it wrote.
func writeManifest(bundle string, place func(cal *manifestedit.Object) (string, error)) (string, error) {
	path, data, where, err := calibratedManifest(bundle, place)
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	return where, os.Rename(tmp, path)
}

// checkCalibratable builds, without writing it, the bundle's manifest with a
// placeholder closed-loop calibration of score at rateHz and k sampler
// steps: a manifest that could not take one fails before any episode is
// driven.
func checkCalibratable(bundle, score string, rateHz float64, k int) error {
	cl := &calibration.ClosedLoop{Score: score, Alpha: 0.1, Q: 1, BandUnit: calibration.BandTicks, RateHz: rateHz, StepsK: k,
		Rule:  calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		Bands: []calibration.Band{{From: 0, Mean: 0, Std: 1, Threshold: 1}}}
	_, _, _, err := calibratedManifest(bundle, func(cal *manifestedit.Object) (string, error) {
		return placeClosedLoop(cal, cl)
	})
	return err
}

// calibratedManifest returns the path of the bundle's manifest.json, its
// bytes with the calibration object edited by place (placeClosedLoop,
// placeCeiling), checked by the parser the runtime uses, and where place
// wrote.
func calibratedManifest(bundle string, place func(cal *manifestedit.Object) (string, error)) (string, []byte, string, error) {
	path := filepath.Join(bundle, "manifest.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, "", err
	}
	top, err := manifestedit.Parse(raw)
	if err != nil {
		return "", nil, "", fmt.Errorf("%s: %w", path, err)
	}
	cal := &manifestedit.Object{}
	if calRaw := top.Raw("calibration"); calRaw != nil && !bytes.Equal(bytes.TrimSpace(calRaw), []byte("null")) {
		if cal, err = manifestedit.Parse(calRaw); err != nil {
			return "", nil, "", fmt.Errorf("%s: calibration: %w", path, err)
		}
	}
	where, err := place(cal)
	if err != nil {
		return "", nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if err := top.Set("calibration", cal); err != nil {
		return "", nil, "", err
	}
	// one space per level: the training toolkit's json.dump(indent=1)
	out, err := top.Marshal(" ")
	if err != nil {
		return "", nil, "", err
	}
	if _, err := engines.ParseManifest(path, out); err != nil {
		return "", nil, "", fmt.Errorf("the calibrated manifest would not parse, nothing written: %w", err)
	}
	return path, out, where, nil
}

// loopKey is what tells closed-loop calibrations apart in one bundle.
type loopKey struct {
	Score  string  `json:"score"`
	RateHz float64 `json:"rate_hz"`
	StepsK int     `json:"steps_k"`
}

// placeClosedLoop puts cl into the calibration object and says where: it
// replaces closed_loop when there is none, when closed_loop was certified
// at cl's rate and K, or when it calibrated another score (then any
// closed_loop_others, of that score, are dropped: a bundle's closed-loop
// calibrations are all of one score). Otherwise closed_loop stays the one
// used at any other rate or K, and cl replaces the entry of
// closed_loop_others at its rate and K, or is appended to them.
func placeClosedLoop(cal *manifestedit.Object, cl *calibration.ClosedLoop) (string, error) {
	var primary *loopKey
	if _, err := cal.Get("closed_loop", &primary); err != nil {
		return "", err
	}
	var others []json.RawMessage
	if _, err := cal.Get("closed_loop_others", &others); err != nil {
		return "", err
	}
	same := func(k *loopKey) bool { return k != nil && k.RateHz == cl.RateHz && k.StepsK == cl.StepsK }
	// a closed_loop that did not record its rate or K cannot be told apart
	if primary == nil || primary.Score != cl.Score || same(primary) || !(primary.RateHz > 0) || primary.StepsK < 1 {
		where := "calibration.closed_loop"
		if primary != nil && primary.Score != cl.Score && len(others) > 0 {
			cal.Delete("closed_loop_others")
			where += fmt.Sprintf(" (its %d closed_loop_others, of score %s, dropped)", len(others), primary.Score)
		}
		return where, cal.Set("closed_loop", cl)
	}
	raw, err := json.Marshal(cl)
	if err != nil {
		return "", err
	}
	i := len(others)
	for j, o := range others {
		var k *loopKey
		if err := json.Unmarshal(o, &k); err != nil {
			return "", fmt.Errorf("calibration.closed_loop_others[%d]: %w", j, err)
		}
		if same(k) {
			i = j
			break
		}
	}
	if i == len(others) {
		others = append(others, nil)
	}
	others[i] = raw
	where := fmt.Sprintf("calibration.closed_loop_others[%d] (%g Hz, K=%d; closed_loop, at %g Hz and K=%d, is kept for other rates)",
		i, cl.RateHz, cl.StepsK, primary.RateHz, primary.StepsK)
	return where, cal.Set("closed_loop_others", others)
}

// addCeiling is sim calibrate --ceiling-only: it fits a one-tick ceiling
// on traces (every episode the ceiling's) for c.base, the bundle's
// closed-loop calibration at the run's rate and K, prints it with what it
// and the kept window rule would have tripped on these episodes, and
// writes it into that calibration (placeCeiling) unless --dry-run.
func (c *calibrateFlags) addCeiling(env *cliEnv, traces [][]float64, prov provenance, results []evalResult, fail func(error) int) int {
	cl := *c.base // the calibration the ceiling is for, without the one it may have
	cl.Ceiling = nil
	ceil, err := calibrate.FitCeiling(traces, &cl, c.ceilingAlpha, c.ceilingMin)
	if err != nil {
		return fail(err)
	}
	ceil.Seeds, ceil.SuccessfulOnly = prov.seeds, c.successful
	rule := safety.NOfMConfig{N: cl.Rule.N, M: cl.Rule.M}
	w := env.stdout
	only := ""
	if c.successful {
		only = ", the ones that succeeded"
	}
	fmt.Fprintf(w, "bundle %s: a one-tick ceiling for its closed-loop calibration of %s at %g Hz and K=%d (rule %d of %d at q %.4g, alpha %.4g, kept), fitted on %d level-0 episodes of %s (seeds %d–%d%s)\n",
		c.bundleDir, cl.Score, cl.RateHz, cl.StepsK, rule.N, rule.M, cl.Q, cl.Alpha, ceil.Episodes, prov.task, prov.seeds[0], prov.seeds[1], only)
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
		return fail(err)
	}
	if c.dryRun {
		fmt.Fprintln(w, "dry run: the bundle was not changed")
		return exitOK
	}
	where, err := writeManifest(c.bundleDir, func(cal *manifestedit.Object) (string, error) { return placeCeiling(cal, cl.RateHz, cl.StepsK, ceil) })
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "wrote %s into %s\n", where, filepath.Join(c.bundleDir, "manifest.json"))
	return exitOK
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// placeCeiling sets the "ceiling" of the closed-loop calibration certified
// at rateHz and k (placeInLoop).
func placeCeiling(cal *manifestedit.Object, rateHz float64, k int, ceil *calibration.Ceiling) (string, error) {
	return placeInLoop(cal, rateHz, k, "ceiling", ceil)
}

// placeInLoop sets key to value in the closed-loop calibration certified
// at rateHz and k — closed_loop, or the entry of closed_loop_others — and
// says where; the calibration's other keys are left as they are.
func placeInLoop(cal *manifestedit.Object, rateHz float64, k int, key string, value any) (string, error) {
	same := func(raw json.RawMessage) (bool, error) {
		var key loopKey
		if err := json.Unmarshal(raw, &key); err != nil {
			return false, err
		}
		return key.RateHz == rateHz && key.StepsK == k, nil
	}
	set := func(raw json.RawMessage) (json.RawMessage, error) {
		o, err := manifestedit.Parse(raw)
		if err != nil {
			return nil, err
		}
		if err := o.Set(key, value); err != nil {
			return nil, err
		}
		return o.MarshalJSON()
	}
	if raw := cal.Raw("closed_loop"); raw != nil {
		ok, err := same(raw)
		if err != nil {
			return "", fmt.Errorf("calibration.closed_loop: %w", err)
		}
		if ok {
			out, err := set(raw)
			if err != nil {
				return "", err
			}
			cal.SetRaw("closed_loop", out)
			return "calibration.closed_loop." + key, nil
		}
	}
	var others []json.RawMessage
	if _, err := cal.Get("closed_loop_others", &others); err != nil {
		return "", err
	}
	for i, raw := range others {
		ok, err := same(raw)
		if err != nil {
			return "", fmt.Errorf("calibration.closed_loop_others[%d]: %w", i, err)
		}
		if !ok {
			continue
		}
		if others[i], err = set(raw); err != nil {
			return "", err
		}
		return fmt.Sprintf("calibration.closed_loop_others[%d].%s", i, key), cal.Set("closed_loop_others", others)
	}
	return "", fmt.Errorf("no closed-loop calibration at %g Hz and K=%d to add the %s to", rateHz, k, key)
}

// ceilingWhy says where a ceiling's q comes from: its fitted quantile, or
// the window's q or the floor it was raised to.
func ceilingWhy(c *calibration.Ceiling) string {
	switch {
	case c.Q == c.Quantile:
		return "(the episodes' conformal quantile)"
	case c.Min > 0 && c.Q == c.Min:
		return fmt.Sprintf("(the floor --ceiling-min; the episodes' quantile is %.4g)", c.Quantile)
	default:
		return fmt.Sprintf("(the window's q: the episodes' quantile, %.4g, is below it, so one score above the window's threshold trips — consider --ceiling-min)", c.Quantile)
	}
}
