package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/runtime/record"
	"github.com/energyflow/edge/sim/harness"
)

// EpisodeError is an episode the evaluation could not run (the bridge or
// the runtime failed): the evaluation stops there.
type EpisodeError struct {
	Episode int
	Err     error
}

func (e *EpisodeError) Error() string { return fmt.Sprintf("episode %d: %v", e.Episode, e.Err) }
func (e *EpisodeError) Unwrap() error { return e.Err }

// Run is sim eval: it checks the options, starts the bridge, runs
// o.Episodes episodes through the real runtime (RunEpisode), prints each
// episode's line on out.Stderr and the summary line on out.Stdout, and
// writes --scores and --json. An interruption (ctx) ends the episodes
// early; the summary covers those run. It returns the summary (its Results
// carry each episode's typed stop, Result.Stop). Command-line mistakes are
// harness.UsageErrors, a failed episode an *EpisodeError. root is the
// repository.
func Run(ctx context.Context, out harness.Output, root string, o *Options) (Summary, error) {
	if o.ObserveOnly && o.Watch != "" {
		return Summary{}, harness.Usagef("--watch %q with --observe-only: an observing stop watches nothing; drop one of them", o.Watch)
	}
	if o.Record != "" {
		if !record.Supported() {
			return Summary{}, harness.UsageError{Err: fmt.Errorf("--record %s: %w", o.Record, record.ErrNoHDF5)}
		}
		if err := os.MkdirAll(o.Record, 0o755); err != nil {
			return Summary{}, harness.UsageError{Err: fmt.Errorf("--record: %w", err)}
		}
	}
	if err := o.Prepare(root); err != nil {
		return Summary{}, err
	}
	o.WarnTask(out.Stderr, "energyflow sim eval")
	b, err := o.StartBridge(ctx, root, out.Stderr, true, o.MaxSteps, false)
	if err != nil {
		return Summary{}, err
	}
	defer b.Close()
	scoreFile, closeScores, err := OpenScores(o.Scores)
	if err != nil {
		return Summary{}, err
	}
	defer closeScores()
	var results []Result
	for ep := 0; ep < o.Episodes && ctx.Err() == nil; ep++ {
		r, err := RunEpisode(ctx, out, root, o, b, ep, scoreFile)
		if err != nil {
			return Summary{}, &EpisodeError{Episode: ep, Err: err}
		}
		results = append(results, r)
		fmt.Fprintf(out.Stderr, "episode %d seed %d: success=%v steps=%d end=%s stop=%s\n", ep, r.Seed, r.Success, r.Steps, r.End, r.StopKind)
	}
	if o.Steps == 0 {
		if b, err := engines.LoadBundle(o.BundleDir); err == nil {
			o.Steps = b.Manifest.Sampler.Steps
		}
	}
	s := o.Summarize(results)
	fmt.Fprintln(out.Stdout, s.String())
	if o.Summary != "" {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return s, fmt.Errorf("summary: %w", err)
		}
		if err := os.WriteFile(o.Summary, data, 0o644); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Summarize summarizes episodes driven with these options: Summarize of
// the flags, with the added delay, observe-only and the step limit they ran
// under, so that every summary written says how its episodes were driven.
func (o *Options) Summarize(results []Result) Summary {
	s := Summarize(o.Flags, results)
	s.Delay = o.Delay
	s.ObserveOnly = o.ObserveOnly
	s.MaxSteps = o.MaxSteps
	return s
}

// OpenScores opens the --scores file (io.Discard for ""), and returns the
// function that closes it.
func OpenScores(path string) (io.Writer, func() error, error) {
	if path == "" {
		return io.Discard, func() error { return nil }, nil
	}
	fh, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return fh, fh.Close, nil
}
