package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
)

// Options are the demo's flags (`energyflow sim`).
type Options struct {
	harness.Flags
	Listen     string        // address of the live view ("": none)
	Duration   time.Duration // stop after this long (0: until interrupted)
	SoakReport string        // write a soak report to this file at exit ("": none)
	Nice       int           // CPU priority of the process (the command sets it)
	Realtime   bool          // the simulator on its own clock instead of one step per tick
	// Scores is --scores: every tick's scores as JSON lines, as sim eval
	// --scores writes them, and the episodes' summary beside it at exit
	// ("": none). ObserveOnly is --observe-only: the energy stop observes
	// and never stops the arm.
	Scores      string
	ObserveOnly bool
}

// Register defines the demo's flags on fs.
func (o *Options) Register(fs *flag.FlagSet) {
	o.Flags.Register(fs)
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the live view")
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	fs.StringVar(&o.SoakReport, "soak-report", "", "write a soak report (tick jitter, missed deadlines, memory, GC) to this file at exit")
	fs.IntVar(&o.Nice, "nice", -10, "CPU priority (niceness) of the demo's runtime and simulator, as the systemd unit's Nice=-10 gives the service, so a browser watching on the same machine does not delay its plans; 0 keeps the shell's (a negative value needs root or CAP_SYS_NICE; without it the demo says so and runs as it is)")
	fs.StringVar(&o.Scores, "scores", "", "write every tick's scores to this .jsonl file (as sim eval --scores does) and, at exit, the episodes' summary beside it (.json), so sim calibrate --traces can certify the energy stop on the demo's own driving: episodes back to back, the live view watching")
	fs.BoolVar(&o.ObserveOnly, "observe-only", false, "run the energy stop as an observer: scores are traced (--scores) but none stops the arm; every other stop still acts. For recording calibration traces, never for a robot")
	fs.BoolVar(&o.Realtime, "realtime", false, "run the simulator on its own --rate clock instead of one step per control tick: the two clocks drift, so the arm's state is sometimes read 0 or 2 steps apart, which the state term's transition component sees as motion the arm did not make (docs/sim.md)")
}

// Demo is a started demo: the bridge running and the runtime configuration
// pointed at it. The caller runs the runtime with Config and AppOptions,
// calls Started once the app is built, and closes the demo at the end.
type Demo struct {
	o    *Options
	b    *harness.Bridge
	cfg  *runtime.Config
	ctl  *control
	soak *soakMeter // nil without --soak-report
	tr   *tracer    // nil without --scores
}

// Start starts the bridge for the demo — one physics step per control tick
// (lockstep), paced by the runtime's real-time loop, unless --realtime —
// builds the runtime configuration pointed at it and prints where
// everything runs on out.Stdout. The options must have been prepared
// (Flags.Prepare); root is the repository.
func Start(ctx context.Context, out harness.Output, root string, o *Options) (*Demo, error) {
	// --scores first: a bad path is refused before the simulator starts.
	var tr *tracer
	if o.Scores != "" {
		m, err := harness.ReadManifest(o.BundleDir)
		if err != nil {
			return nil, fmt.Errorf("--scores: %w", err)
		}
		if tr, err = newTracer(o.Scores, m.HasStateEnergy()); err != nil {
			return nil, err
		}
		tr.steps = m.Sampler.Steps
	}
	fail := func(err error) (*Demo, error) {
		if tr != nil {
			tr.discard()
		}
		return nil, err
	}
	// One physics step per control tick (lockstep), paced by the runtime's
	// real-time loop: the arm's state then moves exactly one period between
	// reads, as a real arm's does. --realtime keeps the simulator's own clock.
	b, err := o.StartBridge(ctx, root, out.Stderr, !o.Realtime, 0, o.Listen != "")
	if err != nil {
		return fail(err)
	}
	cfg, err := o.RuntimeConfig(root, b, o.Listen)
	if err != nil {
		b.Close()
		return fail(err)
	}
	fmt.Fprintf(out.Stdout, "simulated robot: Meta-World %s, level %s; Modbus %s, camera http://%s/stream\n", o.Task, o.Level, b.Modbus, b.HTTP)
	fmt.Fprintf(out.Stdout, "policy: %s, %s\n", filepath.Base(o.BundleDir), actsOn(o.State, o.Images, o.CameraName))
	if b.View != "" {
		fmt.Fprintf(out.Stdout, "live view video: %s (%dx%d)\n", b.View, harness.ViewWidth, harness.ViewHeight)
	}
	fmt.Fprintln(out.Stdout, "the live view's Episode panel starts a new episode and changes the OOD level (0, S, M, L)")
	if o.ObserveOnly {
		cfg.Safety.Energy.Disabled = true
		fmt.Fprintln(out.Stdout, "the energy stop only observes (--observe-only): it never stops the arm")
	}
	d := &Demo{o: o, b: b, cfg: cfg, ctl: &control{b: b}}
	if o.SoakReport != "" {
		d.soak = newSoakMeter(int(cfg.Loop.RateHz*o.Duration.Seconds()) + 16)
	}
	if tr != nil {
		d.tr, d.ctl.tr = tr, tr
	}
	return d, nil
}

// actsOn says what a policy acts on: the simulator's full observation
// (which holds the objects' positions, as no real arm controller does), or
// the arm's own state fields, with the camera when it takes images.
func actsOn(state []string, images bool, cameraName string) string {
	switch {
	case slices.Contains(state, "observation"):
		return "acting on the simulator's 39-wide state (it holds the objects' positions: a simulation-only policy)"
	case images:
		return fmt.Sprintf("acting from the %s camera and the arm's %s, as on a real robot", cameraName, strings.Join(state, " and "))
	default:
		return fmt.Sprintf("acting on the arm's %s alone (no camera, no object positions)", strings.Join(state, " and "))
	}
}

// Config is the runtime configuration for the demo.
func (d *Demo) Config() *runtime.Config { return d.cfg }

// AppOptions are the runtime's options for the demo: the live view's
// Episode panel controls the bridge's episodes, and with --soak-report a
// per-tick meter observes the loop.
func (d *Demo) AppOptions() runtime.AppOptions {
	o := runtime.AppOptions{Episodes: d.ctl}
	var ticks []func(runtime.Tick, *safety.Decision, safety.Scores)
	if d.soak != nil {
		ticks = append(ticks, d.soak.onTick)
	}
	if d.tr != nil {
		ticks = append(ticks, d.tr.onTick)
	}
	if len(ticks) > 0 {
		o.OnTick = func(tk runtime.Tick, dec *safety.Decision, sc safety.Scores) {
			for _, f := range ticks {
				f(tk, dec, sc)
			}
		}
	}
	return o
}

// Started is to be called once the app is built, before it runs: it starts
// a new episode whenever one ends, so the arm keeps working, until ctx
// ends. It does not block.
func (d *Demo) Started(ctx context.Context, app *runtime.App, log *slog.Logger) {
	d.ctl.setLoop(app.Loop())
	if d.tr != nil {
		d.tr.unseen = app.WatchesUnseen
		if ep, err := d.b.Episode(ctx); err == nil {
			d.tr.begin(ep)
		} else {
			log.Warn("demo: --scores: cannot read the first episode; its ticks are not traced", "err", err)
		}
	}
	go runEpisodes(ctx, d.ctl, log.With("part", "demo"))
}

// FinishSoak prints the soak report on w and writes it to --soak-report's
// file; without --soak-report it does nothing.
func (d *Demo) FinishSoak(w io.Writer) error {
	if d.soak == nil {
		return nil
	}
	rep := d.soak.report(d.cfg.Loop.RateHz, d.o.Duration)
	fmt.Fprintln(w, rep)
	return os.WriteFile(d.o.SoakReport, []byte(rep+"\n"), 0o644)
}

// FinishScores writes --scores' summary and closes its file; without
// --scores it does nothing. Call it after the runtime has stopped.
func (d *Demo) FinishScores() error {
	if d.tr == nil {
		return nil
	}
	return d.tr.close(d.o.Flags, d.o.ObserveOnly)
}

// Close stops the bridge.
func (d *Demo) Close() { d.b.Close() }
