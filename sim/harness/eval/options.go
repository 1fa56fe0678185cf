package eval

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
)

// Options are sim eval's flags; sim calibrate drives its episodes with
// them too.
type Options struct {
	harness.Flags
	Episodes, MaxSteps int
	// Delay is --delay: every plan lands this many control periods later
	// than the sampler finishes it (a slower or busier host).
	Delay     float64
	Fault     string // injected fault: "" or one the bridge knows (harness.ParseFault)
	FaultStep int
	// Scores and Summary are the --scores (per-tick JSON lines) and --json
	// (the summary) files; "": none.
	Scores, Summary string
	// ObserveOnly runs every episode with the energy stop off, so that the
	// scores are recorded but never end an episode (sim calibrate).
	ObserveOnly bool
	// TraceScore is the score Result.Trace records (sim calibrate
	// --score); the zero value is the energy.
	TraceScore safety.Score
	// Watch is sim eval --watch: the scores the energy stop watches,
	// comma-separated ("": the bundle's default watch set, docs/safety.md).
	Watch string
	// Record is sim eval --record: a directory under which every episode
	// is recorded in HDF5 (the runtime's recording, docs/sim.md), one
	// folder per episode named TASK_SEED ("": no recording).
	Record string

	// Resolved by Prepare.
	stateTerm   bool     // the bundle has the state term: the per-tick scores carry state_energy
	watchScores []string // Watch, parsed
}

// RegisterEpisodes defines on fs the flags that choose the episodes:
// Flags' and the evaluation's own but --watch, --record and
// --observe-only. sim calibrate takes these.
func (o *Options) RegisterEpisodes(fs *flag.FlagSet) {
	o.Flags.Register(fs)
	fs.IntVar(&o.Episodes, "episodes", 10, "number of episodes")
	fs.IntVar(&o.MaxSteps, "max-steps", harness.MetaWorldMaxSteps, "environment steps per episode before it counts as a failure; the bridge truncates the episode there (the official Meta-World evaluation uses 500)")
	fs.StringVar(&o.Scores, "scores", "", "write per-tick scores (JSON lines) to this file")
	fs.StringVar(&o.Summary, "json", "", "write the summary as JSON to this file")
	fs.StringVar(&o.Fault, "fault", "", "inject a fault in every episode: push (the arm is shoved 8 cm), object (an unseen object appears beside the hand, in the state and in the camera), occlusion (a dark square blocks the middle of the camera image), zero_state (the arm's state reads all zeros, as a failed encoder or a dead bus would report), blackout (black frames), freeze (the onset's frame repeated with fresh timestamps), camera_shift (the camera knocked 5 cm and 5°) or watch_shift (the watch camera knocked the same way); docs/sim.md")
	fs.IntVar(&o.FaultStep, "fault-step", 30, "environment step at which --fault starts")
	fs.Float64Var(&o.Delay, "delay", 0, "hold every plan this many control periods longer before the loop gets it, as a slower or busier host would (0 to the bundle's action horizon)")
}

// Register defines every sim eval flag on fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.RegisterEpisodes(fs)
	fs.StringVar(&o.Watch, "watch", "", "scores the energy stop watches, comma-separated (energy, centered_energy, state_energy; any one tripping stops); empty: the bundle's default, state_energy alone with the state term, else its calibration's score")
	fs.StringVar(&o.Record, "record", "", "record every episode in HDF5 (the arm's state, actions and scores of each running tick, and the safety events) under this directory, one folder per episode named TASK_SEED, to look at what the robot saw when the stop tripped (needs a cgo build with libhdf5)")
	fs.BoolVar(&o.ObserveOnly, "observe-only", false, "run the energy stop as an observer: every score is traced (--scores) but none ends an episode, so the traces run to success or the step limit and research/stop/stop_rules.py can replay any rule on them; every other stop still acts")
}

// Prepare is Flags.Prepare plus the evaluation's own flags.
func (o *Options) Prepare(root string) error {
	var errs []error
	if o.Episodes < 1 {
		errs = append(errs, harness.Usagef("--episodes %d: must be at least 1", o.Episodes))
	}
	if o.MaxSteps < 1 {
		errs = append(errs, harness.Usagef("--max-steps %d: must be at least 1 (environment steps per episode; Meta-World's evaluation uses 500)", o.MaxSteps))
	}
	if o.Fault != "" {
		var err error
		if o.Fault, err = harness.ParseFault(o.Fault); err != nil {
			errs = append(errs, err)
		}
		if o.FaultStep < 0 {
			errs = append(errs, harness.Usagef("--fault-step %d: must be 0 or more", o.FaultStep))
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Check the shared flags too, so every mistake shows at once.
		return errors.Join(err, o.Flags.Validate())
	}
	if err := o.Flags.Prepare(root); err != nil {
		return err
	}
	if o.Fault == "object" && o.Task == "hammer" && !o.Images {
		return harness.Usagef("--fault object on hammer: its state's second object slot holds the nail, so only a camera sees the new object, and bundle %s takes no camera image: use a camera bundle (bundles/metaworld-hammer-camera)", filepath.Base(o.BundleDir))
	}
	if o.Fault == "watch_shift" && o.WatchCamera == "" {
		return harness.Usagef("--fault watch_shift knocks the watch camera, but bundle %s runs none (it names no watch camera, or --watch-camera off)", filepath.Base(o.BundleDir))
	}
	// A manifest that does not parse is reported by the runtime's loader.
	if m, err := harness.ReadManifest(o.BundleDir); err == nil {
		o.stateTerm = m.HasStateEnergy()
		if !(o.Delay >= 0 && o.Delay <= float64(m.ActionHorizon)) {
			return harness.Usagef("--delay %g: must be 0 to %d control periods (the bundle's action horizon: a plan later than its chunk never runs)", o.Delay, m.ActionHorizon)
		}
	}
	return o.parseWatch()
}

// parseWatch checks --watch against the score names and the bundle: each
// name once, state_energy only for a bundle with the state term.
func (o *Options) parseWatch() error {
	o.watchScores = nil
	if o.Watch == "" {
		return nil
	}
	for _, name := range strings.Split(o.Watch, ",") {
		name = strings.TrimSpace(name)
		sc, ok := safety.ParseScore(name)
		switch {
		case !ok:
			return harness.Usagef("--watch %q: %q is not a score (energy, centered_energy, state_energy)", o.Watch, name)
		case slices.Contains(o.watchScores, name):
			return harness.Usagef("--watch %q: %s is named twice", o.Watch, name)
		case sc == safety.ScoreStateEnergy && !o.stateTerm:
			return harness.Usagef("--watch %q: bundle %s has no state term (add one with python -m energyflow state-term)", o.Watch, o.BundleDir)
		}
		o.watchScores = append(o.watchScores, name)
	}
	return nil
}

// episodeConfig is the runtime configuration of episode idx: the scene
// seed and the sampler's noise seed are both --seed + idx, so episodes are
// independent draws and any one can be rerun alone with its seed.
func (o *Options) episodeConfig(root string, b *harness.Bridge, idx int) (*runtime.Config, error) {
	cfg, err := o.RuntimeConfig(root, b, "")
	if err != nil {
		return nil, err
	}
	cfg.Policy.Seed = uint64(o.Seed + idx)
	if o.ObserveOnly {
		cfg.Safety.Energy.Disabled = true
	}
	for _, name := range o.watchScores {
		cfg.Safety.Energy.Scores = append(cfg.Safety.Energy.Scores, safety.ScoreConfig{Name: name})
	}
	if o.Record != "" {
		cfg.Recording.Enabled = true
		cfg.Recording.Dir = filepath.Join(o.Record, fmt.Sprintf("%s_%d", o.Task, o.Seed+idx))
		cfg.Recording.MaxSteps = o.MaxSteps + 1 // the whole episode in one file
	}
	cfg.Log.Level = "warn"
	if o.Verbose {
		cfg.Log.Level = "debug"
	}
	return cfg, nil
}
