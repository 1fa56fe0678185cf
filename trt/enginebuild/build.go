// Package enginebuild builds TensorRT plans for an engine bundle on the
// target machine by running NVIDIA's trtexec, and records them in the
// bundle's manifest.
//
// # Concepts
//
// A plan is tied to the TensorRT version and the GPU it was built on, so
// it is written to plans/<trt-version>_<gpu>_<precision>.plan (trt.PlanFile)
// and listed in the manifest's "plans" with those keys; its sha256 goes to
// "files". FP16 plans keep the time embedding, reductions, normalization and
// energy head in FP32 (FP32Layers picks the layers from the ONNX graph).
// All builds share a timing cache in the bundle (plans/timing.cache).
//
// The optional state term (the manifest's "state_energy" block, not in
// "graphs") is built as graph "state_energy" next to the others, always in
// FP32 (trt.StatePlanPrecision), whatever the requested precision.
package enginebuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/manifestedit"
	"github.com/energyflow/edge/trt"
)

// Options of Build.
type Options struct {
	Bundle      string // bundle directory (with manifest.json)
	Precision   string // "fp16" (default) or "fp32"
	Trtexec     string // trtexec path; "" searches PATH, then /usr/src/tensorrt/bin (JetPack)
	WorkspaceMB int    // builder workspace limit (--memPoolSize); 0 leaves trtexec's default
	// Batch range of the optimization profile; zero values mean 1/1/16,
	// with the maximum raised to 1+M when the manifest has M reference
	// actions (the sampler scores a_K with the M references in one batch).
	MinBatch, OptBatch, MaxBatch int
	// TRTVersion and GPU name the plan. Empty: ask Probe, else read them
	// from trtexec's output.
	TRTVersion, GPU string
	// Probe reports the running TensorRT version and GPU name (from
	// trt.Probe in builds with the tensorrt tag); nil skips it.
	Probe  func() (trtVersion, gpu string, err error)
	Graphs []string  // graphs to build; nil builds every graph in the manifest (and "state_energy" when the bundle has the state term)
	DryRun bool      // print the trtexec commands, run nothing
	Log    io.Writer // trtexec's output and progress; nil discards
}

// PlanEntry is one "plans" entry of the manifest.
type PlanEntry struct {
	Graph, File, TRTVersion, GPU, Precision string
}

// Built describes one plan Build wrote (or would write, with DryRun).
type Built struct {
	PlanEntry
	Args         []string // trtexec arguments
	FP32Layers   int      // layers forced to FP32
	SHA256       string
	UnnamedFP32s int // selected nodes without a name (cannot be forced)
}

// trtexecDefaultPaths are where JetPack and the TensorRT tarballs put it.
var trtexecDefaultPaths = []string{"/usr/src/tensorrt/bin/trtexec", "/usr/local/TensorRT/bin/trtexec"}

type graphIO struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
}

type graphEntry struct {
	File    string    `json:"file"`
	Inputs  []graphIO `json:"inputs"`
	Outputs []graphIO `json:"outputs"`
}

const timingCache = "plans/timing.cache"

func (o *Options) defaults() error {
	if o.Precision == "" {
		o.Precision = "fp16"
	}
	if o.MinBatch == 0 {
		o.MinBatch = 1
	}
	if o.OptBatch == 0 {
		o.OptBatch = 1
	}
	var errs []error
	if o.Bundle == "" {
		errs = append(errs, errors.New("enginebuild: bundle: required"))
	}
	if o.Precision != "fp16" && o.Precision != "fp32" {
		errs = append(errs, fmt.Errorf("enginebuild: precision %q: want fp16 or fp32", o.Precision))
	}
	if o.MinBatch < 1 || o.MinBatch > o.OptBatch || (o.MaxBatch != 0 && o.OptBatch > o.MaxBatch) || o.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("enginebuild: batch min/opt/max %d/%d/%d: want 1 ≤ min ≤ opt ≤ max", o.MinBatch, o.OptBatch, o.MaxBatch))
	}
	if o.WorkspaceMB < 0 {
		errs = append(errs, fmt.Errorf("enginebuild: workspace %d MB: want ≥ 0", o.WorkspaceMB))
	}
	if (o.TRTVersion == "") != (o.GPU == "") {
		errs = append(errs, errors.New("enginebuild: give both the TensorRT version and the GPU, or neither"))
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return errors.Join(errs...)
}

// FindTrtexec resolves the trtexec binary.
func FindTrtexec(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("enginebuild: trtexec: %w", err)
		}
		return path, nil
	}
	if p, err := exec.LookPath("trtexec"); err == nil {
		return p, nil
	}
	for _, p := range trtexecDefaultPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("enginebuild: trtexec not found in PATH or /usr/src/tensorrt/bin — install TensorRT (JetPack: sudo apt install tensorrt) or pass --trtexec")
}

// shapeArg renders trtexec's name:dimxdim,... shape list for batch b.
func shapeArg(inputs []graphIO, b int) string {
	parts := make([]string, len(inputs))
	for i, in := range inputs {
		dims := make([]string, len(in.Shape))
		for j, d := range in.Shape {
			if d < 0 {
				d = int64(b)
			}
			dims[j] = strconv.FormatInt(d, 10)
		}
		parts[i] = in.Name + ":" + strings.Join(dims, "x")
	}
	return strings.Join(parts, ",")
}

var (
	reVersion    = regexp.MustCompile(`TensorRT version: (\d+\.\d+\.\d+)`)
	reVersionInt = regexp.MustCompile(`\[TensorRT v(\d{5,6})\]`)
	reDevice     = regexp.MustCompile(`Selected Device: (.+?)\s*$`)
)

// identify reads the TensorRT version and GPU from trtexec's log.
func identify(log []byte) (version, gpu string) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m := reVersion.FindStringSubmatch(line); m != nil && version == "" {
			version = m[1]
		}
		if m := reVersionInt.FindStringSubmatch(line); m != nil && version == "" {
			v, _ := strconv.Atoi(m[1])
			version = trt.FormatTRTVersion(v)
		}
		if m := reDevice.FindStringSubmatch(line); m != nil && gpu == "" {
			gpu = m[1]
		}
	}
	return version, gpu
}

func majorOf(version string) int {
	m, _ := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	return m
}

// Build runs trtexec for each graph of the bundle and records the plans.
func Build(ctx context.Context, opts Options) ([]Built, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	manifestPath := filepath.Join(opts.Bundle, "manifest.json")
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("enginebuild: %w — is %s a bundle?", err, opts.Bundle)
	}
	m, err := manifestedit.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("enginebuild: %s: %w", manifestPath, err)
	}
	graphs := map[string]graphEntry{}
	if ok, err := m.Get("graphs", &graphs); err != nil {
		return nil, err
	} else if !ok || len(graphs) == 0 {
		return nil, fmt.Errorf("enginebuild: %s has no \"graphs\"", manifestPath)
	}
	if err := addStateGraph(m, graphs); err != nil {
		return nil, fmt.Errorf("enginebuild: %s: %w", manifestPath, err)
	}
	if opts.MaxBatch == 0 {
		var refs []json.RawMessage
		if _, err := m.Get("reference_actions", &refs); err != nil {
			return nil, err
		}
		opts.MaxBatch = max(16, opts.OptBatch, 1+len(refs))
		if len(refs) > 0 {
			fmt.Fprintf(opts.Log, "engine build: batch profile %d/%d/%d (the sampler scores 1+%d reference rows per sample)\n",
				opts.MinBatch, opts.OptBatch, opts.MaxBatch, len(refs))
		}
	}
	names := opts.Graphs
	if len(names) == 0 {
		for n := range graphs {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	version, gpu := opts.TRTVersion, opts.GPU
	if version == "" && opts.Probe != nil {
		if v, g, err := opts.Probe(); err == nil {
			version, gpu = v, g
		} else {
			fmt.Fprintf(opts.Log, "engine build: no TensorRT runtime in this binary (%v); taking the version and GPU from trtexec\n", err)
		}
	}
	if version != "" && majorOf(version) >= 11 && opts.Precision == "fp16" {
		return nil, fmt.Errorf("enginebuild: TensorRT %s builds only strongly typed networks (no --fp16 or per-layer precisions): build --precision fp32, or export an FP16 ONNX", version)
	}
	trtexec := opts.Trtexec
	if !opts.DryRun {
		if trtexec, err = FindTrtexec(opts.Trtexec); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(opts.Bundle, "plans"), 0o755); err != nil {
			return nil, fmt.Errorf("enginebuild: %w", err)
		}
	} else if trtexec == "" {
		trtexec = "trtexec"
	}
	var built []Built
	for _, name := range names {
		g, ok := graphs[name]
		if !ok {
			return built, fmt.Errorf("enginebuild: the manifest has no graph %q", name)
		}
		b, err := buildOne(ctx, opts, trtexec, name, g, version, gpu)
		if err != nil {
			return built, err
		}
		if version == "" { // learnt from the first trtexec run
			version, gpu = b.TRTVersion, b.GPU
		}
		built = append(built, b)
	}
	return built, nil
}

// addStateGraph adds the state term's graph (the "state_energy" block:
// cond [B, cond_dim] → state_energy [B]) to graphs when the manifest has
// one.
func addStateGraph(m *manifestedit.Object, graphs map[string]graphEntry) error {
	var block struct {
		Graph string `json:"graph"`
	}
	ok, err := m.Get("state_energy", &block)
	if err != nil || !ok {
		return err
	}
	if block.Graph == "" {
		return errors.New(`state_energy.graph: empty, expected the state graph's file name`)
	}
	var condDim int64
	if ok, err := m.Get("cond_dim", &condDim); err != nil {
		return err
	} else if !ok || condDim < 1 {
		return fmt.Errorf("cond_dim: got %d, expected the width (≥ 1) of the state graph's input cond", condDim)
	}
	graphs[engines.GraphStateEnergy] = graphEntry{File: block.Graph,
		Inputs:  []graphIO{{Name: engines.InputCond, Shape: []int64{-1, condDim}}},
		Outputs: []graphIO{{Name: engines.OutputStateEnergy, Shape: []int64{-1}}}}
	return nil
}

func buildOne(ctx context.Context, opts Options, trtexec, name string, g graphEntry, version, gpu string) (Built, error) {
	onnxPath := filepath.Join(opts.Bundle, filepath.FromSlash(g.File))
	if name == engines.GraphStateEnergy && opts.Precision != trt.StatePlanPrecision {
		fmt.Fprintf(opts.Log, "engine build: %s: built in %s whatever --precision says (the state term's z-scores need it; the graph is small)\n", name, trt.StatePlanPrecision)
		opts.Precision = trt.StatePlanPrecision
	}
	b := Built{PlanEntry: PlanEntry{Graph: name, TRTVersion: version, GPU: gpu, Precision: opts.Precision}}
	if len(g.Inputs) == 0 {
		return b, fmt.Errorf("enginebuild: graph %s lists no inputs in the manifest", name)
	}
	tmp := filepath.Join(opts.Bundle, "plans", fmt.Sprintf(".building-%s-%d.plan", name, os.Getpid()))
	args := []string{
		"--onnx=" + onnxPath,
		"--saveEngine=" + tmp,
		"--minShapes=" + shapeArg(g.Inputs, opts.MinBatch),
		"--optShapes=" + shapeArg(g.Inputs, opts.OptBatch),
		"--maxShapes=" + shapeArg(g.Inputs, opts.MaxBatch),
		"--timingCacheFile=" + filepath.Join(opts.Bundle, filepath.FromSlash(timingCache)),
		"--skipInference",
	}
	if opts.WorkspaceMB > 0 {
		args = append(args, fmt.Sprintf("--memPoolSize=workspace:%dM", opts.WorkspaceMB))
	}
	if opts.Precision == "fp16" {
		model, err := os.ReadFile(onnxPath)
		if err != nil {
			return b, fmt.Errorf("enginebuild: graph %s: %w", name, err)
		}
		graph, err := ParseONNX(model)
		if err != nil {
			return b, fmt.Errorf("enginebuild: %s: %w", onnxPath, err)
		}
		energyOut := ""
		for _, o := range g.Outputs {
			if o.Name == "energy" {
				energyOut = o.Name
			}
		}
		layers, unnamed := FP32Layers(graph, energyOut)
		b.FP32Layers, b.UnnamedFP32s = len(layers), unnamed
		args = append(args, "--fp16")
		if len(layers) > 0 {
			spec := make([]string, 0, len(layers))
			for _, l := range layers {
				if strings.ContainsAny(l, ",:") { // trtexec's list syntax cannot carry these
					continue
				}
				spec = append(spec, l+":fp32")
			}
			list := strings.Join(spec, ",")
			args = append(args, "--precisionConstraints=obey", "--layerPrecisions="+list, "--layerOutputTypes="+list)
		}
		fmt.Fprintf(opts.Log, "engine build: %s: %d layers kept in FP32 (reductions, normalization, time embedding, energy head)\n", name, len(layers))
		if unnamed > 0 {
			fmt.Fprintf(opts.Log, "engine build: %s: warning: %d such nodes have no name in the ONNX graph and stay FP16 — name every node when exporting\n", name, unnamed)
		}
	}
	b.Args = args
	if opts.DryRun {
		if version != "" {
			b.File = trt.PlanFile(name, version, gpu, opts.Precision)
		}
		fmt.Fprintf(opts.Log, "%s %s\n", trtexec, strings.Join(args, " "))
		return b, nil
	}
	fmt.Fprintf(opts.Log, "engine build: %s: running %s (this takes minutes on a Jetson)\n", name, trtexec)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, trtexec, args...)
	cmd.Stdout = io.MultiWriter(&out, opts.Log)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	if runErr != nil {
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: trtexec failed for graph %s: %w\n%s", name, runErr, tail(out.Bytes(), 15))
	}
	if _, err := os.Stat(tmp); err != nil {
		return b, fmt.Errorf("enginebuild: trtexec reported success for graph %s but wrote no plan: %w", name, err)
	}
	seenV, seenG := identify(out.Bytes())
	switch {
	case version == "" && (seenV == "" || seenG == ""):
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: cannot tell the TensorRT version and GPU from trtexec's output; pass --trt-version and --gpu")
	case version == "":
		version, gpu = seenV, seenG
	case seenV != "" && seenV != version:
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: trtexec is TensorRT %s but the runtime is TensorRT %s: the plan would be refused at load — use the trtexec of the installed TensorRT", seenV, version)
	case seenG != "" && seenG != gpu:
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: trtexec built for GPU %q but the runtime sees %q", seenG, gpu)
	}
	if majorOf(version) >= 11 && opts.Precision == "fp16" {
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: TensorRT %s builds only strongly typed networks: build --precision fp32, or export an FP16 ONNX", version)
	}
	b.TRTVersion, b.GPU = version, gpu
	b.File = trt.PlanFile(name, version, gpu, opts.Precision)
	final := filepath.Join(opts.Bundle, filepath.FromSlash(b.File))
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return b, fmt.Errorf("enginebuild: %w", err)
	}
	extra := []string{}
	if _, err := os.Stat(filepath.Join(opts.Bundle, filepath.FromSlash(timingCache))); err == nil {
		extra = append(extra, timingCache)
	}
	if err := RecordPlan(opts.Bundle, b.PlanEntry, extra...); err != nil {
		return b, err
	}
	sum, err := fileSHA256(final)
	if err != nil {
		return b, fmt.Errorf("enginebuild: %w", err)
	}
	b.SHA256 = sum
	fmt.Fprintf(opts.Log, "engine build: %s: wrote %s (TensorRT %s, %s, %s)\n", name, b.File, version, gpu, opts.Precision)
	return b, nil
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
