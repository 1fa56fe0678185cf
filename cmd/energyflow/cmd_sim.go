package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/calibrate"
	"github.com/energyflow/edge/sim/harness/demo"
	"github.com/energyflow/edge/sim/harness/eval"
)

// The sim commands parse their flags here and run the simulation harness
// (sim/harness and its demo, eval and calibrate packages).

// report prints err, one line per joined error each prefixed with the
// command, and returns the exit code: exitUsage for a harness.UsageError
// anywhere in err, else exitFailure.
func report(env *cliEnv, command string, err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(env.stderr, "%s: %s\n", command, line)
	}
	var u harness.UsageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailure
}

// parse parses args into fs: ok false with the exit code (help: exitOK)
// when the command ends there.
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// output is where the sim commands print.
func (env *cliEnv) output() harness.Output {
	return harness.Output{Stdout: env.stdout, Stderr: env.stderr}
}

func cmdSim(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "record":
			return cmdSimRecord(ctx, env, args[1:])
		case "eval":
			return cmdSimEval(ctx, env, args[1:])
		case "calibrate":
			return cmdSimCalibrate(ctx, env, args[1:])
		}
	}
	return cmdSimDemo(ctx, env, args)
}

// cmdSimDemo is `energyflow sim`: the simulated robot demo (package demo),
// run as `energyflow run` runs the robot.
func cmdSimDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var o demo.Options
	o.Register(fs)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, `usage: energyflow sim [flags]          run the simulated robot demo until Ctrl-C
       energyflow sim record [flags]   record scripted demonstrations (HDF5)
       energyflow sim eval [flags]     closed-loop evaluation of a bundle
       energyflow sim calibrate [flags]  closed-loop conformal thresholds for the energy stop

The demo starts the Meta-World bridge (Modbus TCP arm + MJPEG camera on
loopback), the runtime with the task's bundle on ONNX Runtime, safety and the
live view, and prints the viewer URL with its token.`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	o.NoteGiven(fs) // a --bundle without --task or --rate runs what its stop was certified on
	fail := func(err error) int { return report(env, "energyflow sim", err) }
	root, err := harness.ProjectRoot()
	if err != nil {
		return fail(err)
	}
	if err := o.Prepare(root); err != nil {
		return fail(err)
	}
	o.WarnTask(env.stderr, "energyflow sim")
	if o.Nice != 0 {
		if err := setNice(o.Nice); err != nil {
			fmt.Fprintf(env.stderr, "energyflow sim: running at normal priority: %v\n", err)
		}
	}
	d, err := demo.Start(ctx, env.output(), root, &o)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	code := runAppWith(ctx, env, d.Config(), appRun{showToken: true, opts: d.AppOptions(), started: d.Started})
	if err := d.FinishScores(); err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim:", err)
		return exitFailure
	}
	if err := d.FinishSoak(env.stdout); err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim:", err)
		return exitFailure
	}
	return code
}

// cmdSimRecord runs the bridge's scripted-demonstration recorder.
func cmdSimRecord(ctx context.Context, env *cliEnv, args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			fmt.Fprintln(env.stdout, "usage: energyflow sim record --task T --episodes N --out demos.hdf5 [--camera] [--seed S]\n(runs python -m sim.record in the project's environment; its --help follows)")
			break
		}
	}
	root, err := harness.ProjectRoot()
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow sim record:", err)
		return exitFailure
	}
	py := filepath.Join(root, ".venv", "bin", "python")
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", "sim.record"}, args...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = env.stdout, env.stderr
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	if os.Getenv("MUJOCO_GL") == "" {
		cmd.Env = append(cmd.Env, "MUJOCO_GL=osmesa", "PYOPENGL_PLATFORM=osmesa")
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(env.stderr, "energyflow sim record:", err)
		return exitFailure
	}
	return exitOK
}

// cmdSimEval is `energyflow sim eval`: the real runtime stack against the
// bridge, per episode (package eval).
func cmdSimEval(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim eval", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var o eval.Options
	o.Register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	o.NoteGiven(fs) // a --bundle without --task or --rate runs what its stop was certified on
	root, err := harness.ProjectRoot()
	if err == nil {
		_, err = eval.Run(ctx, env.output(), root, &o)
	}
	var episode *eval.EpisodeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &episode):
		fmt.Fprintf(env.stderr, "energyflow sim eval: %v\n", err)
		return exitFailure
	default:
		return report(env, "energyflow sim eval", err)
	}
}

// cmdSimCalibrate is `energyflow sim calibrate`: the energy stop's
// closed-loop conformal thresholds, fitted on level-0 episodes driven
// through the runtime and written into the bundle (package calibrate).
func cmdSimCalibrate(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("sim calibrate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var o calibrate.Options
	o.Register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	o.Visited(fs)
	root, err := harness.ProjectRoot()
	if err == nil {
		err = calibrate.Run(ctx, env.output(), root, &o)
	}
	if err != nil {
		return report(env, "energyflow sim calibrate", err)
	}
	return exitOK
}
