package runtime

import (
	"math"
	"slices"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/telemetry"
)

// energyBucketCount is the number of equal-width buckets of the energy
// histogram in /metrics (the threshold adds one bound).
const energyBucketCount = 32

// energyBuckets returns the bounds of the energy histogram in /metrics for
// a bundle's calibration: equal-width buckets from the calibrated energy's
// mean − 4 std to max(q99.9, threshold) + 4 std, with the stop threshold
// itself a bound (so the count above it is exact). With a closed-loop
// calibration of the energy, its largest band threshold is a bound too and
// the span reaches it (the band thresholds vary over an episode; the largest
// is where the stop is least sensitive). Without a calibrated energy it
// returns telemetry's defaults.
func energyBuckets(c *calibration.Block) []float64 {
	return scoreBuckets(&engines.Manifest{Calibration: c}, engines.ScoreEnergy)
}

// scoreBuckets is energyBuckets for the score the stop watches (the
// histogram observes that score): its held-out statistics are the
// calibration's for that score, or for "state_energy" the state_energy
// block's, whose q99.9 is then the threshold bound unless a closed-loop
// calibration of the state score adds its largest band.
func scoreBuckets(m *engines.Manifest, score string) []float64 {
	c := m.Calibration
	var st calibration.ScoreStats
	ok := false
	thr := math.NaN()
	switch {
	case score == engines.ScoreStateEnergy && m.StateEnergy != nil:
		sc := m.StateEnergy.Calibration
		st, ok = calibration.ScoreStats{Mean: sc.Mean, Std: sc.Std, Quantiles: sc.Quantiles}, true
		if q, has := sc.Quantiles[engines.StateEnergyQuantile]; has && finiteAll(q) {
			thr = q
		}
	case c != nil:
		st, ok = c.Scores[score]
	}
	if !ok || !finiteAll(st.Mean, st.Std) || st.Std <= 0 {
		return telemetry.DefaultEnergyBuckets()
	}
	top := st.Mean + 3*st.Std
	if q, ok := st.Quantiles["99.9"]; ok && finiteAll(q) {
		top = math.Max(top, q)
	}
	if c != nil && c.Recommended.Score == score && finiteAll(c.Recommended.Threshold) {
		thr = c.Recommended.Threshold
	}
	if !math.IsNaN(thr) {
		top = math.Max(top, thr)
	}
	band := math.NaN() // the largest closed-loop band threshold
	if cl := closedLoopOf(c); cl != nil && cl.Score == score {
		for _, bd := range cl.Bands {
			if finiteAll(bd.Threshold) && !(bd.Threshold <= band) {
				band = bd.Threshold
			}
		}
		if !math.IsNaN(band) {
			top = math.Max(top, band)
		}
	}
	lo, hi := st.Mean-4*st.Std, top+4*st.Std
	w := (hi - lo) / energyBucketCount
	b := make([]float64, 0, energyBucketCount+3)
	for i := 0; i <= energyBucketCount; i++ {
		b = append(b, lo+float64(i)*w)
	}
	extra := false
	for _, x := range [...]float64{thr, band} {
		if !math.IsNaN(x) {
			b = append(b, x)
			extra = true
		}
	}
	if extra {
		slices.Sort(b)
		b = slices.Compact(b)
	}
	return b
}

func closedLoopOf(c *calibration.Block) *calibration.ClosedLoop {
	if c == nil {
		return nil
	}
	return c.ClosedLoop
}

func finiteAll(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
