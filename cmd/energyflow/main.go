// Command energyflow is the EnergyFlow Edge runtime: it runs an EnergyFlow
// policy on a robot arm (run), a simulated robot demo (sim), and the tools
// around it (bundle verify, bench, engine build, camera, config, version).
//
// Exit codes: 0 success; 1 runtime failure; 2 usage error; 3 a check failed
// (bundle verify, config check); 130 interrupted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes scripts can rely on.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitCheckFailed = 3
)

// command is one subcommand. run gets the arguments after the subcommand
// name and returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) int
}

// cliEnv is what every subcommand gets: where to print.
type cliEnv struct {
	stdout, stderr io.Writer
}

func commands() map[string]command {
	return map[string]command{
		"run":     {"run the policy on the configured robot", cmdRun},
		"sim":     {"run the simulated robot demo (or: sim record, sim eval, sim calibrate)", cmdSim},
		"bench":   {"measure sampling latency of a bundle", cmdBench},
		"bundle":  {"inspect engine bundles (bundle verify DIR)", cmdBundle},
		"engine":  {"build TensorRT engines for a bundle (engine build)", cmdEngine},
		"camera":  {"list cameras and take snapshots", cmdCamera},
		"config":  {"print an example configuration or check one", cmdConfig},
		"version": {"print the version", cmdVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: energyflow <command> [flags]\n\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'energyflow <command> --help' for a command's flags.")
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	c, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "energyflow: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // restore default handling: a second signal is caught by notifySignals
	return c.run(ctx, env, args[1:])
}

// notifySignals relays SIGINT and SIGTERM to c.
func notifySignals(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }
