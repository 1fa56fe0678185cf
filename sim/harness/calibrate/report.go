package calibrate

import (
	"fmt"
	"io"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness/eval"
)

// planLatency summarizes every plan latency of results (nil: none).
func planLatency(results []eval.Result, seeds [2]int, measured string) *calibration.PlanLatency {
	var ms []float64
	for _, r := range results {
		ms = append(ms, r.InferenceMs()...)
	}
	if len(ms) == 0 {
		return nil
	}
	return &calibration.PlanLatency{P50Ms: *eval.Quantile(ms, 0.5), P90Ms: *eval.Quantile(ms, 0.9), Plans: len(ms),
		Episodes: len(results), Seeds: seeds, Measured: measured}
}

// printPlanLatency prints pl and the lateness limit the runtime derives
// from it at rateHz.
func printPlanLatency(w io.Writer, pl *calibration.PlanLatency, rateHz float64) {
	if pl == nil {
		fmt.Fprintln(w, "plan latency: no plan finished, nothing recorded")
		return
	}
	p := pl.P90Ms / 1000 * rateHz
	fmt.Fprintf(w, "plan latency over %d plans of %d episodes: p50 %.4g ms, p90 %.4g ms = %.2f periods at %g Hz; the runtime warns when its recent plans' p90 passes %.2f periods\n",
		pl.Plans, pl.Episodes, pl.P50Ms, pl.P90Ms, p, rateHz, p+runtime.PlanLateMargin)
}

// printClosedLoop prints the fitted thresholds and how many calibration
// episodes each part would have tripped with them.
func printClosedLoop(w io.Writer, bundle string, cl *calibration.ClosedLoop, traces [][]float64, rule safety.NOfMConfig) {
	split := fmt.Sprintf("%d fit the bands, %d set q", cl.FitEpisodes, cl.ConformalEpisodes)
	if cl.FitEpisodes == 0 {
		split = fmt.Sprintf("one band (the score is standardized), %d set q", cl.ConformalEpisodes)
	}
	fmt.Fprintf(w, "bundle %s: closed-loop calibration on %d level-0 episodes of %s (seeds %d–%d, %g Hz, K=%d): %s; score %s\n",
		bundle, cl.Episodes, cl.Task, cl.Seeds[0], cl.Seeds[1], cl.RateHz, cl.StepsK, split, cl.Score)
	if cl.TripsPerHour > 0 {
		fmt.Fprintf(w, "certified for %g false trips per running hour: the %d conformal episodes ran %.3g h, so alpha = %.4g per episode\n",
			cl.TripsPerHour, cl.ConformalEpisodes, cl.ConformalHours, cl.Alpha)
	}
	if cl.FitEpisodes == 0 {
		fmt.Fprintf(w, "rule %d of the last %d scores over the threshold; alpha %.4g: q = %.4g, the threshold in the score's own units\n", rule.N, rule.M, cl.Alpha, cl.Q)
	} else {
		fmt.Fprintf(w, "rule %d of the last %d scores over the band's threshold; alpha %.4g: q = %.4g band stds\n", rule.N, rule.M, cl.Alpha, cl.Q)
	}
	ticks, fresh := 0, 0
	for _, tr := range traces {
		ticks += len(tr)
		fresh += freshScores(tr)
	}
	fmt.Fprintf(w, "bands by %s since arming (band_unit %s); %d fresh scores on %d running ticks (%.2f per tick)\n",
		cl.Unit().Noun(), cl.Unit(), fresh, ticks, float64(fresh)/float64(max(ticks, 1)))
	if c := cl.Ceiling; c != nil {
		fmt.Fprintf(w, "one-tick ceiling: ceiling alpha %.4g: q = %.4g %s; a fresh episode trips either rule with probability at most %.4g\n", c.Alpha, c.Q, ceilingWhy(c), cl.Alpha+c.Alpha)
	}
	for i, b := range cl.Bands {
		to := "on"
		if i+1 < len(cl.Bands) {
			to = fmt.Sprintf("to %d", cl.Bands[i+1].From-1)
		}
		ceil := ""
		if c := cl.Ceiling; c != nil {
			ceil = fmt.Sprintf(" ceiling %.6g", c.Level(b))
		}
		fmt.Fprintf(w, "  %s %d %s since arming: mean %.6g std %.4g threshold %.6g%s\n", cl.Unit().Noun(), b.From, to, b.Mean, b.Std, b.Threshold, ceil)
	}
	fit, conf := 0, 0
	for i, tr := range traces {
		if tripsWithBands(cl, rule, tr) {
			if i < cl.FitEpisodes {
				fit++
			} else {
				conf++
			}
		}
	}
	bound := "alpha"
	if cl.Ceiling != nil {
		bound = "(alpha + ceiling alpha)"
	}
	fmt.Fprintf(w, "episodes that would have tripped: %d/%d fit, %d/%d conformal (at most %s·(n+1) by construction)\n",
		fit, cl.FitEpisodes, conf, cl.ConformalEpisodes, bound)
}

// tripsWithBands replays one trace through the n-of-m rule with the fitted
// band thresholds, and the one-tick ceiling when cl has one.
func tripsWithBands(cl *calibration.ClosedLoop, rule safety.NOfMConfig, trace []float64) bool {
	score, _ := safety.ParseScore(cl.Score)
	th := safety.Threshold{Score: score, Value: cl.Bands[0].Threshold, Bands: cl.Bands, BandUnit: cl.Unit(), Ceiling: cl.Ceiling}
	trips, err := safety.Replay(safety.RuleConfig{Kind: safety.RuleNOfM, NOfM: rule}, th, trace)
	return err == nil && len(trips) > 0
}

// ceilingWhy says where a ceiling's q comes from: its fitted quantile, or
// the window's q or the floor it was raised to.
func ceilingWhy(c *calibration.Ceiling) string {
	switch {
	case c.Q == c.Quantile:
		return "(the episodes' conformal quantile)"
	case c.Min > 0 && c.Q == c.Min:
		return fmt.Sprintf("(the floor --ceiling-min; the episodes' quantile is %.4g)", c.Quantile)
	default:
		return fmt.Sprintf("(the window's q: the episodes' quantile, %.4g, is below it, so one score above the window's threshold trips — consider --ceiling-min)", c.Quantile)
	}
}
