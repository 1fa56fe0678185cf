package runtime

import (
	"fmt"
	"math"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// predictor is loop.predict_state (PredictConfig): a plan is sampled from
// the observation the arm should reach when the plan's first action runs,
// the newest observation moved by the committed actions that run before
// then, through the tracking monitor's model of the arm (a Smith
// predictor); the plan's actions are due from that time on.
type predictor struct {
	pos, also, carried []int
	radius2            float64
	scale              []float64 // position units per unit of command per period, per axis
	rows               []float32 // the committed actions due over the prediction, as Chunk.Committed writes them
	frames             []engines.ObsFrame
	bufs               [][]float32
	delta              []float64
}

// newPredictor checks c against the bundle's state input (width entries)
// and the tracking model, and allocates its buffers; nil when c is off.
func newPredictor(c PredictConfig, tr safety.TrackingConfig, period time.Duration, width, nVel, dim, tp, horizon, nObs int) (*predictor, error) {
	if len(c.Position) == 0 {
		return nil, nil
	}
	if len(c.Position) != nVel {
		return nil, fmt.Errorf("runtime: loop.predict_state.position has %d entries: want one per commanded velocity axis (%d)", len(c.Position), nVel)
	}
	if len(c.Also)%nVel != 0 {
		return nil, fmt.Errorf("runtime: loop.predict_state.also has %d entries: want groups of %d (one per axis)", len(c.Also), nVel)
	}
	if len(c.Carried) != 0 && (len(c.Carried)%nVel != 0 || !(c.CarryRadius > 0) || math.IsInf(c.CarryRadius, 0)) {
		return nil, fmt.Errorf("runtime: loop.predict_state.carried %v, carry_radius %v: want groups of %d entries (one per axis) and a radius above 0", c.Carried, c.CarryRadius, nVel)
	}
	for _, idx := range [][]int{c.Position, c.Also, c.Carried} {
		for _, i := range idx {
			if i < 0 || i >= width {
				return nil, fmt.Errorf("runtime: loop.predict_state: entry %d is outside the bundle's state input (%d entries)", i, width)
			}
		}
	}
	if len(tr.Scale) < nVel {
		return nil, fmt.Errorf("runtime: loop.predict_state moves the hand by safety.tracking.scale, which has %d axes: want %d", len(tr.Scale), nVel)
	}
	p := &predictor{pos: c.Position, also: c.Also, carried: c.Carried, radius2: c.CarryRadius * c.CarryRadius,
		scale: make([]float64, nVel), rows: make([]float32, tp*dim), delta: make([]float64, nVel)}
	for i := range p.scale {
		p.scale[i] = tr.Scale[i]
		if tr.Per != safety.TrackingPerTick {
			p.scale[i] *= period.Seconds()
		}
	}
	p.frames = make([]engines.ObsFrame, horizon)
	p.bufs = make([][]float32, horizon)
	for i := range p.frames {
		p.frames[i] = make(engines.ObsFrame, nObs)
		p.bufs[i] = make([]float32, width)
	}
	return p, nil
}

// ahead is how many periods after its observation a plan's first action
// runs: the smoothed plan latency rounded up (0 before the first plan).
func (l *Loop) ahead() int { return int((l.latEWMA + l.period - 1) / l.period) }

// buildPlanCond writes the conditioning of the plan started now into cond
// and returns the time its first action is due: the newest observation's,
// or with loop.predict_state the observation predicted ahead() periods on.
func (l *Loop) buildPlanCond(cond []float32) (time.Time, error) {
	t := l.obs.newest
	p := l.predict
	d := l.ahead()
	if p == nil || d == 0 {
		return t, l.buildCond(cond)
	}
	h, err := l.obs.history()
	if err != nil {
		return t, err
	}
	// The committed actions due at t, t+1, … t+d−1 periods; rows the chunk
	// does not reach are the arm holding.
	rows := p.rows[:min(d, len(p.rows)/l.dim)*l.dim]
	clear(rows)
	l.chunk.Committed(t, l.period, rows)
	return t.Add(time.Duration(d) * l.period), l.d.Cond.Build(p.apply(h, l.obs.obsIdx, rows, l.dim), cond)
}

// apply returns the history h (its state input at h[f][obs]) with the hand
// moved by the actions rows (of width dim, velocity axes first) through
// the arm's model, and a carried object with it. The frames are the
// predictor's; h is left as it was.
func (p *predictor) apply(h []engines.ObsFrame, obs int, rows []float32, dim int) []engines.ObsFrame {
	clear(p.delta)
	for k := 0; k+dim <= len(rows); k += dim {
		for i := range p.delta {
			p.delta[i] += float64(rows[k+i]) * p.scale[i]
		}
	}
	newest := h[len(h)-1][obs]
	carry := false
	if len(p.carried) > 0 {
		var r2 float64
		for i, e := range p.pos {
			dd := float64(newest[p.carried[i]] - newest[e])
			r2 += dd * dd
		}
		carry = r2 <= p.radius2
	}
	for f, fr := range h {
		copy(p.frames[f], fr)
		buf := p.bufs[f]
		copy(buf, fr[obs])
		p.move(buf, p.pos)
		p.move(buf, p.also)
		if carry {
			p.move(buf, p.carried)
		}
		p.frames[f][obs] = buf
	}
	return p.frames
}

// move adds the predicted displacement to the entries idx of v, taken in
// groups of one per axis.
func (p *predictor) move(v []float32, idx []int) {
	for k, e := range idx {
		v[e] += float32(p.delta[k%len(p.delta)])
	}
}
