package calibration

import "math"

// Score names: the scores a calibration can be of, as the manifest writes
// them.
const (
	ScoreEnergy         = "energy"
	ScoreCenteredEnergy = "centered_energy"
	// ScoreStateEnergy is the state term's reading of the observation
	// alone (the manifest's "state_energy" block).
	ScoreStateEnergy = "state_energy"
)

// RuleNOfM is the only decision rule a closed-loop calibration is certified
// for (Rule.Kind): trip when N of the last M fresh scores are above the
// band's threshold.
const RuleNOfM = "n_of_m"

// MaxWindow is the largest n-of-m window (Rule.M) the safety gate runs.
const MaxWindow = 64

// Block is the bundle manifest's "calibration" block (docs/bundle.md):
// energy-score statistics on held-out demonstrations, the recommended stop
// threshold, and the closed-loop calibrations fitted by driving the policy
// (energyflow sim calibrate).
type Block struct {
	NWindows    int                   `json:"n_windows"`
	Seed        int64                 `json:"seed"`
	Steps       int                   `json:"steps"`
	Scores      map[string]ScoreStats `json:"scores"`
	Recommended Recommendation        `json:"recommended"`
	// ClosedLoop is the closed-loop conformal threshold fitted on level-0
	// episodes driven through the runtime (energyflow sim calibrate); nil:
	// none. The safety gate prefers it to Recommended when it runs the rule
	// the calibration was certified for.
	ClosedLoop *ClosedLoop `json:"closed_loop,omitempty"`
	// ClosedLoopOthers are closed-loop calibrations of the same score
	// certified at other control rates or sampler steps K (energyflow sim
	// calibrate --rate R --steps K on a bundle that has a closed_loop at
	// another rate or K). The runtime uses the one certified for its loop
	// (ClosedLoopFor); ClosedLoop is the one used when none is.
	ClosedLoopOthers []*ClosedLoop `json:"closed_loop_others,omitempty"`
}

// ClosedLoopFor returns the closed-loop calibration certified at rateHz and
// k sampler steps: ClosedLoop or one of ClosedLoopOthers, and whether one
// matched. When none did it returns ClosedLoop (nil when there is none),
// which the runtime then uses with a warning.
func (c *Block) ClosedLoopFor(rateHz float64, k int) (*ClosedLoop, bool) {
	if c == nil || c.ClosedLoop == nil {
		return nil, false
	}
	for _, cl := range c.ClosedLoops() {
		if cl.CertifiedAt(rateHz, k) {
			return cl, true
		}
	}
	return c.ClosedLoop, false
}

// ClosedLoops returns ClosedLoop followed by ClosedLoopOthers (none when
// ClosedLoop is nil).
func (c *Block) ClosedLoops() []*ClosedLoop {
	if c == nil || c.ClosedLoop == nil {
		return nil
	}
	return append([]*ClosedLoop{c.ClosedLoop}, c.ClosedLoopOthers...)
}

// ScoreStats summarizes one score over the held-out calibration windows.
// Quantiles are keyed by percent as written ("50", "90", "99", "99.9").
type ScoreStats struct {
	Mean      float64            `json:"mean"`
	Std       float64            `json:"std"`
	Quantiles map[string]float64 `json:"quantiles"`
}

// Recommendation is the calibrated stop rule: stop when Score > Threshold.
type Recommendation struct {
	Score     string  `json:"score"` // ScoreEnergy or ScoreCenteredEnergy
	Threshold float64 `json:"threshold"`
	Rule      string  `json:"rule"`
}

// ClosedLoop is a closed-loop, conformal, time-varying energy threshold:
// the manifest's "calibration.closed_loop" block (docs/safety.md), fitted
// on level-0 episodes driven through the runtime.
//
// The threshold depends on the time since the gate was last armed, counted
// in BandUnit: Bands[b] applies from its From up to the next band's. Each
// band's Threshold is Mean + Q·Std. Q is the split-conformal quantile that
// makes a fresh episode, exchangeable with the calibration episodes, trip
// the Rule with probability at most Alpha.
type ClosedLoop struct {
	Score string  `json:"score"` // the calibrated score: ScoreEnergy, ScoreCenteredEnergy or ScoreStateEnergy (with the state term)
	Alpha float64 `json:"alpha"` // tolerated trip probability of a fresh level-0 episode
	Rule  Rule    `json:"rule"`  // the decision rule Q was certified for
	Q     float64 `json:"q"`     // the conformal quantile, in band standard deviations
	// BandUnit is what a band's From counts since arming: BandTicks or
	// BandFreshScores. Empty (a manifest calibrated before the key
	// existed): BandFreshScores.
	BandUnit BandUnit `json:"band_unit,omitempty"`
	Bands    []Band   `json:"bands"` // sorted by From, the first From is 0

	// Provenance of the driving the calibration was fitted on.
	Task     string  `json:"task"`
	Level    string  `json:"level"`
	RateHz   float64 `json:"rate_hz"`
	StepsK   int     `json:"steps_k"`
	MaxSteps int     `json:"max_steps"`

	Episodes          int    `json:"episodes"`           // FitEpisodes + ConformalEpisodes
	FitEpisodes       int    `json:"fit_episodes"`       // episodes the bands' mean and std come from
	ConformalEpisodes int    `json:"conformal_episodes"` // episodes Q comes from
	Seeds             [2]int `json:"seeds"`              // first and last episode seed

	// TripsPerHour, when > 0, is the false-trip rate per running hour the
	// calibration certified: Alpha was derived from it as
	// TripsPerHour·ConformalHours/ConformalEpisodes, the conformal
	// episodes' running hours at RateHz. Zero (absent): Alpha was given.
	TripsPerHour   float64 `json:"trips_per_hour,omitempty"`
	ConformalHours float64 `json:"conformal_hours,omitempty"`
	// SuccessfulOnly: the calibration kept only the episodes that
	// succeeded (as FIPER calibrates on successful rollouts), so Alpha
	// bounds the trips of episodes that would succeed; a failing episode
	// may trip more often, which is the stop doing its job.
	SuccessfulOnly bool `json:"successful_only,omitempty"`

	// Ceiling, when set, is a one-tick rule beside Rule: a single fresh
	// score above its band's Mean + Ceiling.Q·Std trips at once, whatever
	// the rule's window holds. Nil: Rule alone.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
	// PlanLatency, when present, is how long the policy's plans took in the
	// driving the calibration was certified on: its false-trip rate holds
	// for a loop whose plans land about as late (docs/safety.md, "When the
	// host falls behind"). Absent: not recorded.
	PlanLatency *PlanLatency `json:"plan_latency,omitempty"`
}

// Unit returns what the bands' From counts: BandUnit, or BandFreshScores
// when it is empty.
func (c *ClosedLoop) Unit() BandUnit {
	if c.BandUnit == "" {
		return BandFreshScores
	}
	return c.BandUnit
}

// P90Periods returns the p90 plan latency in control periods of the
// calibration's rate (0 when the latency or the rate is unknown).
func (c *ClosedLoop) P90Periods() float64 {
	if c.PlanLatency == nil || c.RateHz <= 0 {
		return 0
	}
	return c.PlanLatency.P90Ms / 1000 * c.RateHz
}

// CertifiedAt reports whether c was driven at rateHz and k sampler steps;
// a calibration that did not record them (RateHz or StepsK zero) matches
// any value of the one it lacks.
func (c *ClosedLoop) CertifiedAt(rateHz float64, k int) bool {
	rateOK := c.RateHz <= 0 || math.Abs(c.RateHz-rateHz) <= 1e-9*c.RateHz
	return rateOK && (c.StepsK <= 0 || c.StepsK == k)
}

// Rule is the decision rule a ClosedLoop was certified for. Only RuleNOfM
// is supported: the gate applies the bands only when it runs the same rule
// with the same N and M.
type Rule struct {
	Kind string `json:"kind"` // RuleNOfM
	N    int    `json:"n"`
	M    int    `json:"m"`
}

// BandUnit is what a closed-loop band's From counts since the gate was
// last armed (the manifest's calibration.closed_loop.band_unit).
type BandUnit string

const (
	// BandTicks counts running control ticks, with or without a fresh
	// score: time at the loop rate, whatever the scorer's throughput.
	// sim calibrate fits in it.
	BandTicks BandUnit = "ticks"
	// BandFreshScores counts the fresh scores the gate observed, which
	// depends on how many ticks the scorer keeps up with (machine load):
	// the meaning of a manifest without band_unit.
	BandFreshScores BandUnit = "fresh_scores"
)

// Valid reports whether u is BandTicks or BandFreshScores.
func (u BandUnit) Valid() bool { return u == BandTicks || u == BandFreshScores }

// Noun names what u counts, for messages: "running ticks" for BandTicks,
// "fresh scores" otherwise (an empty unit counts fresh scores).
func (u BandUnit) Noun() string {
	if u == BandTicks {
		return "running ticks"
	}
	return "fresh scores"
}

// Band is one piece of a time-varying threshold: from From (ticks or fresh
// scores since arming, see BandUnit) until the next band's From, the score
// trips above Threshold = Mean + Q·Std, Mean and Std being the score's
// statistics over the fit episodes' fresh scores in the band.
type Band struct {
	From      int     `json:"from"`
	Mean      float64 `json:"mean"`
	Std       float64 `json:"std"`
	Threshold float64 `json:"threshold"`
}

// BandAt returns the index of the band that applies at i (ticks or fresh
// scores since arming): the last one whose From is at or below i (band 0
// below every From). It allocates nothing.
func BandAt(bands []Band, i int) int {
	j := len(bands) - 1
	for j > 0 && bands[j].From > i {
		j--
	}
	return j
}

// Ceiling is a closed-loop calibration's one-tick ceiling: the trip level
// of a single fresh score, Mean + Q·Std of its band (Q itself for a
// standardized score's one band {Mean 0, Std 1}).
//
// Q is the split-conformal quantile of the conformal episodes' largest
// single z-score, at level Alpha: a fresh level-0 episode exceeds the
// ceiling with probability at most Alpha. With the rule's own Alpha, a
// fresh episode trips either with probability at most Alpha + Ceiling.Alpha
// (union bound). A ceiling lets a brief spike, one or two scores far above
// anything seen (an absurd state at onset), stop the arm on its first tick
// while the window rule ignores single outliers (docs/safety.md, "The
// one-tick ceiling").
type Ceiling struct {
	Alpha float64 `json:"alpha"` // tolerated probability that a fresh level-0 episode has one score above the ceiling
	Q     float64 `json:"q"`     // in band standard deviations: max(Quantile, the rule's q, Min)
	// Quantile is the conformal quantile the episodes gave at Alpha; Min
	// the floor asked for (sim calibrate --ceiling-min; 0: none). The
	// guarantee holds at any level at or above Quantile, so Q may be raised
	// to the rule's q or to Min: a higher ceiling trips less often, on
	// readings further out.
	Quantile float64 `json:"quantile"`
	Min      float64 `json:"min,omitempty"`

	// The episodes Q comes from: the calibration's conformal ones, or
	// (sim calibrate --ceiling-only, added to an existing calibration)
	// episodes of its own.
	Episodes int    `json:"episodes"`
	Seeds    [2]int `json:"seeds"` // first and last episode seed
	// SuccessfulOnly: Q comes from the episodes that succeeded only, so
	// Alpha bounds the ceiling trips of episodes that would succeed; a
	// failing episode may exceed it more often (the stop doing its job).
	SuccessfulOnly bool `json:"successful_only,omitempty"`
}

// Level returns the ceiling's trip level in band b: b.Mean + c.Q·b.Std.
func (c *Ceiling) Level(b Band) float64 { return b.Mean + c.Q*b.Std }

// PlanLatency summarizes the inference latencies of a closed-loop
// calibration's driving: every plan of Episodes episodes (seeds Seeds) at
// the calibration's rate and K.
type PlanLatency struct {
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	Plans    int     `json:"plans"`
	Episodes int     `json:"episodes"`
	Seeds    [2]int  `json:"seeds"`
	// Measured says where the latencies come from:
	// PlanLatencyFromCalibration (the episodes the thresholds were fitted
	// on) or PlanLatencyAfterwards (episodes driven later with the same
	// bundle, rate and K on the host the calibration ran on; Seeds are
	// theirs).
	Measured string `json:"measured"`
}

// The values of PlanLatency.Measured.
const (
	PlanLatencyFromCalibration = "calibration"
	PlanLatencyAfterwards      = "afterwards"
)
