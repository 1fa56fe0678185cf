package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/safety"
)

// scoreList is the valid score names for messages.
const scoreList = `"energy", "centered_energy" or "state_energy"`

// DefaultBandStarts returns Fit's default band starts, in the
// fit's unit (running ticks since arming by default): 0, 10, 30, 60 and
// 120. The score is least stationary right after arming (the first action
// chunk starts from rest while the policy's observation history fills up:
// one to two chunks of 8–16 ticks), so the bands are short there and
// lengthen about geometrically: 0–9 (start transient), 10–29 (approach),
// 30–59, 60–119 and 120 on. A band with too few fit samples is merged into
// the one before it, so short episodes simply get fewer bands.
func DefaultBandStarts() []int { return []int{0, 10, 30, 60, 120} }

// DefaultMinBandSamples is Fit's default minimum number of fit
// samples (fresh scores of the fit episodes) a band needs to stand alone.
const DefaultMinBandSamples = 50

// FitOptions configure Fit. Zero values take the defaults.
type FitOptions struct {
	// Alpha is the tolerated trip probability of a fresh episode, in (0, 1).
	Alpha float64
	// N and M are the n-of-m rule the threshold is certified for
	// (1 ≤ N ≤ M ≤ 64); zero: safety.DefaultConfig's 3 of 5.
	N, M int
	// FitEpisodes is how many of the traces (the first ones) fit the bands'
	// mean and std; the others are the conformal episodes that set Q.
	// Zero: half of the traces, rounded down.
	FitEpisodes int
	// BandUnit is what the traces' index and the bands' From count:
	// calibration.BandTicks (each trace entry is one running tick) or
	// calibration.BandFreshScores
	// (only the fresh scores are counted, as bundles calibrated before
	// ticks were). Empty: BandTicks.
	BandUnit calibration.BandUnit
	// BandStarts are the candidate band starts in BandUnit since arming,
	// strictly increasing from 0. Nil: DefaultBandStarts.
	BandStarts []int
	// MinBandSamples: a band with fewer fit samples is merged into the band
	// before it (band 0 absorbs the bands after it until it has enough).
	// Zero: DefaultMinBandSamples.
	MinBandSamples int
	// Score is the score the traces hold, written into the result's Score;
	// the zero value is safety.ScoreEnergy.
	Score safety.Score

	// TripsPerHour, when > 0, replaces Alpha by a false-trip rate: Alpha
	// becomes TripsPerHour·H/n_c, H the conformal episodes' running hours
	// (their trace entries at RateHz, BandTicks only) and n_c their number,
	// so that a fresh episode trips with probability at most the rate's
	// share of an average calibration episode. It needs H ≥ about
	// 1/TripsPerHour hours of conformal driving.
	TripsPerHour float64
	// RateHz is the control rate the traces were recorded at (needed with
	// TripsPerHour).
	RateHz float64
	// Standardized fits no bands: the score is already standardized (the
	// state term's reading is a z-score of held-out demonstration steps),
	// so there is one band {From 0, Mean 0, Std 1} and every trace is a
	// conformal episode (FitEpisodes must be 0).
	Standardized bool
	// CeilingAlpha, when > 0, also fits a one-tick Ceiling at this level
	// on the same bands and conformal episodes (it needs at least
	// MinConformalEpisodes(CeilingAlpha) of them). Zero: no ceiling.
	CeilingAlpha float64
	// CeilingMin is the ceiling's floor, in band standard deviations (0:
	// none): see Ceiling.Min.
	CeilingMin float64
}

// MinConformalEpisodes returns the fewest conformal episodes that can
// certify alpha: ⌈1/alpha⌉ − 1 (with fewer, the conformal quantile is the
// largest of more than the episodes there are). It returns math.MaxInt for
// an alpha outside (0, 1).
func MinConformalEpisodes(alpha float64) int {
	if !(alpha > 0 && alpha < 1) {
		return math.MaxInt
	}
	return ceilTol(1/alpha) - 1
}

// ceilTol is ⌈x⌉, forgiving a rounding error of 1e-9 above an integer (so
// that 1/0.05 or 10·(1−0.1) land on the integer they stand for).
func ceilTol(x float64) int { return int(math.Ceil(x - 1e-9)) }

// Fit fits a closed-loop conformal threshold (split conformal
// prediction) on the energy traces of level-0 episodes. traces[e][i] is
// episode e's score at its i-th running control tick since the gate was
// armed, NaN where that tick had no fresh score. A fresh score belongs to
// the band of its tick index i (BandUnit BandTicks, the default) or, with
// BandFreshScores, of its index among the fresh scores (NaN entries then do
// not advance it). Either way the n-of-m window runs over the fresh scores
// only, as the gate's rule does. It is pure and deterministic.
//
// The first FitEpisodes traces fit each band's mean and std (pooled over
// the band's fresh scores; population std, floored at 1e-6·|mean| + 1e-12 so
// that a constant score still gives a usable band). Each remaining,
// conformal, episode gets the score
//
//	s = max over i of the N-th largest z_j among the last M fresh scores j ≤ i
//	    (fewer at the start of the episode; −Inf with fewer than N scores),
//	z_j = (x_j − mean_b(j)) / std_b(j), b(j) the band of fresh score j,
//
// so that the n-of-m rule with band thresholds mean_b + q·std_b (a score
// trips when strictly above) trips on the episode exactly when s > q.
// Q is the ⌈(n_c+1)(1−Alpha)⌉-th smallest of the n_c conformal scores: a
// fresh episode exchangeable with the calibration episodes trips with
// probability at most Alpha (marginally over the calibration draw).
//
// The result has Score (o.Score's name, "energy" by default), Alpha, Rule,
// Q, BandUnit, Bands and the episode counts filled; the caller fills the provenance (task, level, rate, K,
// steps, seeds). Each error is one line saying what to change.
func Fit(traces [][]float64, o FitOptions) (*calibration.ClosedLoop, error) {
	if o.TripsPerHour != 0 {
		return fitPerHour(traces, o)
	}
	if !(o.Alpha > 0 && o.Alpha < 1) {
		return nil, fmt.Errorf("safety: closed-loop alpha %v is not in (0, 1): it is the tolerated trip probability of a fresh level-0 episode, e.g. 0.1", o.Alpha)
	}
	if o.CeilingAlpha != 0 || o.CeilingMin != 0 {
		if err := ceilingArgs(o.CeilingAlpha, o.CeilingMin); err != nil {
			return nil, err
		}
	}
	n, m := o.N, o.M
	if n == 0 && m == 0 {
		d := safety.DefaultConfig().Energy.Rule.NOfM
		n, m = d.N, d.M
	}
	if m < 1 || m > calibration.MaxWindow || n < 1 || n > m {
		return nil, fmt.Errorf("safety: closed-loop rule %d of %d: need 1 ≤ n ≤ m ≤ %d", n, m, calibration.MaxWindow)
	}
	if o.Score >= safety.NumScores {
		return nil, fmt.Errorf("safety: closed-loop score %v: expected %s", o.Score, scoreList)
	}
	unit := o.BandUnit
	if unit == "" {
		unit = calibration.BandTicks
	}
	if !unit.Valid() {
		return nil, fmt.Errorf("safety: closed-loop band unit %q: expected %q (running control ticks since arming) or %q (fresh scores since arming)", unit, calibration.BandTicks, calibration.BandFreshScores)
	}
	starts := o.BandStarts
	if starts == nil {
		starts = DefaultBandStarts()
	}
	if len(starts) == 0 || starts[0] != 0 || !strictlyIncreasing(starts) {
		return nil, fmt.Errorf("safety: closed-loop band starts %v: need strictly increasing starts from 0", starts)
	}
	minSamples := o.MinBandSamples
	if minSamples == 0 {
		minSamples = DefaultMinBandSamples
	}
	if minSamples < 1 {
		return nil, fmt.Errorf("safety: closed-loop minimum band samples %d: need at least 1", minSamples)
	}
	total := len(traces)
	if total < 2 && !o.Standardized {
		return nil, fmt.Errorf("safety: %d closed-loop episodes: need at least 2 (fit and conformal)", total)
	}
	if total < 1 {
		return nil, errors.New("safety: no closed-loop episodes: need at least 1 conformal episode")
	}
	fit := o.FitEpisodes
	switch {
	case o.Standardized && fit != 0:
		return nil, fmt.Errorf("safety: %d fit episodes with a standardized score: it fits no bands, every episode is conformal — leave the fit episodes at 0", fit)
	case o.Standardized:
	case fit == 0:
		fit = total / 2
	}
	if !o.Standardized && (fit < 1 || fit >= total) {
		return nil, fmt.Errorf("safety: %d fit episodes of %d: need 1 to %d, so that some are left for the conformal quantile", fit, total, total-1)
	}
	nc := total - fit
	if need := MinConformalEpisodes(o.Alpha); nc < need {
		all := fit + need
		if o.FitEpisodes == 0 {
			all = 2 * need // the default split: half fit, half conformal
		}
		return nil, fmt.Errorf("safety: %d conformal episodes cannot certify alpha %v: need at least %d (%d episodes in all, %d fit + %d conformal, or a larger alpha)",
			nc, o.Alpha, need, all, all-need, need)
	}
	if need := MinConformalEpisodes(o.CeilingAlpha); o.CeilingAlpha > 0 && nc < need {
		return nil, fmt.Errorf("safety: %d conformal episodes cannot certify the ceiling's alpha %v: need at least %d conformal episodes, or a larger ceiling alpha",
			nc, o.CeilingAlpha, need)
	}

	xs, at, err := freshOf(traces, unit)
	if err != nil {
		return nil, err
	}

	bands := []calibration.Band{{From: 0, Mean: 0, Std: 1}}
	if !o.Standardized {
		if bands, err = fitBands(xs[:fit], at[:fit], starts, minSamples); err != nil {
			return nil, err
		}
	}

	scores := make([]float64, nc)
	buf := make([]float64, m)
	for e := range nc {
		scores[e] = episodeScore(xs[fit+e], at[fit+e], bands, n, m, buf)
	}
	slices.Sort(scores)
	q := scores[conformalRank(nc, o.Alpha)-1]
	if math.IsInf(q, 0) {
		short := 0
		for _, s := range scores {
			if math.IsInf(s, -1) {
				short++
			}
		}
		return nil, fmt.Errorf("safety: %d of %d conformal episodes have fewer than %d fresh scores, so no rule window of theirs can trip: the quantile is undefined — drive longer episodes", short, nc, n)
	}
	for i := range bands {
		bands[i].Threshold = bands[i].Mean + q*bands[i].Std
	}
	cl := &calibration.ClosedLoop{
		Score: o.Score.String(), Alpha: o.Alpha, Rule: calibration.Rule{Kind: calibration.RuleNOfM, N: n, M: m},
		Q: q, BandUnit: unit, Bands: bands, Episodes: total, FitEpisodes: fit, ConformalEpisodes: nc,
	}
	if o.CeilingAlpha > 0 {
		c, err := ceilingOf(xs[fit:], at[fit:], bands, q, o.CeilingAlpha, o.CeilingMin)
		if err != nil {
			return nil, err
		}
		cl.Ceiling = c
	}
	return cl, nil
}

// FitCeiling fits a one-tick Ceiling at level alpha for the closed-loop
// calibration cl (its Bands, BandUnit and Q) on traces of level-0 episodes
// like Fit's, all of them conformal: each episode's score is its
// largest z = (x − mean_b)/std_b, and Q the ⌈(n+1)(1−alpha)⌉-th smallest,
// raised to cl.Q when below it (a ceiling under the rule's threshold would
// trip more often than the rule; its guarantee holds at any higher level).
// Use it to add a ceiling to a calibration fitted earlier on other
// episodes: the two guarantees hold each on its own episodes, and their
// union bound as well. floor (≥ 0; 0: none) is a floor on Q, in band
// standard deviations: the guarantee holds at any higher level, and a
// ceiling meant for absurd readings is best kept well above the episodes'
// own (Ceiling.Min). The caller fills Seeds and SuccessfulOnly.
func FitCeiling(traces [][]float64, cl *calibration.ClosedLoop, alpha, floor float64) (*calibration.Ceiling, error) {
	if err := ceilingArgs(alpha, floor); err != nil {
		return nil, err
	}
	if err := cl.Validate(); err != nil {
		return nil, err
	}
	if need := MinConformalEpisodes(alpha); len(traces) < need {
		return nil, fmt.Errorf("safety: %d episodes cannot certify the ceiling's alpha %v: need at least %d, or a larger ceiling alpha", len(traces), alpha, need)
	}
	xs, at, err := freshOf(traces, cl.Unit())
	if err != nil {
		return nil, err
	}
	return ceilingOf(xs, at, cl.Bands, cl.Q, alpha, floor)
}

// ceilingOf is the ceiling at alpha on the fresh scores xs (at: their
// places in the bands' unit) of conformal episodes, at least q and min.
func ceilingOf(xs [][]float64, at [][]int, bands []calibration.Band, q, alpha, floor float64) (*calibration.Ceiling, error) {
	n := len(xs)
	scores := make([]float64, n)
	buf := make([]float64, 1)
	for e := range n {
		scores[e] = episodeScore(xs[e], at[e], bands, 1, 1, buf) // the largest z
	}
	slices.Sort(scores)
	cq := scores[conformalRank(n, alpha)-1]
	if math.IsInf(cq, 0) {
		return nil, errors.New("safety: the ceiling's episodes have no fresh score: its quantile is undefined — drive longer episodes")
	}
	return &calibration.Ceiling{Alpha: alpha, Q: math.Max(math.Max(cq, q), floor), Quantile: cq, Min: floor, Episodes: n}, nil
}

// conformalRank is the rank (from 1) of the split-conformal quantile at
// alpha among n sorted conformal scores: ⌈(n+1)(1−alpha)⌉, at most n when
// n ≥ MinConformalEpisodes(alpha) (the clamp only absorbs rounding).
func conformalRank(n int, alpha float64) int {
	return min(max(ceilTol(float64(n+1)*(1-alpha)), 1), n)
}

// ceilingArgs checks a ceiling's alpha (in (0, 1)) and floor (finite, ≥ 0).
func ceilingArgs(alpha, floor float64) error {
	if !(alpha > 0 && alpha < 1) {
		return fmt.Errorf("safety: closed-loop ceiling alpha %v is not in (0, 1): it is the tolerated probability that a fresh level-0 episode has one score above the ceiling, e.g. 0.02", alpha)
	}
	if floor < 0 || !finite(floor) {
		return fmt.Errorf("safety: closed-loop ceiling floor %v: expected a finite number ≥ 0", floor)
	}
	return nil
}

// freshOf splits per-tick traces into each episode's fresh scores xs[e]
// and where each falls in the bands' unit at[e] (its tick, or its index
// among the fresh scores), refusing infinite entries.
func freshOf(traces [][]float64, unit calibration.BandUnit) (xs [][]float64, at [][]int, err error) {
	xs = make([][]float64, len(traces))
	at = make([][]int, len(traces))
	for e, tr := range traces {
		c := make([]float64, 0, len(tr))
		p := make([]int, 0, len(tr))
		for i, x := range tr {
			switch {
			case math.IsNaN(x):
				continue
			case math.IsInf(x, 0):
				return nil, nil, fmt.Errorf("safety: closed-loop trace %d, entry %d is %v: only finite scores (NaN: no fresh score) can be calibrated on", e, i, x)
			}
			k := len(c)
			if unit == calibration.BandTicks {
				k = i
			}
			c = append(c, x)
			p = append(p, k)
		}
		xs[e], at[e] = c, p
	}
	return xs, at, nil
}

// fitPerHour is Fit with o.TripsPerHour: it derives the alpha
// that makes the expected false trips per running hour of fresh episodes
// like the conformal ones at most o.TripsPerHour — an episode of the
// conformal episodes' average length (H/n_c hours) may trip with
// probability TripsPerHour·H/n_c — and fits with it. The derivation takes
// the conformal episodes' lengths as those of the episodes to come (their
// count per hour is estimated from them).
func fitPerHour(traces [][]float64, o FitOptions) (*calibration.ClosedLoop, error) {
	switch {
	case !(o.TripsPerHour > 0) || math.IsInf(o.TripsPerHour, 0):
		return nil, fmt.Errorf("safety: closed-loop false trips per hour %v: expected a finite number > 0, e.g. 1", o.TripsPerHour)
	case !(o.RateHz > 0) || math.IsInf(o.RateHz, 0):
		return nil, fmt.Errorf("safety: closed-loop rate %v Hz: a false-trip rate per hour needs the traces' control rate", o.RateHz)
	case o.BandUnit == calibration.BandFreshScores:
		return nil, fmt.Errorf("safety: a false-trip rate per hour needs traces with one entry per running tick (band unit %q), not %q", calibration.BandTicks, calibration.BandFreshScores)
	}
	if len(traces) == 0 {
		return nil, errors.New("safety: no closed-loop episodes: a false-trip rate per hour needs conformal level-0 driving")
	}
	fit := o.FitEpisodes
	if fit == 0 && !o.Standardized {
		fit = len(traces) / 2
	}
	if fit < 0 || fit >= len(traces) {
		return nil, fmt.Errorf("safety: %d fit episodes of %d: need 0 to %d, so that some are left for the conformal quantile", fit, len(traces), len(traces)-1)
	}
	nc := len(traces) - fit
	ticks := 0
	for _, tr := range traces[fit:] {
		ticks += len(tr)
	}
	hours := float64(ticks) / o.RateHz / 3600
	need := 1 / o.TripsPerHour // hours: alpha·n_c ≥ 1 − 1/(n_c+1) ≈ 1
	alpha := o.TripsPerHour * hours / float64(nc)
	if alpha >= 1 {
		return nil, fmt.Errorf("safety: a false-trip rate of %g per hour over %d conformal episodes of %.3g h in all lets every episode trip — ask for a lower rate", o.TripsPerHour, nc, hours)
	}
	if alpha <= 0 || nc < MinConformalEpisodes(alpha) {
		more := 0
		if nc > 0 && ticks > 0 {
			more = ceilTol((need - hours) / (hours / float64(nc)))
		}
		return nil, fmt.Errorf("safety: %d conformal episodes with %.3g h of running cannot certify a false-trip rate of %g per hour: need at least %.3g h of conformal level-0 driving (about %d more episodes like these), or a higher rate",
			nc, hours, o.TripsPerHour, need, max(more, 1))
	}
	rate := o.TripsPerHour
	o.Alpha, o.TripsPerHour = alpha, 0
	cl, err := Fit(traces, o)
	if err != nil {
		return nil, err
	}
	cl.TripsPerHour, cl.ConformalHours = rate, hours
	return cl, nil
}

// fitBands pools the fit episodes' fresh scores per band, fresh score j of
// episode e falling at at[e][j] (merging a band with fewer than minSamples
// into the one before it, and the bands after band 0 into it while band 0
// has too few) and returns each band's mean and floored std (Threshold
// left 0).
func fitBands(fit [][]float64, at [][]int, starts []int, minSamples int) ([]calibration.Band, error) {
	count := make([]int, len(starts))
	for e := range fit {
		for _, k := range at[e] {
			count[bandOf(starts, k)]++
		}
	}
	// Merge: keep[j] is the start index of the merged band j.
	var keep []int
	cur, curN := 0, count[0]
	for b := 1; b < len(starts); b++ {
		if curN < minSamples || count[b] < minSamples {
			curN += count[b]
			continue
		}
		keep = append(keep, cur)
		cur, curN = b, count[b]
	}
	keep = append(keep, cur)
	if len(keep) == 1 && curN < minSamples {
		return nil, fmt.Errorf("safety: the %d fit episodes have %d fresh scores in all, fewer than the %d one band needs: drive more or longer episodes", len(fit), curN, minSamples)
	}
	bands := make([]calibration.Band, len(keep))
	for j, b := range keep {
		bands[j].From = starts[b]
	}
	sum := make([]float64, len(bands))
	cnt := make([]int, len(bands))
	for e, xs := range fit {
		for i, x := range xs {
			j := calibration.BandAt(bands, at[e][i])
			sum[j] += x
			cnt[j]++
		}
	}
	for j := range bands {
		bands[j].Mean = sum[j] / float64(cnt[j])
	}
	ss := make([]float64, len(bands))
	for e, xs := range fit {
		for i, x := range xs {
			j := calibration.BandAt(bands, at[e][i])
			d := x - bands[j].Mean
			ss[j] += d * d
		}
	}
	for j := range bands {
		std := math.Sqrt(ss[j] / float64(cnt[j]))
		bands[j].Std = math.Max(std, 1e-6*math.Abs(bands[j].Mean)+1e-12)
	}
	return bands, nil
}

// episodeScore is the conformal score of one episode's fresh scores xs,
// fresh score i normalized by the band at at[i]: the largest, over i, of the
// n-th largest normalized score among the last m fresh scores up to i (all
// of them while fewer than m; −Inf while fewer than n). With band
// thresholds mean_b + q·std_b, nOfM trips on the episode iff it is > q:
// nOfM trips at i iff at least n of the last m scores are strictly above
// their thresholds, i.e. iff the n-th largest of their z is > q. buf has
// room for m values.
func episodeScore(xs []float64, at []int, bands []calibration.Band, n, m int, buf []float64) float64 {
	best := math.Inf(-1)
	z := make([]float64, len(xs))
	for i, x := range xs {
		b := &bands[calibration.BandAt(bands, at[i])]
		z[i] = (x - b.Mean) / b.Std
		lo := max(0, i-m+1)
		if i-lo+1 < n {
			continue
		}
		w := append(buf[:0], z[lo:i+1]...) // at most m values: no allocation
		slices.Sort(w)
		best = math.Max(best, w[len(w)-n])
	}
	return best
}

// bandOf is the index of the last start at or below i.
func bandOf(starts []int, i int) int {
	j := len(starts) - 1
	for j > 0 && starts[j] > i {
		j--
	}
	return j
}

func strictlyIncreasing(s []int) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
