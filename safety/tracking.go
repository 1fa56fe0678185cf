package safety

import (
	"math"
	"time"

	"github.com/energyflow/edge/actuators"
)

// tracker is the tracking monitor (TrackingConfig). It keeps a model of
// where the commands the gate wrote should have taken the arm — the
// target they move (clipped to tracking.lower/upper, as the controller
// clips it) and the arm following the target's velocity through a
// first-order lag of time constant tracking.response — and, at every
// fresh arm state, compares the measured displacement over the window with
// the model's over the same samples. The sustained rule adds up, sample
// step by sample step, the difference the drift allowance does not cover
// (a CUSUM), for the error that builds over several steps with none of
// them past the tolerance: an arm pushed or dragged, which the controller
// follows through its lag. A held-back arm's catching up with its
// controller's target, once let go, is not counted a second time
// (unwind).
//
// Commands act between the samples around them: the state read at a tick
// comes before that tick's write, so its effect shows from the next read
// on (the one-tick lag). With per: tick each write moves the model one step
// of one loop period, whatever the wall clock did. With per: second the
// model integrates each velocity from the instant it was written to the
// next write and is read at each state's reply time; as the controller
// sampled the position, and applied a write, at some instant within its
// request, the comparison allows for what the model's velocity (for a read)
// or its change (for a write) covers over the request's duration — small
// on a responsive link, large when the host stalls mid-request (the
// watchdogs' business, not this monitor's).
//
// The model starts afresh, from the measured position with the arm at
// rest, at the first sample after the gate enables the arm (reset,
// recovery, re-arm) and at every sample of a scene change
// (Inputs.SceneChange). Halts are commands of zero, so while stopped the
// monitor watches that the halted arm stays still. Not safe for concurrent
// use; the Guard calls it with mu held. It allocates nothing after New.
type tracker struct {
	on      bool
	perTick bool
	axes    int
	scale   []float64
	lo, hi  []float64 // nil: no target limits
	tau     float64   // response time constant, s (0: none)
	step    float64   // one loop period, s: the model time of a command with per: tick
	window  time.Duration
	back    int // per: tick: samples back the window reaches
	tol     float64
	// The sustained rule (TrackingConfig.Sustained): a CUSUM of each
	// sample step's difference less drift per second; 0: off.
	sustained, drift float64
	sum              float64   // the CUSUM now
	windup           []float64 // per axis: how far the controller's target ran ahead of a held-back arm (unwind)

	restart bool      // start the model afresh at the next sample
	live    bool      // the model runs (started from a sample)
	target  []float64 // where the commands put the controller's target
	vel     []float64 // the model arm's velocity, units/s
	pos     []float64 // the model arm's position
	cmd     []float64 // the target velocity in effect (per: second), units/s
	at      time.Time // per: second: the instant the model is at
	last    time.Time // time of the newest sample
	slack   float64   // per: second: the writes' timing allowance so far, summed

	// The samples since the model started, a ring of n: times, measured
	// and model positions (axes each), the read's timing allowance and the
	// writes' sum at the sample.
	times      []time.Time
	meas, expd []float64
	readSlack  []float64
	writeSlack []float64
	head, n    int
}

// trackErr is one tick's comparison: the norm of the difference over the
// window (NaN: not compared), what the timing of the reads and writes in it
// allows on top of the tolerance (per: second), the span of that window,
// and the axis with the largest difference with its measured and model
// displacements.
type trackErr struct {
	norm          float64
	slack         float64
	span          time.Duration
	axis          int
	meas, command float64
	// sum is the sustained rule's CUSUM after this sample (0 when the
	// rule is off); sustained: it is above TrackingConfig.Sustained.
	sum       float64
	sustained bool
}

// excess is the difference the timing does not explain: what is compared
// with the tolerance (NaN: not compared).
func (e *trackErr) excess() float64 { return max(e.norm-e.slack, 0) }

func newTracker(cfg TrackingConfig, axes int, period time.Duration) *tracker {
	t := &tracker{on: cfg.Enabled, perTick: cfg.Per == TrackingPerTick, axes: axes, tau: cfg.Response.Seconds(),
		step: period.Seconds(), window: cfg.Window, tol: cfg.Tolerance, restart: true,
		sustained: cfg.Sustained, drift: cfg.Drift}
	if !t.on {
		return t
	}
	t.scale = make([]float64, axes)
	for i := range t.scale {
		t.scale[i] = 1
		if i < len(cfg.Scale) {
			t.scale[i] = cfg.Scale[i]
		}
	}
	if len(cfg.Lower) == axes && len(cfg.Upper) == axes {
		t.lo, t.hi = append([]float64(nil), cfg.Lower...), append([]float64(nil), cfg.Upper...)
	}
	// Ring size: with per: tick, the window's samples; with per: second,
	// twice the ticks in the window, so that a late tick still finds one
	// near its age.
	var size int
	if t.perTick {
		t.back = max(1, int(math.Round(float64(cfg.Window)/float64(period))))
		size = t.back + 1
	} else {
		size = 2*int(math.Ceil(float64(cfg.Window)/float64(period))) + 2
	}
	t.target, t.vel, t.pos, t.cmd = make([]float64, axes), make([]float64, axes), make([]float64, axes), make([]float64, axes)
	t.windup = make([]float64, axes)
	t.times = make([]time.Time, size)
	t.meas, t.expd = make([]float64, size*axes), make([]float64, size*axes)
	t.readSlack, t.writeSlack = make([]float64, size), make([]float64, size)
	return t
}

// reset starts the model afresh at the next sample (the arm was enabled:
// it starts at rest where it stands).
func (t *tracker) reset() { t.restart = true }

// observe takes a tick's arm state, read from the instant from (the tick's
// start) to a.Time (the reply). It returns the comparison over the window
// (norm NaN when there is nothing to compare: monitor off, no fresh valid
// position, the model just started) and whether its excess over the
// timing allowance exceeds the tolerance. scene: the position may have
// changed by other means (Inputs.SceneChange); the model starts afresh from
// it.
func (t *tracker) observe(a *actuators.State, from time.Time, scene bool) (e trackErr, over bool) {
	e.norm = math.NaN()
	if !t.on || a == nil || a.Time.IsZero() || len(a.Position) < t.axes || !finite(a.Position[:t.axes]) {
		return e, false
	}
	p := a.Position[:t.axes]
	if t.live && !a.Time.After(t.last) && !scene {
		return e, false // the same read again: nothing new
	}
	if scene || t.restart || !t.live {
		t.start(p, a.Time)
		return e, false
	}
	rs := 0.0
	if !t.perTick {
		t.advanceTo(a.Time)
		if d := a.Time.Sub(from); d > 0 {
			rs = norm(t.vel) * d.Seconds()
		}
	}
	t.push(a.Time, p, rs)
	j := t.reference()
	if j < 0 {
		return e, false
	}
	size := len(t.times)
	cur := (t.head - 1 + size) % size
	t.compare(&e, cur, j)
	if t.sustained > 0 {
		one, span := t.stepExcess(cur, (cur-1+size)%size)
		dt := t.step
		if !t.perTick {
			dt = span.Seconds()
		}
		t.sum = max(0, t.sum+one-t.drift*dt)
		e.sum = t.sum
		e.sustained = t.sum > t.sustained
	}
	return e, e.excess() > t.tol || e.sustained
}

// compare sets e's difference, allowance, span and worst axis for the
// measured against the model's displacement from ring sample j to cur.
func (t *tracker) compare(e *trackErr, cur, j int) {
	e.span = t.times[cur].Sub(t.times[j])
	e.slack = t.readSlack[cur] + t.readSlack[j] + t.writeSlack[cur] - t.writeSlack[j]
	var sum, worst float64
	for i := 0; i < t.axes; i++ {
		m := t.meas[cur*t.axes+i] - t.meas[j*t.axes+i]
		c := t.expd[cur*t.axes+i] - t.expd[j*t.axes+i]
		d := m - c
		sum += d * d
		if ad := math.Abs(d); ad > worst || i == 0 {
			worst, e.axis, e.meas, e.command = ad, i, m, c
		}
	}
	e.norm = math.Sqrt(sum)
}

// stepExcess is the sustained rule's difference over one sample step,
// from ring sample prev to cur, beyond the timing allowance: the measured
// displacement against the model's, per axis, less what the controller's
// windup explains (unwind), and the step's span.
func (t *tracker) stepExcess(cur, prev int) (float64, time.Duration) {
	slack := t.readSlack[cur] + t.readSlack[prev] + t.writeSlack[cur] - t.writeSlack[prev]
	var sum float64
	for i := 0; i < t.axes; i++ {
		m := t.meas[cur*t.axes+i] - t.meas[prev*t.axes+i]
		c := t.expd[cur*t.axes+i] - t.expd[prev*t.axes+i]
		d := t.unwind(i, m, c)
		sum += d * d
	}
	return max(math.Sqrt(sum)-slack, 0), t.times[cur].Sub(t.times[prev])
}

// unwind returns axis i's difference m − c (measured against commanded
// displacement over one sample step) less what the controller's windup
// explains, and updates the windup. An arm held back (pressing on an
// object, blocked by the table) falls short of its commands while its
// controller's target runs on; the shortfall counts once, as it happens,
// and is kept as windup. When the arm is let go it catches up with the
// target: motion beyond the commands, the way the target ran ahead, that
// the commands did ask for, so it draws the windup down instead of
// counting a second time. The part of a step that moves against the
// command is not windup (the target never went there). The windup is
// kept within one tolerance, so it never explains more than that of a
// later push.
func (t *tracker) unwind(i int, m, c float64) float64 {
	d := m - c
	w := t.windup[i]
	switch {
	case d*c < 0: // short of the command: the target ran ahead by the shortfall
		short := -d
		if math.Abs(short) > math.Abs(c) {
			short = c
		}
		w += short
	case d*w > 0: // past the command, toward where the target ran ahead
		r := math.Min(math.Abs(d), math.Abs(w))
		d -= math.Copysign(r, d)
		w -= math.Copysign(r, w)
	}
	t.windup[i] = max(-t.tol, min(t.tol, w))
	return d
}

// wrote takes a write to the arm sent at time at and answered at done: the
// velocity command v (nil: a halt, zero), in command units.
func (t *tracker) wrote(at, done time.Time, v []float64) {
	if !t.on || !t.live {
		return
	}
	if t.perTick {
		for i := range t.cmd {
			t.cmd[i] = 0
			if v != nil {
				t.cmd[i] = t.scale[i] * v[i] / t.step
			}
		}
		t.advance(t.step)
		return
	}
	t.advanceTo(at)
	var change float64
	for i := range t.cmd {
		c := 0.0
		if v != nil {
			c = t.scale[i] * v[i]
		}
		change += (c - t.cmd[i]) * (c - t.cmd[i])
		t.cmd[i] = c
	}
	if d := done.Sub(at); d > 0 {
		t.slack += math.Sqrt(change) * d.Seconds()
	}
}

// start runs the model from position p at rest, at time at, with the
// window's samples cleared.
func (t *tracker) start(p []float64, at time.Time) {
	copy(t.target, p)
	copy(t.pos, p)
	clear(t.vel)
	clear(t.cmd)
	t.at = at
	t.slack = 0
	t.sum = 0
	clear(t.windup)
	t.live, t.restart = true, false
	t.head, t.n = 0, 0
	t.push(at, p, 0)
}

// push appends a sample: measured position p and the model's at time at,
// with the read's timing allowance rs.
func (t *tracker) push(at time.Time, p []float64, rs float64) {
	k := t.head
	t.times[k] = at
	copy(t.meas[k*t.axes:(k+1)*t.axes], p)
	copy(t.expd[k*t.axes:(k+1)*t.axes], t.pos)
	t.readSlack[k], t.writeSlack[k] = rs, t.slack
	t.head = (t.head + 1) % len(t.times)
	t.n = min(t.n+1, len(t.times))
	t.last = at
}

// reference returns the ring index of the sample the newest one is
// compared with (−1: none): per: tick, the one back samples before (or
// the oldest kept); per: second, the one whose age is nearest the window.
func (t *tracker) reference() int {
	if t.n < 2 {
		return -1
	}
	size := len(t.times)
	cur := (t.head - 1 + size) % size
	if t.perTick {
		return (cur - min(t.back, t.n-1) + size) % size
	}
	best, bestD := -1, time.Duration(math.MaxInt64)
	for k := 1; k < t.n; k++ {
		j := (cur - k + size) % size
		d := t.times[cur].Sub(t.times[j]) - t.window
		if d < 0 {
			d = -d
		}
		if d < bestD {
			best, bestD = j, d
		}
	}
	return best
}

// advanceTo integrates the model up to time to (per: second); an earlier
// time (another clock's jitter) leaves it where it is.
func (t *tracker) advanceTo(to time.Time) {
	if dt := to.Sub(t.at); dt > 0 {
		t.advance(dt.Seconds())
		t.at = to
	}
}

// advance integrates the model over dt seconds with the target velocity
// t.cmd: the target moves (clipped to the limits), the arm's velocity
// follows the target's through the first-order lag (exactly, for a
// velocity constant over dt), the arm's position integrates it.
func (t *tracker) advance(dt float64) {
	if dt <= 0 {
		return
	}
	a := 0.0
	if t.tau > 0 {
		a = math.Exp(-dt / t.tau)
	}
	for i := 0; i < t.axes; i++ {
		r := t.target[i] + t.cmd[i]*dt
		if t.lo != nil {
			// clipped at a limit it moves toward; a target already past it
			// (started from a position there) is not pulled back
			switch {
			case t.cmd[i] < 0 && r < t.lo[i]:
				r = min(t.target[i], t.lo[i])
			case t.cmd[i] > 0 && r > t.hi[i]:
				r = max(t.target[i], t.hi[i])
			}
		}
		s := (r - t.target[i]) / dt // the target's velocity, clipped
		t.target[i] = r
		if t.tau > 0 {
			t.pos[i] += s*dt + (t.vel[i]-s)*t.tau*(1-a)
			t.vel[i] = s + (t.vel[i]-s)*a
		} else {
			t.pos[i] += s * dt
			t.vel[i] = s
		}
	}
}

// norm is the Euclidean norm of v.
func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}
