package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/trt"
	"github.com/energyflow/edge/trt/enginebuild"
)

const engineUsage = `usage: energyflow engine <subcommand> [flags]

subcommands:
  build   build TensorRT plans for a bundle with trtexec on this machine
  info    show the GPU and TensorRT version and which plans of a bundle match

Run 'energyflow engine <subcommand> --help' for its flags. docs/jetson.md
walks through building the shim and the engines on a Jetson.
`

// cmdEngine builds TensorRT plans (engine build) and reports which plan the
// runtime would load (engine info).
func cmdEngine(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(env.stderr, engineUsage)
		return exitUsage
	}
	switch args[0] {
	case "build":
		return cmdEngineBuild(ctx, env, args[1:])
	case "info":
		return cmdEngineInfo(env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(env.stdout, engineUsage)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "energyflow engine: unknown subcommand %q\n\n%s", args[0], engineUsage)
	return exitUsage
}

func probeTRT() (string, string, error) {
	info, err := trt.Probe(0)
	if err != nil {
		return "", "", err
	}
	return info.TRTVersion, info.Name, nil
}

func cmdEngineBuild(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("energyflow engine build", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var o enginebuild.Options
	var graphs string
	fs.StringVar(&o.Bundle, "bundle", "", "bundle directory (required)")
	fs.StringVar(&o.Precision, "precision", "fp16", "fp16 (time embedding, reductions, normalization, energy head kept FP32) or fp32")
	fs.StringVar(&o.Trtexec, "trtexec", "", "path of trtexec (default: PATH, then /usr/src/tensorrt/bin/trtexec)")
	fs.IntVar(&o.WorkspaceMB, "workspace", 0, "builder workspace limit in MiB (default: trtexec's)")
	fs.IntVar(&o.MaxBatch, "max-batch", 0, "largest batch of the optimization profile; min and opt are 1 (default 16, or 1+M for M reference actions)")
	fs.StringVar(&graphs, "graph", "", "comma-separated graphs to build (default: every graph in the manifest, and state_energy when the bundle has the state term)")
	fs.StringVar(&o.TRTVersion, "trt-version", "", "TensorRT version to name the plan with (default: the runtime's, else trtexec's)")
	fs.StringVar(&o.GPU, "gpu", "", "GPU name to name the plan with, as CUDA reports it (default: the runtime's, else trtexec's)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the trtexec commands and run nothing")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if o.Bundle == "" || fs.NArg() > 0 {
		fmt.Fprintln(env.stderr, "energyflow engine build: --bundle DIR is required and there are no positional arguments")
		fs.Usage()
		return exitUsage
	}
	if graphs != "" {
		o.Graphs = strings.Split(graphs, ",")
	}
	o.Probe = probeTRT
	o.Log = env.stderr
	built, err := enginebuild.Build(ctx, o)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow engine build: %v\n", err)
		return exitFailure
	}
	for _, b := range built {
		if o.DryRun {
			continue
		}
		fmt.Fprintf(env.stdout, "%s\t%s\tTensorRT %s\t%s\t%s\tsha256 %s\n", b.Graph, b.File, b.TRTVersion, b.GPU, b.Precision, b.SHA256)
	}
	return exitOK
}

func cmdEngineInfo(env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("energyflow engine info", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	bundle := fs.String("bundle", "", "bundle directory: also say which of its plans this machine would load")
	device := fs.Int("device", 0, "CUDA device ordinal")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	info, err := trt.Probe(*device)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow engine info: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(env.stdout, "gpu\t%s (device %d, compute %s, integrated %v)\ntensorrt\t%s\ncuda runtime\t%d\n",
		info.Name, info.Device, info.ComputeCapability, info.Integrated, info.TRTVersion, info.CUDARuntimeVersion)
	if *bundle == "" {
		return exitOK
	}
	data, err := os.ReadFile(filepath.Join(*bundle, "manifest.json"))
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow engine info: %v\n", err)
		return exitFailure
	}
	var m struct {
		Graphs      map[string]json.RawMessage `json:"graphs"`
		Plans       []engines.PlanInfo         `json:"plans"`
		StateEnergy json.RawMessage            `json:"state_energy"` // the state term's graph has plans too
	}
	if err := json.Unmarshal(data, &m); err != nil {
		fmt.Fprintf(env.stderr, "energyflow engine info: manifest: %v\n", err)
		return exitFailure
	}
	names := make([]string, 0, len(m.Graphs))
	for n := range m.Graphs {
		names = append(names, n)
	}
	if len(m.StateEnergy) > 0 && string(m.StateEnergy) != "null" {
		names = append(names, engines.GraphStateEnergy)
	}
	sort.Strings(names)
	code := exitOK
	for _, n := range names {
		p, err := trt.SelectPlan(m.Plans, n, info.TRTVersion, info.Name, "")
		if err != nil {
			fmt.Fprintf(env.stdout, "%s\tno plan: %v\n", n, err)
			code = exitCheckFailed
			continue
		}
		fmt.Fprintf(env.stdout, "%s\t%s (%s)\n", n, p.File, p.Precision)
	}
	return code
}
