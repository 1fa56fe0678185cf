package safety

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

// trackStep is one tick of a tracker test: the arm state read (pos; nil:
// no fresh read), then the command written (nil: a halt).
type trackStep struct {
	pos   []float64
	cmd   []float64
	late  time.Duration // the read's reply came this long after the tick's nominal time
	took  time.Duration // the read took this long (it started took before its reply)
	write time.Duration // the write went out this long after the tick's nominal time
	wtook time.Duration // the write took this long
	scene bool
	stale bool // the read repeats the previous one (same time)
}

// runTracker feeds steps to a tracker at period intervals and returns the
// difference each tick compared (its excess over the timing allowance;
// NaN: none) and whether it was over.
func runTracker(t *testing.T, cfg TrackingConfig, steps []trackStep) ([]float64, []bool) {
	norms, overs, _ := runTrackerRaw(t, cfg, steps)
	return norms, overs
}

// runTrackerRaw is runTracker, with the largest raw difference (before the
// timing allowance) too.
func runTrackerRaw(t *testing.T, cfg TrackingConfig, steps []trackStep) ([]float64, []bool, float64) {
	t.Helper()
	cfg.Enabled = true
	tr := newTracker(cfg, 3, period)
	norms, overs := make([]float64, len(steps)), make([]bool, len(steps))
	raw := 0.0
	var st actuators.State
	for k, s := range steps {
		now := t0.Add(time.Duration(k) * period)
		var a *actuators.State
		if s.pos != nil {
			if !s.stale {
				st.Time = now.Add(s.late)
			}
			st.Position = s.pos
			a = &st
		}
		e, over := tr.observe(a, st.Time.Add(-s.took), s.scene)
		norms[k], overs[k] = e.excess(), over
		if !math.IsNaN(e.norm) {
			raw = max(raw, e.norm)
		}
		tr.wrote(now.Add(s.write), now.Add(s.write+s.wtook), s.cmd)
	}
	return norms, overs, raw
}

// moves builds the steps of an arm that follows its commands exactly:
// position k is the sum of the commands before it, times scale, plus
// extra[k] (a reading fault).
func moves(cmds [][]float64, scale float64, extra map[int][]float64) []trackStep {
	steps := make([]trackStep, len(cmds))
	p := []float64{0.1, 0.5, 0.2}
	for k, c := range cmds {
		pos := append([]float64(nil), p...)
		for i, x := range extra[k] {
			pos[i] += x
		}
		steps[k] = trackStep{pos: pos, cmd: c}
		for i := range p {
			p[i] += scale * c[i]
		}
	}
	return steps
}

func same(v []float64, n int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// from returns v for ticks k ≥ onset, indexed for moves' extra.
func from(onset, n int, v func(k int) []float64) map[int][]float64 {
	m := map[int][]float64{}
	for k := onset; k < n; k++ {
		m[k] = v(k)
	}
	return m
}

// The tracker's comparison, tick by tick: an arm that follows its commands
// is never over the tolerance, a reading that jumps is, at the tick it
// jumps, and one that drifts slowly is not.
func TestTrackerComparison(t *testing.T) {
	perTick := TrackingConfig{Window: period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	perSecond := TrackingConfig{Window: 2 * period, Tolerance: 0.02, Per: TrackingPerSecond}
	withResponse := perTick
	withResponse.Response = 4 * period
	withBox := perTick
	withBox.Lower, withBox.Upper = []float64{-0.5, 0.4, 0.12}, []float64{0.5, 1, 0.5}
	fwd := []float64{1, -0.5, 0}
	const n = 12

	// An arm with a first-order lag of four ticks: each tick's displacement
	// is the exact response of the tracker's model.
	lagged := func(cmds [][]float64, tau float64, extra map[int][]float64) []trackStep {
		steps := make([]trackStep, len(cmds))
		p, v := []float64{0.1, 0.5, 0.2}, make([]float64, 3)
		a := math.Exp(-1 / tau)
		for k, c := range cmds {
			pos := append([]float64(nil), p...)
			for i, x := range extra[k] {
				pos[i] += x
			}
			steps[k] = trackStep{pos: pos, cmd: c}
			for i := range p {
				s := 0.01 * c[i]
				p[i] += s + (v[i]-s)*tau*(1-a)
				v[i] = s + (v[i]-s)*a
			}
		}
		return steps
	}
	// An arm pushing into the box's floor at z 0.12 (from 0.2, reached at
	// tick 8): the target stops there.
	floor := func() []trackStep {
		steps := moves(same([]float64{0, 0, -1}, n), 0.01, nil)
		for k := range steps {
			steps[k].pos[2] = max(steps[k].pos[2], 0.12)
		}
		return steps
	}
	// An arm commanded in velocity (units/s) whose reads and writes come
	// with jitter: it integrates each command from its write to the next.
	// stall delays the reply of read 6 by 60 ms after the controller
	// sampled the position, and the controller's applying of write 8 by 20
	// ms (the write's reply 25 ms after it went out).
	jittered := func(extra map[int][]float64, stall bool) []trackStep {
		steps := make([]trackStep, n)
		late := []time.Duration{3, 30, 1, 12, 45, 0, 20, 7, 38, 2, 15, 9}
		write := []time.Duration{10, 40, 5, 60, 50, 8, 90, 20, 70, 6, 25, 30}
		cmds := [][]float64{{0.5, 0, 0}, {1, 0, 0}, {1, 0.5, 0}, {-0.5, 0.5, 0}, {-1, 0, 1}, {0, 0, 1}, {1, 1, 1}, {0, 0, 0}, {0.5, -1, 0}, {1, 1, -1}, {0, 0, 0}, {1, 0, 0}}
		applied := func(k int) time.Duration { // when write k took effect, after its tick
			d := write[k%n] * time.Millisecond
			if stall && k == 8 {
				d += 20 * time.Millisecond
			}
			return d
		}
		// position(t) integrates cmd k from write k to write k+1
		pos := func(at time.Time) []float64 {
			p := []float64{0.1, 0.5, 0.2}
			for k := range cmds {
				w0 := t0.Add(time.Duration(k)*period + applied(k))
				w1 := t0.Add(time.Duration(k+1)*period + applied(k+1))
				if at.Before(w0) {
					break
				}
				if at.Before(w1) {
					w1 = at
				}
				for i := range p {
					p[i] += cmds[k][i] * w1.Sub(w0).Seconds()
				}
			}
			return p
		}
		for k := range steps {
			l := late[k] * time.Millisecond
			p := pos(t0.Add(time.Duration(k)*period + l))
			for i, x := range extra[k] {
				p[i] += x
			}
			steps[k] = trackStep{pos: p, cmd: cmds[k], late: l, write: write[k] * time.Millisecond}
			if stall && k == 6 { // the write follows the reply, as in a tick
				steps[k].late += 60 * time.Millisecond
				steps[k].took = 60 * time.Millisecond
				if steps[k].write < steps[k].late {
					panic("a write before its tick's read")
				}
			}
			if stall && k == 8 { // answered before the next tick's read
				steps[k].wtook = 25 * time.Millisecond
			}
		}
		return steps
	}

	cases := []struct {
		name     string
		cfg      TrackingConfig
		steps    []trackStep
		over     []int   // ticks over the tolerance
		maxClean float64 // largest norm allowed at the other ticks
		compared int     // ticks compared (-1: don't check)
		allowed  bool    // the timing allowance keeps it under: a raw difference is over the tolerance
	}{
		{"follows: never over", perTick, moves(same(fwd, n), 0.01, nil), nil, 1e-12, n - 1, false},
		{"3 cm jump in x from tick 6 on", perTick, moves(same(fwd, n), 0.01, from(6, n, func(int) []float64 { return []float64{0.03} })), []int{6}, 1e-12, -1, false},
		{"8 cm jump in x from tick 6 on", perTick, moves(same(fwd, n), 0.01, from(6, n, func(int) []float64 { return []float64{0.08} })), []int{6}, 1e-12, -1, false},
		{"1 cm jump: within tolerance", perTick, moves(same(fwd, n), 0.01, from(6, n, func(int) []float64 { return []float64{0.01} })), nil, 0.0100001, -1, false},
		{"slow drift 3 mm a tick, 3.3 cm in all", perTick, moves(same(fwd, n), 0.01, from(1, n, func(k int) []float64 { return []float64{0.003 * float64(k)} })), nil, 0.0031, -1, false},
		{"frozen reading: at most one command's step a tick", perTick, moves(same(fwd, n), 0.01, from(3, n, func(k int) []float64 { return []float64{-0.01 * float64(k-3), 0.005 * float64(k-3)} })), nil, 0.0112, -1, false},
		{"window of three ticks sees a jump three times", TrackingConfig{Window: 3 * period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}},
			moves(same(fwd, n), 0.01, from(6, n, func(int) []float64 { return []float64{0, 0.03} })), []int{6, 7, 8}, 1e-12, -1, false},
		{"a lagging arm: the response models it", withResponse, lagged(same(fwd, n), 4, nil), nil, 1e-12, -1, false},
		{"a lagging arm without the response: at most a step's difference", perTick, lagged(same(fwd, n), 4, nil), nil, 0.0112, -1, false},
		{"a lagging arm that jumps", withResponse, lagged(same(fwd, n), 4, from(5, n, func(int) []float64 { return []float64{0, 0, -0.03} })), []int{5}, 1e-12, -1, false},
		{"pushing into the box: clipped, no motion expected", withBox, floor(), nil, 1e-12, -1, false},
		{"pushing into the floor without the box", perTick, floor(), nil, 0.0101, -1, false},
		{"per second with jitter", perSecond, jittered(nil, false), nil, 1e-9, -1, false},
		{"per second with jitter, 3 cm jump", perSecond, jittered(from(7, n, func(int) []float64 { return []float64{0.03} }), false), []int{7, 8}, 1e-9, -1, false},
		{"per second, a stalled read and a stalled write: allowed for", perSecond, jittered(nil, true), nil, 1e-9, -1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			norms, overs, raw := runTrackerRaw(t, tc.cfg, tc.steps)
			if tc.allowed && raw <= tc.cfg.Tolerance {
				t.Errorf("largest raw difference %v: the case does not need the timing allowance", raw)
			}
			compared := 0
			for k := range norms {
				want := false
				for _, o := range tc.over {
					want = want || o == k
				}
				if overs[k] != want {
					t.Errorf("tick %d: over %v (norm %.5f), want %v", k, overs[k], norms[k], want)
				}
				if !math.IsNaN(norms[k]) {
					compared++
					if !want && norms[k] > tc.maxClean {
						t.Errorf("tick %d: norm %.6f, want at most %g", k, norms[k], tc.maxClean)
					}
				}
			}
			if tc.compared >= 0 && compared != tc.compared {
				t.Errorf("%d ticks compared, want %d", compared, tc.compared)
			}
			if math.IsNaN(norms[1]) {
				t.Errorf("tick 1 not compared")
			}
		})
	}
}

// What the tracker does not compare: the first sample, a stale read, a
// missing or invalid position, and a scene change (it starts afresh).
func TestTrackerSkips(t *testing.T) {
	cfg := TrackingConfig{Window: period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	steps := moves(same([]float64{1, 0, 0}, 9), 0.01, nil)
	steps[2].stale = true                                                               // the same read again
	steps[3].pos = nil                                                                  // no state
	steps[4].pos = []float64{math.NaN(), 0.5, 0.2}                                      // invalid
	steps[6] = trackStep{pos: []float64{2, 2, 2}, scene: true, cmd: []float64{1, 0, 0}} // teleported by a reset
	steps[7].pos = []float64{2.01, 2, 2}
	steps[8].pos = []float64{2.02 + 0.05, 2, 2} // a jump after the scene change still trips
	norms, overs := runTracker(t, cfg, steps)
	for k, want := range []bool{false, true, false, false, false, true, false, true, true} {
		if got := !math.IsNaN(norms[k]); got != want {
			t.Errorf("tick %d compared %v (norm %v), want %v", k, got, norms[k], want)
		}
	}
	// Tick 5 compares with tick 1 over the four commands written since:
	// the reads skipped leave no gap in the model.
	if norms[5] > 1e-12 || norms[7] > 1e-12 {
		t.Errorf("norms %v at tick 5 and %v at tick 7, want 0", norms[5], norms[7])
	}
	for k, o := range overs {
		if o != (k == 8) {
			t.Errorf("tick %d: over %v (norm %v)", k, o, norms[k])
		}
	}
}

// The tracking stop through the gate: a position reading that jumps trips
// it (KindTracking, with a message naming the tolerance), the stop
// latches, a reset is refused while the halted arm's reading keeps
// jumping and passes once it holds still; a scene change moves the arm
// without a trip; with the monitor off nothing is compared.
func TestTrackingStop(t *testing.T) {
	cfg := testConfig()
	cfg.Tracking = TrackingConfig{Enabled: true, Window: period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	r := newRig(t, cfg)
	r.armGate()
	// The arm follows its commands, one tick later (lockstep).
	var d Decision
	for k := 0; k < 5; k++ {
		r.vel[0], r.vel[1] = 1, -0.5
		d = r.tick(nil)
		r.follow(d, 0.01)
		if d.State != Running {
			t.Fatalf("tick %d: %v (%s)", k, d.State, d.Reason.Message)
		}
	}
	if !(d.Tracking < 1e-12) {
		t.Fatalf("tracking difference %v while following, want 0", d.Tracking)
	}
	// A scene change: the hand is somewhere else, no trip.
	r.st.Position[2] += 0.5
	d = r.tick(func(in *Inputs) { in.SceneChange = true })
	r.follow(d, 0.01)
	if d.State != Running || !math.IsNaN(d.Tracking) {
		t.Fatalf("scene change: state %v, tracking %v; want running, not compared", d.State, d.Tracking)
	}
	d = r.tick(nil)
	r.follow(d, 0.01)
	if d.State != Running || !(d.Tracking < 1e-12) {
		t.Fatalf("after the scene change: state %v, tracking %v", d.State, d.Tracking)
	}
	// The reading jumps 3 cm in x.
	r.st.Position[0] += 0.03
	d = r.tick(nil)
	if d.State != Stopped || d.Reason.Kind != KindTracking || !d.Halted {
		t.Fatalf("jump: state %v reason %v (%s); want stopped by tracking", d.State, d.Reason.Kind, d.Reason.Message)
	}
	if m := d.Reason.Message; !strings.Contains(m, "safety.tracking.tolerance 0.02") || !strings.Contains(m, "axis 0") {
		t.Errorf("message %q", m)
	}
	if math.Abs(d.Tracking-0.03) > 1e-9 {
		t.Errorf("tracking difference %v, want 0.03", d.Tracking)
	}
	// Latched; the halted arm's reading keeps jumping: resets refused.
	r.st.Position[0] -= 0.03
	if err := r.resetAt(nil); err == nil || !strings.Contains(err.Error(), "tracking") {
		t.Fatalf("reset while the reading jumps back: %v", err)
	}
	r.st.Position[0] += 0.03
	if err := r.resetAt(nil); err == nil {
		t.Fatal("reset accepted while the reading jumps")
	}
	if b := r.g.Status(); b.Active != KindTracking {
		t.Errorf("active fault %v while the reading jumps", b.Active)
	}
	// Still: a reset passes, and the arm runs from where it reads.
	r.tick(nil)
	if err := r.resetAt(nil); err != nil {
		t.Fatalf("reset with the arm still: %v", err)
	}
	d = r.tick(nil)
	r.follow(d, 0.01)
	if d.State != Running {
		t.Fatalf("after the reset: %v (%s)", d.State, d.Reason.Message)
	}
	if c := r.g.Counters(); c.Trips[KindTracking] != 1 || c.ResetsRefused != 2 {
		t.Errorf("counters: tracking trips %d, refused resets %d", c.Trips[KindTracking], c.ResetsRefused)
	}
	r.arm.checkViolations(t)

	// Off: nothing compared, a jump goes unnoticed by this monitor.
	r = newRig(t, testConfig())
	r.armGate()
	r.st.Position[0] += 0.5
	if d := r.tick(nil); d.State != Running || !math.IsNaN(d.Tracking) {
		t.Fatalf("monitor off: state %v, tracking %v", d.State, d.Tracking)
	}
}

// follow moves the rig's arm by the command the gate wrote (scale per
// unit), as a lockstep arm does: the next read shows it.
func (r *rig) follow(d Decision, scale float64) {
	for i, v := range d.Command.Velocity {
		r.st.Position[i] += scale * v
	}
}

// The tracking monitor keeps watching while the operator recovers from an
// energy stop: a jog the arm does not follow stops it, as a following
// error stops an industrial arm in every mode.
func TestTrackingWatchesRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.Tracking = TrackingConfig{Enabled: true, Window: period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	r := newRig(t, cfg)
	r.armGate()
	r.tripEnergy(nil)
	if err := r.recoverAt(RecoveryJog, high); err != nil {
		t.Fatal(err)
	}
	r.drain()
	for k := 0; k < 4; k++ {
		if err := r.g.Jog("operator", []float64{1, 0, 0}, math.NaN()); err != nil {
			t.Fatal(err)
		}
		d := r.tick(high)
		r.follow(d, 0.01)
		if d.State != Recovering {
			t.Fatalf("jog %d: %v (%s)", k, d.State, d.Reason.Message)
		}
	}
	r.st.Position[1] += 0.05 // the arm is knocked sideways
	d := r.tick(high)
	if d.State != Stopped || d.Reason.Kind != KindTracking {
		t.Fatalf("state %v reason %v (%s); want stopped by tracking", d.State, d.Reason.Kind, d.Reason.Message)
	}
	evs := r.drainEvents()
	if len(evs) != 2 || evs[1].Type != EventRecoveryEnd || evs[1].End != EndFault || evs[1].Reason.Kind != KindTracking {
		t.Fatalf("events %+v", evs)
	}
}

// A running tick with the tracking monitor on allocates nothing, per tick
// and per second, with the target limits and the response.
func TestTrackingTickAllocatesNothing(t *testing.T) {
	for _, per := range []string{TrackingPerTick, TrackingPerSecond} {
		t.Run(per, func(t *testing.T) {
			cfg := testConfig()
			cfg.Tracking = TrackingConfig{Enabled: true, Window: 3 * period, Tolerance: 1e9, Per: per,
				Scale: []float64{0.01, 0.01, 0.01}, Response: 4 * period, Lower: []float64{-1, -1, -1}, Upper: []float64{1, 1, 1}}
			r := newRig(t, cfg)
			r.arm.record = false
			r.armGate()
			in := r.next()
			if _, err := r.g.Tick(context.Background(), in); err != nil { // the model starts here
				t.Fatal(err)
			}
			k := 0
			allocs := testing.AllocsPerRun(1000, func() {
				k++
				r.advance(in)
				r.vel[0] = float64(k%5) - 2
				r.st.Position[0] += 0.001
				d, err := r.g.Tick(context.Background(), in)
				if err != nil || math.IsNaN(d.Tracking) {
					t.Fatalf("%v, tracking %v", err, d.Tracking)
				}
			})
			if st := r.g.Status(); st.State != Running {
				t.Fatalf("stopped: %s", st.Reason.Message)
			}
			if allocs != 0 {
				t.Fatalf("running tick with tracking allocates %v times", allocs)
			}
		})
	}
}

// The sustained rule: an arm dragged off its path by a little under the
// tolerance each tick (a push the controller follows through its lag) is
// never over the window's tolerance, and is caught by the sum within a few
// ticks; normal misses below the drift allowance never add up; the sum
// restarts with the model.
func TestTrackerSustained(t *testing.T) {
	base := TrackingConfig{Window: period, Tolerance: 0.02, Per: TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	rule := base
	rule.Sustained, rule.Drift = 0.01, 0.006/period.Seconds() // 6 mm a tick
	still := same([]float64{0, 0, 0}, 14)
	// dragged: from tick 4 on, 1 cm a tick in x (half the tolerance)
	dragged := from(4, 14, func(k int) []float64 { return []float64{0.01 * float64(k-3), 0, 0} })
	jitter := from(1, 14, func(k int) []float64 { return []float64{0.004 * float64(k%2), 0, 0} }) // 4 mm back and forth
	// held back: z commanded down 9 mm a tick at ticks 2–4 while the arm
	// stays (reads 3–5), then let go: it catches up with its target at
	// reads 6–8 against no command. The catch-up is the commands' own
	// motion (the controller's windup), counted once, as the shortfall.
	down := same([]float64{0, 0, 0}, 14)
	for k := 2; k <= 4; k++ {
		down[k] = []float64{0, 0, -0.9}
	}
	heldUp := []float64{0, 0.009, 0.018, 0.027, 0.018, 0.009}
	held := map[int][]float64{}
	for k := 3; k < 14; k++ {
		held[k] = []float64{0, 0, heldUp[min(k-3, len(heldUp)-1)]}
	}
	// held back the same, never let go, and dragged in x from read 7 on:
	// the windup explains nothing of a push elsewhere.
	heldDragged := map[int][]float64{}
	for k := 3; k < 14; k++ {
		heldDragged[k] = []float64{0.01 * float64(max(0, k-6)), 0, 0.027 - 0.009*float64(max(0, 5-k))}
	}
	tests := []struct {
		name   string
		cfg    TrackingConfig
		cmds   [][]float64
		extra  map[int][]float64
		trip   int // first tick over (−1: none)
		sumMax float64
	}{
		{"dragged, window only", base, still, dragged, -1, 0},
		{"dragged, sustained", rule, still, dragged, 6, 0},
		{"jitter, sustained", rule, still, jitter, -1, 1e-12},
		{"held back, then let go", rule, down, held, -1, 0.0091},
		{"held back, then dragged", rule, down, heldDragged, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Enabled = true
			tr := newTracker(tc.cfg, 3, period)
			steps := moves(tc.cmds, 0.01, tc.extra)
			first := -1
			sumMax := 0.0
			var st actuators.State
			for k, s := range steps {
				now := t0.Add(time.Duration(k) * period)
				st.Time, st.Position = now, s.pos
				e, over := tr.observe(&st, now, false)
				if !math.IsNaN(e.norm) && e.excess() > tc.cfg.Tolerance {
					t.Fatalf("tick %d: window difference %v over the tolerance", k, e.excess())
				}
				sumMax = max(sumMax, e.sum)
				if over && first < 0 {
					first = k
					if !e.sustained {
						t.Errorf("tick %d: over but not sustained", k)
					}
				}
				tr.wrote(now, now, s.cmd)
			}
			if first != tc.trip {
				t.Errorf("first trip at tick %d, want %d", first, tc.trip)
			}
			if tc.sumMax > 0 && sumMax > tc.sumMax {
				t.Errorf("sum reached %v, want at most %v", sumMax, tc.sumMax)
			}
		})
	}

	// The sum restarts with the model (an accepted reset, a scene change).
	rule.Enabled = true
	tr := newTracker(rule, 3, period)
	steps := moves(still, 0.01, dragged)
	var st actuators.State
	var e trackErr
	for k, s := range steps[:6] {
		now := t0.Add(time.Duration(k) * period)
		st.Time, st.Position = now, s.pos
		e, _ = tr.observe(&st, now, false)
		tr.wrote(now, now, nil)
	}
	if !(e.sum > 0) {
		t.Fatalf("sum %v after the drag began, want > 0", e.sum)
	}
	tr.reset()
	st.Time = st.Time.Add(period)
	if e, _ = tr.observe(&st, st.Time, false); e.sum != 0 || tr.sum != 0 {
		t.Errorf("sum %v after a reset, want 0", tr.sum)
	}
}

// Through the gate: the sustained stop names itself and its settings, and
// a reset passes once the halted arm holds still long enough for the sum
// to drain.
func TestTrackingSustainedStop(t *testing.T) {
	cfg := testConfig()
	cfg.Tracking = TrackingConfig{Enabled: true, Window: period, Tolerance: 0.02, Per: TrackingPerTick,
		Scale: []float64{0.01, 0.01, 0.01}, Sustained: 0.01, Drift: 0.006 / period.Seconds()}
	r := newRig(t, cfg)
	r.armGate()
	var d Decision
	for k := 0; k < 3; k++ {
		d = r.tick(nil)
		r.follow(d, 0.01)
	}
	// dragged 1.5 cm a tick in y, the commands say nothing of it
	for k := 0; k < 4 && d.State == Running; k++ {
		r.st.Position[1] += 0.015
		d = r.tick(nil)
		r.follow(d, 0.01)
	}
	if d.State != Stopped || d.Reason.Kind != KindTracking {
		t.Fatalf("dragged: state %v reason %v (%s); want stopped by tracking", d.State, d.Reason.Kind, d.Reason.Message)
	}
	if m := d.Reason.Message; !strings.Contains(m, "safety.tracking.sustained 0.01") || !strings.Contains(m, "pushed or dragged") {
		t.Errorf("message %q", m)
	}
	if !(d.TrackingSum > 0.01) {
		t.Errorf("Decision.TrackingSum %v, want > 0.01", d.TrackingSum)
	}
	// Held still, the sum drains by the drift each tick; then a reset passes.
	for k := 0; k < 4; k++ {
		r.tick(nil)
	}
	if err := r.resetAt(nil); err != nil {
		t.Fatalf("reset with the arm still: %v", err)
	}
}
