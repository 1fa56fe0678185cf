package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/energyflow/edge/runtime"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	path := fs.String("config", "", "configuration file (default: ~/.config/energyflow/config.yaml, then /etc/energyflow/config.yaml)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow run [--config FILE]\n\nRuns the policy on the configured robot until SIGINT/SIGTERM. A second signal exits at once.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	file, err := runtime.FindConfig(*path)
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow run:", err)
		return exitFailure
	}
	cfg, err := runtime.LoadConfig(file)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow run: %s is not valid:\n%v\n", file, err)
		return exitCheckFailed
	}
	return runApp(ctx, env, cfg)
}

// newLogger builds the process logger from the config's log section.
func newLogger(env *cliEnv, cfg *runtime.Config) *slog.Logger {
	return runtime.NewLogger(env.stderr, cfg.Log)
}

// runApp builds the runtime from cfg and runs it until ctx ends. The first
// signal cancels ctx (graceful: the arm is halted, recordings are closed);
// a second one exits at once.
func runApp(ctx context.Context, env *cliEnv, cfg *runtime.Config) int {
	return runAppWith(ctx, env, cfg, appRun{})
}

// appRun says how runAppWith runs the app beyond its config.
type appRun struct {
	// showToken: the viewer URL carries the reset token (the local demo);
	// the service prints the URL only, so tokens stay out of the journal.
	showToken bool
	// opts are the app's options (Logger and Announce are filled in).
	opts runtime.AppOptions
	// started, if set, is called once the app is built, before it runs;
	// it must not block (start goroutines bound to ctx).
	started func(ctx context.Context, app *runtime.App, log *slog.Logger)
}

// runAppWith is runApp with the demo's extras (the token, a per-tick
// observer for soak measurements, the episode loop).
func runAppWith(ctx context.Context, env *cliEnv, cfg *runtime.Config, run appRun) int {
	log := newLogger(env, cfg)
	opts := run.opts
	opts.Logger, opts.Announce = log, env.stdout
	app, err := runtime.NewApp(ctx, cfg, opts)
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow:", err)
		return exitFailure
	}
	defer app.Close()
	if run.started != nil {
		run.started(ctx, app, log)
	}
	if u := app.ViewerURL(); u != "" {
		if tel := app.Telemetry(); run.showToken && tel != nil {
			// The local demo's operator may also RESET: the reset token's scope
			// includes viewing and STOP.
			fmt.Fprintf(env.stdout, "live view: %s#token=%s\n", u, tel.Tokens().Reset)
		} else {
			fmt.Fprintf(env.stdout, "live view: %s (open it with the view token)\n", u)
		}
	}
	go func() {
		<-ctx.Done()
		second := make(chan os.Signal, 1)
		notifySignals(second)
		<-second
		fmt.Fprintln(env.stderr, "energyflow: second signal, exiting now")
		os.Exit(130)
	}()
	n := runtime.NewNotifier()
	n.Ready("running")
	err = app.Run(ctx)
	n.Stopping()
	if err != nil {
		fmt.Fprintln(env.stderr, "energyflow:", err)
		return exitFailure
	}
	return exitOK
}
