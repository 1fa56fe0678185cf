package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/energyflow/edge/runtime"
)

func cmdConfig(_ context.Context, env *cliEnv, args []string) int {
	usage := func() {
		fmt.Fprintln(env.stderr, `usage:
  energyflow config example          print a commented example configuration
  energyflow config check [--config FILE]
                                     validate a configuration; every problem is
                                     reported with its key and line (exit 3)
Search order without --config: `+fmt.Sprint(runtime.ConfigSearchPath()))
	}
	if len(args) == 0 {
		usage()
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help":
		usage()
		return exitOK
	case "example":
		fmt.Fprint(env.stdout, string(runtime.ExampleConfig()))
		return exitOK
	case "check":
		fs := flag.NewFlagSet("config check", flag.ContinueOnError)
		fs.SetOutput(env.stderr)
		path := fs.String("config", "", "configuration file (default: the search order)")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		file, err := runtime.FindConfig(*path)
		if err != nil {
			fmt.Fprintln(env.stderr, "energyflow config check:", err)
			return exitCheckFailed
		}
		cfg, err := runtime.LoadConfig(file)
		if err == nil {
			err = cfg.Check() // what the file refers to: map, bundle, token folder, backend
		}
		if err != nil {
			fmt.Fprintf(env.stderr, "energyflow config check: %s is not valid:\n%v\n", file, err)
			return exitCheckFailed
		}
		fmt.Fprintf(env.stdout, "%s: ok\n", file)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "energyflow config: unknown subcommand %q\n", args[0])
	usage()
	return exitUsage
}
