package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"

	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/trt"
)

// backendFlags are the flags bench and bundle verify share.
type backendFlags struct {
	backend string
	lib     string
	threads int
	noSpin  bool
}

func (f *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "ort", "inference backend: ort (ONNX Runtime, CPU) or trt (TensorRT, GPU)")
	fs.StringVar(&f.lib, "ort-lib", "", "path of libonnxruntime.so.1 (default: $ONNXRUNTIME_LIB, the system library path, then .deps/ of the project)")
	fs.IntVar(&f.threads, "threads", engines.DefaultIntraOpThreads, "ONNX Runtime intra-op threads")
	fs.BoolVar(&f.noSpin, "no-spin", false, "ONNX Runtime: idle threads sleep instead of busy-waiting")
}

// open builds the backend the flags name; the caller closes it.
func (f *backendFlags) open(log *slog.Logger) (engines.Backend, string, error) {
	switch f.backend {
	case "ort":
		be, err := engines.NewORT(engines.ORTOptions{LibraryPath: f.lib, IntraOpThreads: f.threads, DisableSpinning: f.noSpin, Logger: log})
		if err != nil {
			return nil, "", err
		}
		path, ver := be.Library()
		spin := ""
		if f.noSpin {
			spin = ", no spinning"
		}
		return be, fmt.Sprintf("ort (ONNX Runtime %s at %s, %d intra-op threads%s)", ver, path, f.threads, spin), nil
	case "trt":
		be, err := trt.NewBackend(trt.Options{Logger: log})
		if err != nil {
			if errors.Is(err, trt.ErrNoTensorRT) {
				return nil, "", fmt.Errorf("TensorRT backend not available in this build: %w", err)
			}
			return nil, "", err
		}
		return be, "trt (TensorRT)", nil
	}
	return nil, "", fmt.Errorf("unknown backend %q: want ort or trt", f.backend)
}

func cliLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// benchReport is what bench prints (--json prints it as is).
type benchReport struct {
	Bundle         string  `json:"bundle"`
	Policy         string  `json:"policy"` // "energyflow" (Euler steps) or "diffusion" (DDIM steps)
	Backend        string  `json:"backend"`
	Steps          int     `json:"steps"`
	Batch          int     `json:"batch"`
	N              int     `json:"n"`
	P50ms          float64 `json:"p50_ms"`
	P90ms          float64 `json:"p90_ms"`
	P99ms          float64 `json:"p99_ms"`
	MeanMs         float64 `json:"mean_ms"`
	MinMs          float64 `json:"min_ms"`
	BackendCalls   float64 `json:"backend_calls_per_sample"`
	BackendCallMs  float64 `json:"backend_ms_per_call"`
	OutsidePercent float64 `json:"outside_backend_percent"`
	AllocsPerCall  float64 `json:"allocs_per_sample"`
	BytesPerCall   float64 `json:"bytes_per_sample"`
	CPUms          float64 `json:"cpu_ms_per_sample"` // process CPU time (user+sys) per sample call
	Fused          bool    `json:"fused"`
	References     int     `json:"references"`
	// Vision is one entry per image input: the vision graph on one
	// preprocessed frame, which the runtime runs per camera frame, outside
	// the sample call.
	Vision []visionBench `json:"vision,omitempty"`
}

// visionBench is the latency of one image input's vision graph.
type visionBench struct {
	Obs      string  `json:"obs"`
	Features int     `json:"features"`
	P50ms    float64 `json:"p50_ms"`
	P90ms    float64 `json:"p90_ms"`
	P99ms    float64 `json:"p99_ms"`
}

// benchVision times n encodes of a blank frame for every image input of b.
func benchVision(b *engines.Bundle, be engines.Backend, n, warmup int) ([]visionBench, error) {
	var out []visionBench
	for _, o := range b.Manifest.Obs {
		if o.Kind != engines.ObsImage {
			continue
		}
		enc, err := engines.NewVisionEncoder(b, be, o.Name)
		if err != nil {
			return nil, err
		}
		img, feats := make([]float32, enc.ImageSize()), make([]float32, enc.Features())
		lat := make([]time.Duration, 0, n)
		for i := 0; i < warmup+n && err == nil; i++ {
			t0 := time.Now()
			err = enc.Encode(img, feats)
			if i >= warmup {
				lat = append(lat, time.Since(t0))
			}
		}
		enc.Close()
		if err != nil {
			return nil, err
		}
		v := visionBench{Obs: o.Name, Features: len(feats)}
		v.P50ms, v.P90ms, v.P99ms, _, _ = percentiles(lat)
		out = append(out, v)
	}
	return out, nil
}

// cmdBench measures sampling latency of a bundle:
//
//	energyflow bench --bundle DIR [--steps K] [--backend ort|trt] [--batch N] [--n N]
func cmdBench(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var bf backendFlags
	bf.register(fs)
	dir := fs.String("bundle", "", "engine bundle directory (required)")
	steps := fs.Int("steps", 0, "sampler steps: Euler steps K, or DDIM steps S for a diffusion bundle (default: the manifest's sampler.steps)")
	batch := fs.Int("batch", 1, "rows per sample call")
	n := fs.Int("n", 100, "timed samples")
	warmup := fs.Int("warmup", 5, "untimed samples first")
	seed := fs.Uint64("seed", 0, "noise seed")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noRefs := fs.Bool("no-references", false, "skip the M reference energies (centered reward) in the final call")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow bench --bundle DIR [--steps K] [--backend ort|trt] [--batch N] [--n N]\n\nTimes whole samples (K Euler steps, the energy at γ and the reference energies; for a\ndiffusion bundle S DDIM steps) and prints p50/p90/p99 latency, the share of time\noutside the backend and allocations; for a bundle with image inputs, also the vision\ngraph per camera frame.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *dir == "" || fs.NArg() > 0 || *n < 1 || *batch < 1 || *warmup < 0 || *steps < 0 {
		fs.Usage()
		return exitUsage
	}
	log := cliLogger(env.stderr)
	b, err := engines.LoadBundle(*dir)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	be, desc, err := bf.open(log)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	defer be.Close()
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: *steps, Batch: *batch, Seed: *seed, NoReferences: *noRefs, Logger: log})
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	defer s.Close()

	cond := make([]float32, *batch*b.Manifest.CondDim) // standardized observations at their mean
	res := make([]engines.Result, *batch)
	for i := 0; i < *warmup+1; i++ {
		if err := s.SampleBatch(cond, res); err != nil {
			fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
			return exitFailure
		}
	}
	s.ResetStats()
	lat := make([]time.Duration, 0, *n)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	for i := 0; i < *n; i++ {
		if ctx.Err() != nil {
			fmt.Fprintln(env.stderr, "energyflow bench: interrupted")
			return 130
		}
		t0 := time.Now()
		err := s.SampleBatch(cond, res)
		lat = append(lat, time.Since(t0))
		if err != nil {
			fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
			return exitFailure
		}
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	st := s.Stats()
	rep := benchReport{
		Bundle: b.Dir, Policy: b.Manifest.Policy, Backend: desc, Steps: s.Steps(), Batch: *batch, N: *n, Fused: s.Fused(), References: len(b.Manifest.ReferenceActions),
		BackendCalls:   float64(st.BackendCalls) / float64(*n),
		BackendCallMs:  ms(st.BackendTime) / float64(max(st.BackendCalls, 1)),
		OutsidePercent: 100 * float64(st.TotalTime-st.BackendTime) / float64(st.TotalTime),
		AllocsPerCall:  float64(ms1.Mallocs-ms0.Mallocs) / float64(*n),
		BytesPerCall:   float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(*n),
		CPUms:          ms(cpu) / float64(*n),
	}
	if *noRefs || !s.HasEnergy() {
		rep.References = 0
	}
	rep.P50ms, rep.P90ms, rep.P99ms, rep.MeanMs, rep.MinMs = percentiles(lat)
	if rep.Vision, err = benchVision(b, be, *n, *warmup); err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitFailure
		}
		return exitOK
	}
	w := env.stdout
	fmt.Fprintf(w, "bundle    %s (%s)\n", b.Manifest.Name, b.Dir)
	fmt.Fprintf(w, "backend   %s%s\n", desc, map[bool]string{true: ", fused sampler", false: ""}[rep.Fused])
	if s.HasEnergy() {
		fmt.Fprintf(w, "sampling  K=%d batch=%d n=%d (warm-up %d); per sample: K ∇E calls, the energy at γ, %d reference rows in one call\n", rep.Steps, rep.Batch, rep.N, *warmup, rep.References)
	} else {
		fmt.Fprintf(w, "sampling  DDIM S=%d batch=%d n=%d (warm-up %d); per sample: S eps calls (policy %s: no energy, no references)\n", rep.Steps, rep.Batch, rep.N, *warmup, b.Manifest.Policy)
	}
	fmt.Fprintf(w, "latency   p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  (mean %.2f, min %.2f)\n", rep.P50ms, rep.P90ms, rep.P99ms, rep.MeanMs, rep.MinMs)
	fmt.Fprintf(w, "backend   %.1f calls/sample, %.3f ms/call; time outside the backend %.2f%%\n", rep.BackendCalls, rep.BackendCallMs, rep.OutsidePercent)
	fmt.Fprintf(w, "cpu       %.2f ms per sample (process user+sys; less sensitive to a loaded machine than latency)\n", rep.CPUms)
	fmt.Fprintf(w, "allocs    %.2f per sample (%.0f B)\n", rep.AllocsPerCall, rep.BytesPerCall)
	for _, v := range rep.Vision {
		fmt.Fprintf(w, "vision    %q: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms per frame, %d features (runs per camera frame, outside the sample)\n", v.Obs, v.P50ms, v.P90ms, v.P99ms, v.Features)
	}
	return exitOK
}

// cpuTime returns the process's user+sys CPU time so far (0 if unknown).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles returns p50, p90, p99 (nearest rank), mean and min in ms.
func percentiles(d []time.Duration) (p50, p90, p99, mean, minimum float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return rank(50), rank(90), rank(99), ms(sum) / float64(len(s)), ms(s[0])
}
