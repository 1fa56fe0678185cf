package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/runtime"
)

// cmdBundle inspects engine bundles: `energyflow bundle verify DIR`.
func cmdBundle(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(env.stderr, "usage: energyflow bundle verify [--backend ort|trt] [--steps K] DIR\n\nverify checks the manifest, the sha256 of every file, each graph's inputs and\noutputs against the manifest, draws one test sample (energyflow or diffusion)\nand, when the bundle has the state term, evaluates it once.")
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "verify":
		return bundleVerify(ctx, env, args[1:])
	}
	fmt.Fprintf(env.stderr, "energyflow bundle: unknown subcommand %q (want verify)\n", args[0])
	return exitUsage
}

// bundleVerify exits 0 when the bundle is good, 3 when a check fails, 2
// when DIR is not a folder and 1 when it cannot check (no ONNX Runtime, no
// TensorRT).
func bundleVerify(_ context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("bundle verify", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var bf backendFlags
	bf.register(fs)
	steps := fs.Int("steps", 0, "sampler steps of the test sample: Euler steps K or DDIM steps S (default: the manifest's)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: energyflow bundle verify [flags] DIR\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	dir := fs.Arg(0)
	if err := fs.Parse(fs.Args()[min(1, fs.NArg()):]); err != nil || dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	w := env.stdout
	fail := func(what string, err error) int {
		fmt.Fprintf(w, "FAIL  %s\n", what)
		fmt.Fprintf(env.stderr, "energyflow bundle verify: %v\n", err)
		return exitCheckFailed
	}

	// A path that names no folder is a mistake on the command line, not a bad bundle.
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(env.stderr, "energyflow bundle verify: %s: no such folder\n", dir)
		return exitUsage
	} else if err == nil && !fi.IsDir() {
		fmt.Fprintf(env.stderr, "energyflow bundle verify: %s: not a folder (want an engine bundle's folder)\n", dir)
		return exitUsage
	}
	b, err := engines.LoadBundle(dir)
	if err != nil {
		return fail("manifest and files", err)
	}
	m := &b.Manifest
	fmt.Fprintf(w, "bundle %s (%s)\n  name %q, created %s, source commit %s\n", b.Dir, m.Policy, m.Name, m.Created, m.SourceCommit)
	if m.HasEnergy() {
		fmt.Fprintf(w, "ok    manifest: format %d, D_a=%d T_p=%d T_o=%d T_a=%d cond_dim=%d, K=%d, M=%d reference actions\n",
			m.FormatVersion, m.ActionDim, m.PredHorizon, m.ObsHorizon, m.ActionHorizon, m.CondDim, m.Sampler.Steps, len(m.ReferenceActions))
	} else {
		fmt.Fprintf(w, "ok    manifest: format %d, D_a=%d T_p=%d T_o=%d T_a=%d cond_dim=%d, DDIM S=%d of N=%d timesteps, clip_sample %g\n",
			m.FormatVersion, m.ActionDim, m.PredHorizon, m.ObsHorizon, m.ActionHorizon, m.CondDim, m.Sampler.Steps, m.Schedule.NumTrainTimesteps, m.Schedule.ClipSample)
	}
	for _, o := range m.Obs {
		fmt.Fprintf(w, "        obs %q: %s %v (width %d in cond)\n", o.Name, o.Kind, o.Shape, o.Width())
	}
	fmt.Fprintf(w, "ok    files: %d sha256 verified\n", len(m.Files))
	if c := m.Calibration; c != nil {
		if cl := c.ClosedLoop; cl != nil {
			used := "used by the energy stop"
			if !m.HasEnergy() { // a diffusion policy: only its state term is calibrated, and watched only when asked
				used = "used when safety.energy.scores lists " + cl.Score
			}
			if len(c.ClosedLoopOthers) > 0 {
				used += " at any rate and K without one of its own"
			}
			printManifestClosedLoop(w, "ok    calibration: closed-loop, "+used, cl)
			for i, o := range c.ClosedLoopOthers {
				printManifestClosedLoop(w, fmt.Sprintf("ok    calibration: closed-loop for %g Hz and K=%d (closed_loop_others[%d]), used by a loop at that rate and K", o.RateHz, o.StepsK, i), o)
			}
			if c.Recommended.Score != "" {
				fmt.Fprintf(w, "        held-out windows (the fallback under another rule): stop when %s > %.6g (%s)\n", c.Recommended.Score, c.Recommended.Threshold, c.Recommended.Rule)
			}
		} else {
			fmt.Fprintf(w, "ok    calibration: stop when %s > %.6g (%s)\n", c.Recommended.Score, c.Recommended.Threshold, c.Recommended.Rule)
		}
	} else if !m.HasEnergy() {
		fmt.Fprintf(w, "note  energy: none — policy %q has no energy; the runtime turns the energy stop off (every other safety check stays on)\n", m.Policy)
	} else {
		fmt.Fprintln(w, "note  calibration: none (run `python -m energyflow calibrate`; the runtime then needs a configured threshold)")
	}
	if se := m.StateEnergy; se != nil {
		transition := ""
		if len(se.Components) > 1 {
			transition = " with " + strings.Join(se.Components[1:], ", ")
		}
		fmt.Fprintf(w, "ok    state term %s: reading %s over %d noise levels (σ %.3g–%.3g)%s; held-out q%s %.6g (n=%d; mean %.4g, std %.4g, max %.4g): the stop's threshold for state_energy without a closed-loop calibration of it\n",
			se.Graph, se.Reading, len(se.Sigmas), se.Sigmas[0], se.Sigmas[len(se.Sigmas)-1], transition, engines.StateEnergyQuantile,
			se.Calibration.Quantiles[engines.StateEnergyQuantile], se.Calibration.N, se.Calibration.Mean, se.Calibration.Std, se.Calibration.Max)
	}

	log := cliLogger(env.stderr)
	be, desc, err := bf.open(log)
	if err != nil {
		fmt.Fprintf(env.stderr, "energyflow bundle verify: cannot check the graphs: %v\n", err)
		return exitFailure
	}
	defer be.Close()

	// Graph I/O against the manifest: the backend checks on Open.
	frame := make(engines.ObsFrame, len(m.Obs))
	for i, o := range m.Obs {
		if o.Kind != engines.ObsImage {
			if o.Norm != nil {
				frame[i] = append([]float32(nil), o.Norm.Mean...) // standardizes to 0
			} else {
				frame[i] = make([]float32, o.Width())
			}
			continue
		}
		enc, err := engines.NewVisionEncoder(b, be, o.Name)
		if err != nil {
			return fail("graph "+m.Graphs[o.Graph].File, err)
		}
		frame[i] = make([]float32, enc.Features())
		err = enc.Encode(make([]float32, enc.ImageSize()), frame[i])
		enc.Close()
		if err == nil && !finite(frame[i]) {
			err = fmt.Errorf("vision features of a blank image are not finite: %v", frame[i])
		}
		if err != nil {
			return fail("graph "+m.Graphs[o.Graph].File, err)
		}
		fmt.Fprintf(w, "ok    graph %s: I/O matches the manifest, %d features on a blank image\n", m.Graphs[o.Graph].File, len(frame[i]))
	}
	graph := m.Graphs[m.PolicyGraph()].File
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: *steps, Logger: log})
	if err != nil {
		return fail("graph "+graph, err)
	}
	defer s.Close()
	fmt.Fprintf(w, "ok    graph %s: I/O matches the manifest on %s\n", graph, desc)

	hist := make([]engines.ObsFrame, m.ObsHorizon)
	for i := range hist {
		hist[i] = frame
	}
	var r engines.Result
	t0 := time.Now()
	err = s.SampleObs(hist, &r)
	took := time.Since(t0)
	if err == nil && !finite(r.Actions) {
		err = fmt.Errorf("test sample has non-finite actions: %v", r.Actions)
	}
	if !s.HasEnergy() {
		if err != nil {
			return fail("test sample", err)
		}
		fmt.Fprintf(w, "ok    test sample (observations at their mean, seed 0, DDIM S=%d): finite actions, %v (first call, includes warm-up)\n",
			s.Steps(), took.Round(time.Microsecond))
		if s.HasStateEnergy() {
			t0 := time.Now()
			x, err := s.StateEnergyObs(hist)
			if code := stateEvaluation(w, m, x, time.Since(t0), err, fail); code != exitOK {
				return code
			}
		}
		fmt.Fprintln(w, "verify: OK")
		return exitOK
	}
	if err == nil && !finite([]float32{r.Energy, r.RefEnergyMean}) {
		err = fmt.Errorf("test sample is not finite: energy %v, reference mean %v", r.Energy, r.RefEnergyMean)
	}
	var sc engines.Score
	if err == nil {
		sc, err = s.ScoreObs(r.Actions, hist)
		if err == nil && math.Abs(float64(sc.Energy-r.Energy)) > 1e-3*math.Max(1, math.Abs(float64(r.Energy))) {
			err = fmt.Errorf("re-scoring the sampled actions gave energy %v, the sample %v", sc.Energy, r.Energy)
		}
	}
	if err != nil {
		return fail("test sample", err)
	}
	fmt.Fprintf(w, "ok    test sample (observations at their mean, seed 0, K=%d): energy %.6g, centered reward %.6g, %v (first call, includes warm-up)\n",
		s.Steps(), r.Energy, r.CenteredReward, took.Round(time.Microsecond))
	if lp := m.LatePolicy; lp != nil {
		if err := verifyLate(w, b, be, *steps, hist, log); err != nil {
			return fail("graph "+m.Graphs[lp.Graph].File, err)
		}
	}
	if s.HasStateEnergy() {
		t0 := time.Now()
		x, err := s.StateEnergyObs(hist)
		if code := stateEvaluation(w, m, x, time.Since(t0), err, fail); code != exitOK {
			return code
		}
		if math.Abs(float64(sc.StateEnergy-x)) > 1e-5*math.Max(1, math.Abs(float64(x))) {
			return fail("state term", fmt.Errorf("re-scoring gave state_energy %v, the state term alone %v", sc.StateEnergy, x))
		}
	}
	fmt.Fprintln(w, "verify: OK")
	return exitOK
}

// stateEvaluation reports bundle verify's test evaluation of the state term
// (observations at their mean): ok with the value, or FAIL when it errs or
// is not finite.
func stateEvaluation(w io.Writer, m *engines.Manifest, x float32, took time.Duration, err error, fail func(string, error) int) int {
	if err == nil && !finite([]float32{x}) {
		err = fmt.Errorf("state_energy of the mean observation is %v, expected a finite number", x)
	}
	if err != nil {
		return fail("state term "+m.StateEnergy.Graph, err)
	}
	q := m.StateEnergy.Calibration.Quantiles[engines.StateEnergyQuantile]
	fmt.Fprintf(w, "ok    state term test evaluation (observations at their mean): state_energy %.6g (held-out q%s %.6g), %v\n",
		x, engines.StateEnergyQuantile, q, took.Round(time.Microsecond))
	return exitOK
}

func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// printManifestClosedLoop prints one closed-loop calibration of a bundle
// after head: its provenance, what it certifies and its bands.
func printManifestClosedLoop(w io.Writer, head string, cl *calibration.ClosedLoop) {
	fmt.Fprintf(w, "%s (n_of_m %d/%d): %s over %d level-0 episodes of %s (seeds %d–%d, %g Hz, K=%d), alpha %.4g, q %.4g\n",
		head, cl.Rule.N, cl.Rule.M, cl.Score, cl.Episodes, cl.Task, cl.Seeds[0], cl.Seeds[1], cl.RateHz, cl.StepsK, cl.Alpha, cl.Q)
	if cl.SuccessfulOnly {
		fmt.Fprintf(w, "        fitted on the episodes that succeeded only: alpha bounds the trips of episodes that would succeed\n")
	}
	if cl.TripsPerHour > 0 {
		fmt.Fprintf(w, "        certified for %g false trips per running hour over %.3g h of conformal driving (%d episodes)\n", cl.TripsPerHour, cl.ConformalHours, cl.ConformalEpisodes)
	}
	unit := cl.Unit().Noun()
	switch cl.BandUnit {
	case calibration.BandTicks:
		fmt.Fprintf(w, "        bands by %s since arming (band_unit %s)\n", unit, cl.BandUnit)
	default:
		how := "band_unit " + cl.BandUnit
		if cl.BandUnit == "" {
			how = "no band_unit: calibrated before it existed"
		}
		fmt.Fprintf(w, "        bands by %s since arming (%s): they shift with the scorer's throughput — rerun `energyflow sim calibrate` to count running ticks\n", unit, how)
	}
	if c := cl.Ceiling; c != nil {
		only := ""
		if c.SuccessfulOnly {
			only = ", the ones that succeeded"
		}
		floor := ""
		if c.Min > 0 {
			floor = fmt.Sprintf(", floor %.4g", c.Min)
		}
		fmt.Fprintf(w, "        one-tick ceiling: one score above mean + %.4g·std of its band trips at once (quantile %.4g%s); ceiling alpha %.4g over %d episodes (seeds %d–%d%s): a fresh episode trips either rule with probability at most %.4g\n",
			c.Q, c.Quantile, floor, c.Alpha, c.Episodes, c.Seeds[0], c.Seeds[1], only, cl.Alpha+c.Alpha)
	}
	if pl := cl.PlanLatency; pl != nil {
		how := "in the calibration's own driving"
		if pl.Measured == calibration.PlanLatencyAfterwards {
			how = "in driving after the calibration, same bundle, rate and K on its host"
		}
		fmt.Fprintf(w, "        plans took p50 %.4g ms, p90 %.4g ms (%.2f periods) over %d plans of %d episodes (seeds %d–%d, %s): the runtime warns when its own p90 passes %.2f periods\n",
			pl.P50Ms, pl.P90Ms, cl.P90Periods(), pl.Plans, pl.Episodes, pl.Seeds[0], pl.Seeds[1], how, cl.P90Periods()+runtime.PlanLateMargin)
	} else {
		fmt.Fprintf(w, "        plan latency not recorded: the runtime cannot tell when its plans land later than this calibration's did (sim calibrate --latency-only records it)\n")
	}
	for i, b := range cl.Bands {
		to := "on"
		if i+1 < len(cl.Bands) {
			to = fmt.Sprintf("to %d", cl.Bands[i+1].From-1)
		}
		ceil := ""
		if c := cl.Ceiling; c != nil {
			ceil = fmt.Sprintf(", ceiling %.6g", b.Mean+c.Q*b.Std)
		}
		fmt.Fprintf(w, "        %s %d %s since arming: threshold %.6g%s (mean %.6g, std %.4g)\n", unit, b.From, to, b.Threshold, ceil, b.Mean, b.Std)
	}
}

// verifyLate opens the bundle's late network (late_policy) and samples once
// on it from hist, as the runtime does once plans land late.
func verifyLate(w io.Writer, b *engines.Bundle, be engines.Backend, steps int, hist []engines.ObsFrame, log *slog.Logger) error {
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: steps, ActionsOnly: true, Graph: engines.GraphEnergyGradLate, Logger: log})
	if err != nil {
		return err
	}
	defer s.Close()
	var r engines.Result
	if err := s.SampleObs(hist, &r); err != nil {
		return err
	}
	if !finite(r.Actions) {
		return fmt.Errorf("test sample on the late network has non-finite actions: %v", r.Actions)
	}
	lp := b.Manifest.LatePolicy
	fmt.Fprintf(w, "ok    late network %s: I/O matches the manifest, finite test sample; plans sample on it from %d periods of plan latency (loop.late_policy)\n",
		b.Manifest.Graphs[lp.Graph].File, lp.FromPeriods)
	return nil
}
