package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"log/slog"
	"math"

	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/energyflow/edge/camera"
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
	Planner        bool    `json:"planner,omitempty"` // --planner: the K Euler steps alone, as the runtime plans
	// Vision is one entry per image input: the vision graph on one
	// preprocessed frame, which the runtime runs per camera frame, outside
	// the sample call.
	Vision []visionBench `json:"vision,omitempty"`
	// Stages are the control path's stages as the runtime records them
	// (docs/telemetry.md, "Stage latency"), those bench can run: per image
	// input camera_decode, preprocess and encoder of one frame, then
	// sample (one sample call) and sample_step (sample / steps), then
	// rescore (a policy with an energy) and state_term (a bundle with one).
	Stages []stageBench `json:"stages"`
}

// visionBench is the latency of one image input's vision graph.
type visionBench struct {
	Obs      string  `json:"obs"`
	Features int     `json:"features"`
	P50ms    float64 `json:"p50_ms"`
	P90ms    float64 `json:"p90_ms"`
	P99ms    float64 `json:"p99_ms"`
}

// stageBench is one stage's latency: Obs names the image input of a
// per-frame stage ("" for sample and sample_step), Detail what was timed.
type stageBench struct {
	Stage  string  `json:"stage"`
	Obs    string  `json:"obs,omitempty"`
	Detail string  `json:"detail"`
	P50ms  float64 `json:"p50_ms"`
	P90ms  float64 `json:"p90_ms"`
}

// newStageBench is the stage's entry for the durations d.
func newStageBench(stage, obs, detail string, d []time.Duration) stageBench {
	s := stageBench{Stage: stage, Obs: obs, Detail: detail}
	s.P50ms, s.P90ms, _, _, _ = percentiles(d)
	return s
}

// benchVision times, for every image input of b, n frames through the
// runtime's camera path: decode of a synthetic JPEG of the input's camera
// size (camera.ToRGB), the manifest's preprocessing and the vision graph.
// It returns the vision graph's entry and the three stages per input.
func benchVision(b *engines.Bundle, be engines.Backend, n, warmup int) ([]visionBench, []stageBench, error) {
	var out []visionBench
	var stages []stageBench
	for _, o := range b.Manifest.Obs {
		if o.Kind != engines.ObsImage {
			continue
		}
		if o.Preprocess == nil {
			return nil, nil, fmt.Errorf("bundle image input %q has no preprocess block", o.Name)
		}
		spec, err := camera.PreprocessFromSlices(o.Preprocess.Resize, o.Preprocess.Crop, o.Preprocess.ChannelOrder, o.Preprocess.Mean, o.Preprocess.Std)
		if err != nil {
			return nil, nil, fmt.Errorf("bundle image input %q: %w", o.Name, err)
		}
		pre, err := camera.NewPreprocessor(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("bundle image input %q: %w", o.Name, err)
		}
		w, h := frameSize(o)
		frame, err := gradientJPEG(w, h)
		if err != nil {
			return nil, nil, fmt.Errorf("bundle image input %q: synthetic %d×%d frame: %w", o.Name, w, h, err)
		}
		enc, err := engines.NewVisionEncoder(b, be, o.Name)
		if err != nil {
			return nil, nil, err
		}
		if oh, ow := spec.OutputSize(w, h); 3*oh*ow != enc.ImageSize() {
			enc.Close()
			return nil, nil, fmt.Errorf("bundle image input %q: a %d×%d frame preprocesses to 3×%d×%d, but the vision graph takes %d floats", o.Name, w, h, oh, ow, enc.ImageSize())
		}
		var rgb camera.RGB
		var dec camera.JPEGDecoder
		img, feats := make([]float32, enc.ImageSize()), make([]float32, enc.Features())
		decode, prep, lat := make([]time.Duration, 0, n), make([]time.Duration, 0, n), make([]time.Duration, 0, n)
		for i := 0; i < warmup+n && err == nil; i++ {
			t0 := time.Now()
			if err = camera.ToRGB(&rgb, &frame, &dec, camera.RangeLimited); err != nil {
				break
			}
			t1 := time.Now()
			if err = pre.Apply(img, &rgb); err != nil {
				break
			}
			t2 := time.Now()
			err = enc.Encode(img, feats)
			if i >= warmup {
				decode, prep, lat = append(decode, t1.Sub(t0)), append(prep, t2.Sub(t1)), append(lat, time.Since(t2))
			}
		}
		enc.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("bundle image input %q: %w", o.Name, err)
		}
		v := visionBench{Obs: o.Name, Features: len(feats)}
		v.P50ms, v.P90ms, v.P99ms, _, _ = percentiles(lat)
		out = append(out, v)
		oh, ow := spec.OutputSize(w, h)
		stages = append(stages,
			newStageBench("camera_decode", o.Name, fmt.Sprintf("%d×%d JPEG → RGB", w, h), decode),
			newStageBench("preprocess", o.Name, fmt.Sprintf("→ 3×%d×%d", oh, ow), prep),
			newStageBench("encoder", o.Name, fmt.Sprintf("vision graph, %d features", len(feats)), lat))
	}
	return out, stages, nil
}

// benchScores times the two scores the runtime computes every tick beside
// the sample, as it computes them: rescore, the committed chunk's energies
// under the newest observation on a batch-1 sampler of its own (Score; with
// the state term when the bundle has one, as the runtime's re-scoring
// sampler runs it), and state_term, the state graph alone on the loop's
// observation (StateTerm.Energy). A policy without an energy has no
// rescore, a bundle without a state term no state_term.
func benchScores(b *engines.Bundle, be engines.Backend, opts engines.SamplerOptions, cond, actions []float32, n, warmup int) ([]stageBench, error) {
	var out []stageBench
	time1 := func(f func() error) ([]time.Duration, error) {
		d := make([]time.Duration, 0, n)
		for i := 0; i < warmup+n; i++ {
			t0 := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			if i >= warmup {
				d = append(d, time.Since(t0))
			}
		}
		return d, nil
	}
	opts.Batch = 1
	sc, err := engines.NewSampler(b, be, opts)
	if err != nil {
		return nil, fmt.Errorf("re-scoring sampler: %w", err)
	}
	defer sc.Close()
	if sc.HasEnergy() {
		d, err := time1(func() error { _, err := sc.Score(actions, cond); return err })
		if err != nil {
			return nil, fmt.Errorf("rescore: %w", err)
		}
		what := fmt.Sprintf("the committed chunk's energy at γ and %d reference energies", len(b.Manifest.ReferenceActions))
		if opts.NoReferences {
			what = "the committed chunk's energy at γ"
		}
		if b.Manifest.HasStateEnergy() {
			what += ", and the state term"
		}
		out = append(out, newStageBench("rescore", "", what, d))
	}
	if b.Manifest.HasStateEnergy() {
		st, err := engines.NewStateTerm(b, be)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		d, err := time1(func() error { _, err := st.Energy(cond); return err })
		if err != nil {
			return nil, fmt.Errorf("state term: %w", err)
		}
		out = append(out, newStageBench("state_term", "", "the state graph on the newest observation", d))
	}
	return out, nil
}

// frameSize is the camera frame size of image input o: its camera's when
// the manifest names one, else the size it is resized to, else its
// graph's input size.
func frameSize(o engines.ObsSpec) (w, h int) {
	switch p := o.Preprocess; {
	case o.Camera != nil && o.Camera.Width > 0 && o.Camera.Height > 0:
		return o.Camera.Width, o.Camera.Height
	case len(p.Resize) == 2 && p.Resize[0] > 0:
		return p.Resize[1], p.Resize[0]
	case len(o.Shape) == 3:
		return o.Shape[2], o.Shape[1]
	}
	return 640, 480
}

// gradientJPEG is a w×h colour gradient as a JPEG camera frame (quality
// 90, as a webcam's MJPEG).
func gradientJPEG(w, h int) (camera.Frame, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{R: uint8(255 * x / max(w-1, 1)), G: uint8(255 * y / max(h-1, 1)), B: uint8((x + y) % 256), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		return camera.Frame{}, err
	}
	return camera.Frame{Format: camera.FormatJPEG, Width: w, Height: h, Data: buf.Bytes()}, nil
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
	planner := fs.Bool("planner", false, "time the sample as the runtime's planner runs it: the K Euler steps alone (no energy at γ, no references; the rescore stage still scores)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow bench --bundle DIR [--steps K] [--backend ort|trt] [--batch N] [--n N] [--planner]\n\nTimes whole samples (K Euler steps, the energy at γ and the reference energies; for a\ndiffusion bundle S DDIM steps) and prints p50/p90/p99 latency, the share of time\noutside the backend and allocations; for a bundle with image inputs, also the vision\ngraph per camera frame. A stage table gives p50/p90 of the stages the runtime records:\ncamera_decode (a synthetic JPEG of the camera's size), preprocess and encoder per frame,\nsample per sample call and sample_step = sample / steps, rescore (the committed chunk's\nenergies, as the runtime re-scores it every tick) and state_term (the state graph).\n\nflags:")
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
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: *steps, Batch: *batch, Seed: *seed, NoReferences: *noRefs,
		ActionsOnly: *planner, Logger: log})
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
	if *noRefs || *planner || !s.HasEnergy() {
		rep.References = 0
	}
	rep.Planner = *planner && s.HasEnergy()
	rep.P50ms, rep.P90ms, rep.P99ms, rep.MeanMs, rep.MinMs = percentiles(lat)
	if rep.Vision, rep.Stages, err = benchVision(b, be, *n, *warmup); err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	perStep := make([]time.Duration, len(lat))
	for i, d := range lat {
		perStep[i] = d / time.Duration(max(rep.Steps, 1))
	}
	rep.Stages = append(rep.Stages,
		newStageBench("sample", "", fmt.Sprintf("one sample call, %d steps, batch %d", rep.Steps, rep.Batch), lat),
		newStageBench("sample_step", "", fmt.Sprintf("sample / %d", rep.Steps), perStep))
	scoreStages, err := benchScores(b, be, engines.SamplerOptions{Steps: *steps, Seed: *seed, NoReferences: *noRefs, Logger: log},
		cond[:b.Manifest.CondDim], res[0].Actions, *n, *warmup)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow bench: %v\n", err)
		return exitFailure
	}
	rep.Stages = append(rep.Stages, scoreStages...)
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
	switch {
	case rep.Planner:
		fmt.Fprintf(w, "sampling  K=%d batch=%d n=%d (warm-up %d); per sample: K ∇E calls, as the runtime's planner (no energy at γ, no references)\n", rep.Steps, rep.Batch, rep.N, *warmup)
	case s.HasEnergy():
		fmt.Fprintf(w, "sampling  K=%d batch=%d n=%d (warm-up %d); per sample: K ∇E calls, the energy at γ, %d reference rows in one call\n", rep.Steps, rep.Batch, rep.N, *warmup, rep.References)
	default:
		fmt.Fprintf(w, "sampling  DDIM S=%d batch=%d n=%d (warm-up %d); per sample: S eps calls (policy %s: no energy, no references)\n", rep.Steps, rep.Batch, rep.N, *warmup, b.Manifest.Policy)
	}
	fmt.Fprintf(w, "latency   p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  (mean %.2f, min %.2f)\n", rep.P50ms, rep.P90ms, rep.P99ms, rep.MeanMs, rep.MinMs)
	fmt.Fprintf(w, "backend   %.1f calls/sample, %.3f ms/call; time outside the backend %.2f%%\n", rep.BackendCalls, rep.BackendCallMs, rep.OutsidePercent)
	fmt.Fprintf(w, "cpu       %.2f ms per sample (process user+sys; less sensitive to a loaded machine than latency)\n", rep.CPUms)
	fmt.Fprintf(w, "allocs    %.2f per sample (%.0f B)\n", rep.AllocsPerCall, rep.BytesPerCall)
	for _, v := range rep.Vision {
		fmt.Fprintf(w, "vision    %q: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms per frame, %d features (runs per camera frame, outside the sample)\n", v.Obs, v.P50ms, v.P90ms, v.P99ms, v.Features)
	}
	fmt.Fprintf(w, "stages    %-14s %-10s %9s %9s  %s\n", "stage", "input", "p50 ms", "p90 ms", "what")
	for _, s := range rep.Stages {
		fmt.Fprintf(w, "          %-14s %-10s %9.3f %9.3f  %s\n", s.Stage, s.Obs, s.P50ms, s.P90ms, s.Detail)
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
