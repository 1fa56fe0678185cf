package calibrate

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/eval"
)

// defaultCalibrateSeed is sim calibrate's first episode seed: apart from the
// demonstrations (0–199) and the evaluation's scenes (1000–1049), so the
// evaluation checks the calibrated false-alarm level on fresh seeds.
const defaultCalibrateSeed = 2000

// Options are sim calibrate's flags: the evaluation's episode flags
// (task, bundle, rate, K, step limit) plus the conformal level.
type Options struct {
	eval.Options
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
func (c *Options) standardized() bool { return c.score == engines.ScoreStateEnergy }

// calibrateScores are the scores sim calibrate fits bands on.
const calibrateScores = "energy state_energy"

// Register defines sim calibrate's flags on fs: the evaluation's episode
// flags with calibration's defaults, and its own.
func (c *Options) Register(fs *flag.FlagSet) {
	c.Options.RegisterEpisodes(fs)
	// The evaluation's defaults, changed where calibration differs.
	c.Episodes, c.Seed = 40, defaultCalibrateSeed
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

// Prepare checks every flag before the bridge starts — the evaluation's
// (eval.Options.Prepare) and the calibration's own — so that a calibration
// that cannot certify alpha is refused before minutes of episodes are
// spent; it also finds the calibration --ceiling-only or --latency-only
// adds to. Command-line mistakes are harness.UsageErrors.
func (c *Options) Prepare(root string) error {
	var errs []error
	if c.Level != "0" {
		errs = append(errs, harness.Usagef("--level %s: calibration drives level-0 (in-distribution) episodes; drop --level", c.Level))
	}
	if c.Fault != "" {
		errs = append(errs, harness.Usagef("--fault %s: calibration drives episodes without faults; drop --fault", c.Fault))
	}
	perHour := c.tripsPerHour != 0
	switch {
	case perHour && c.set["alpha"]:
		errs = append(errs, harness.Usagef("--alpha %v with --trips-per-hour %v: give one false-alarm level, per episode or per hour", c.alpha, c.tripsPerHour))
	case perHour && !(c.tripsPerHour > 0 && !math.IsInf(c.tripsPerHour, 0)):
		errs = append(errs, harness.Usagef("--trips-per-hour %v: must be a number > 0, e.g. 1", c.tripsPerHour))
	case !perHour && !(c.alpha > 0 && c.alpha < 1):
		errs = append(errs, harness.Usagef("--alpha %v: must be in (0, 1), e.g. 0.1", c.alpha))
	}
	if c.set["ceiling-alpha"] && !(c.ceilingAlpha > 0 && c.ceilingAlpha < 1) {
		errs = append(errs, harness.Usagef("--ceiling-alpha %v: must be in (0, 1), e.g. 0.02 (or leave it out: no ceiling)", c.ceilingAlpha))
	}
	if c.set["ceiling-min"] && !c.set["ceiling-alpha"] {
		errs = append(errs, harness.Usagef("--ceiling-min %v without --ceiling-alpha: the floor is for a one-tick ceiling; add --ceiling-alpha, e.g. 0.025", c.ceilingMin))
	} else if c.ceilingMin < 0 || math.IsNaN(c.ceilingMin) || math.IsInf(c.ceilingMin, 0) {
		errs = append(errs, harness.Usagef("--ceiling-min %v: must be a finite number ≥ 0", c.ceilingMin))
	}
	if c.ceilingOnly {
		for _, f := range []string{"alpha", "trips-per-hour", "fit-episodes"} {
			if c.set[f] {
				errs = append(errs, harness.Usagef("--%s with --ceiling-only: the calibration's window rule is kept as it is; give --ceiling-alpha only", f))
			}
		}
		if !c.set["ceiling-alpha"] {
			errs = append(errs, harness.UsageError{Err: errors.New("--ceiling-only needs --ceiling-alpha, e.g. 0.02: the tolerated probability that a fresh level-0 episode has one score above the ceiling")})
		}
	}
	if c.latencyOnly {
		for _, f := range []string{"alpha", "trips-per-hour", "fit-episodes", "ceiling-alpha", "ceiling-min", "ceiling-only", "traces", "successful-only"} {
			if c.set[f] {
				errs = append(errs, harness.Usagef("--%s with --latency-only: it records how late these episodes' plans land and leaves the thresholds alone; drop --%s", f, f))
			}
		}
	}
	// A calibration in the bundle names the rate, K and seeds it was driven
	// at, not an added delay: one fitted on delayed driving would read there
	// as the host's own, and its plan latency would set the runtime's
	// plan_late_limit. Measuring one is what --dry-run is for.
	switch {
	case c.Delay > 0 && c.traces != "":
		errs = append(errs, harness.Usagef("--delay %g with --traces: the traces were driven already; drop --delay", c.Delay))
	case c.Delay > 0 && !c.dryRun:
		errs = append(errs, harness.Usagef("--delay %g: the bundle's calibration would not record the added delay, and the runtime would take its thresholds and plan latency for the host's own; add --dry-run to measure one, or drop --delay", c.Delay))
	}
	if c.traces != "" && c.set["episodes"] {
		errs = append(errs, harness.Usagef("--episodes %d with --traces: the traces' episodes are the calibration's; drop --episodes", c.Episodes))
	}
	if c.Episodes < 2 && c.traces == "" {
		errs = append(errs, harness.Usagef("--episodes %d: must be at least 2 (fit and conformal episodes)", c.Episodes))
	}
	if sc, err := harness.OneOf("--score", "score to calibrate", c.score, calibrateScores, strings.ToLower); err != nil {
		errs = append(errs, err)
	} else {
		c.score = sc
		c.TraceScore, _ = safety.ParseScore(sc)
	}
	halves := c.fitEpisodes == 0 // the default split: half fit, half conformal
	switch {
	case c.standardized() && c.set["fit-episodes"]:
		errs = append(errs, harness.Usagef("--fit-episodes %d with --score state_energy: the state score is standardized and calibrated as one band, every episode conformal; drop --fit-episodes", c.fitEpisodes))
	case c.standardized():
		c.fitEpisodes = 0
	case halves && c.traces == "":
		c.fitEpisodes = c.Episodes / 2
	}
	if !c.standardized() && c.traces == "" && (c.fitEpisodes < 1 || c.fitEpisodes >= c.Episodes) {
		errs = append(errs, harness.Usagef("--fit-episodes %d: must be in 1..%d (fewer than --episodes %d)", c.fitEpisodes, c.Episodes-1, c.Episodes))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fit := c.fitEpisodes
	if c.standardized() {
		fit = 0
	}
	if need := MinConformalEpisodes(c.alpha); !perHour && !c.ceilingOnly && !c.latencyOnly && c.traces == "" && c.Episodes-fit < need {
		if c.standardized() {
			return harness.Usagef("--episodes %d cannot certify --alpha %v: the state score needs at least %d conformal episodes (pass --episodes %d, or a larger --alpha)",
				c.Episodes, c.alpha, need, need)
		}
		enough := c.fitEpisodes + need
		if halves {
			enough = 2 * need
		}
		return harness.Usagef("--episodes %d with --fit-episodes %d leaves %d conformal episodes, which cannot certify --alpha %v: need at least %d (pass --episodes %d, or a larger --alpha)",
			c.Episodes, c.fitEpisodes, c.Episodes-c.fitEpisodes, c.alpha, need, enough)
	}
	if c.ceilingOnly {
		fit = 0 // every episode is the ceiling's
	}
	if need := MinConformalEpisodes(c.ceilingAlpha); c.ceilingAlpha > 0 && c.traces == "" && c.Episodes-fit < need {
		return harness.Usagef("--episodes %d leaves %d conformal episodes, which cannot certify --ceiling-alpha %v: need at least %d conformal episodes (or a larger --ceiling-alpha)",
			c.Episodes, c.Episodes-fit, c.ceilingAlpha, need)
	}
	if err := c.Options.Prepare(root); err != nil {
		return err
	}
	b, err := engines.LoadBundle(c.BundleDir)
	if err != nil {
		return err
	}
	switch m := &b.Manifest; {
	case c.score == engines.ScoreStateEnergy && !m.HasStateEnergy():
		return harness.Usagef("--score state_energy: bundle %s has no state term (no \"state_energy\" block in its manifest): train one (python -m energyflow state-term --bundle %s --data D.hdf5) or calibrate --score energy", c.BundleDir, c.BundleDir)
	case c.score == engines.ScoreEnergy && !m.HasEnergy() && m.HasStateEnergy():
		return harness.Usagef("bundle %s is a %q policy: it has no energy to calibrate; calibrate its state term with --score state_energy", c.BundleDir, m.Policy)
	case c.score == engines.ScoreEnergy && !m.HasEnergy():
		return harness.Usagef("bundle %s is a %q policy: it has no energy to calibrate (the energy stop is off for it)", c.BundleDir, m.Policy)
	}
	if c.Steps == 0 {
		c.Steps = b.Manifest.Sampler.Steps
	}
	if c.latencyOnly {
		cl, ok := b.Manifest.Calibration.ClosedLoopFor(c.Rate, c.Steps)
		if !ok || cl.RateHz != c.Rate || cl.StepsK != c.Steps {
			return harness.Usagef("--latency-only: bundle %s has no closed-loop calibration at %g Hz and K=%d to record the plan latency into: calibrate one (sim calibrate --rate %g --steps %d), which records its own",
				c.BundleDir, c.Rate, c.Steps, c.Rate, c.Steps)
		}
		c.base = cl
		return nil
	}
	if c.ceilingOnly {
		cl, ok := b.Manifest.Calibration.ClosedLoopFor(c.Rate, c.Steps)
		if !ok || cl.Score != c.score || cl.RateHz != c.Rate || cl.StepsK != c.Steps {
			return harness.Usagef("--ceiling-only: bundle %s has no closed-loop calibration of %s at %g Hz and K=%d to add a ceiling to: calibrate one first (sim calibrate --score %s --rate %g --steps %d), with --ceiling-alpha to fit both at once",
				c.BundleDir, c.score, c.Rate, c.Steps, c.score, c.Rate, c.Steps)
		}
		c.base = cl
		return nil
	}
	if !c.dryRun {
		return checkCalibratable(c.BundleDir, c.score, c.Rate, c.Steps)
	}
	return nil
}
