package safety

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

// Property: whatever the policy proposes and whatever the inputs do, no
// command leaving the gate exceeds a configured limit, contains NaN/Inf, or
// is written while the gate is latched.
func TestPropertyCommandsStayWithinLimits(t *testing.T) {
	const configs, ticks = 80, 300
	for seed := uint64(1); seed <= configs; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := randomConfig(rng)
		checkProperty(t, seed, rng, cfg, ticks)
	}
}

func randomConfig(rng *rand.Rand) Config {
	cfg := testConfig()
	axes := 1 + rng.IntN(7)
	pos := func(lo, hi float64) []float64 {
		v := make([]float64, axes)
		for i := range v {
			v[i] = lo + rng.Float64()*(hi-lo)
		}
		return v
	}
	l := &cfg.Limits
	l.MaxVelocity = pos(0.1, 3)
	if rng.IntN(2) == 0 {
		l.MaxAcceleration = pos(0.5, 20)
		if rng.IntN(2) == 0 {
			l.MaxJerk = pos(5, 200)
		}
	}
	if rng.IntN(2) == 0 {
		l.MaxDelta = pos(0.05, 1)
	}
	if rng.IntN(2) == 0 {
		l.SoftLower = pos(-2, -0.1)
		l.SoftUpper = pos(0.1, 2)
		l.KPosition = pos(0.5, 20)
	}
	l.Gripper.Min = -rng.Float64()
	l.Gripper.Max = rng.Float64()
	if rng.IntN(2) == 0 {
		l.Gripper.MaxDelta = 0.05 + rng.Float64()
	}
	if rng.IntN(2) == 0 {
		cfg.Energy.Rule.Kind = RuleCUSUM
		cfg.Energy.Scores[0].Scale = f64(1)
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

func wild(rng *rand.Rand) float64 {
	switch rng.IntN(40) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*rng.IntN(2))
	}
	return (rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(4))-1)
}

func checkProperty(t *testing.T, seed uint64, rng *rand.Rand, cfg Config, ticks int) {
	t.Helper()
	arm := newFakeArm()
	g, err := New(arm, cfg, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := &cfg.Limits
	axes := len(l.MaxVelocity)
	st := actuators.State{Position: make([]float64, axes), Enabled: true}
	vel := make([]float64, axes)
	prev := make([]float64, axes)
	var prevG float64
	fresh := true // first command after a (re)start: rates from standstill, gripper free
	now := t0
	var lastNow time.Time
	ctx := context.Background()
	const eps = 1e-9
	for n := 0; n < ticks; n++ {
		dt := time.Duration(50+rng.IntN(100)) * time.Millisecond
		now = now.Add(dt)
		for i := range st.Position {
			st.Position[i] = (rng.Float64()*2 - 1) * 3
			vel[i] = wild(rng)
		}
		st.Time = now
		st.EStop = rng.IntN(200) == 0
		in := Inputs{Tick: int64(n), Now: now, Deadline: now, Camera: now, Arm: &st,
			Scores:  Scores{rng.NormFloat64()*3 + 5, 0},
			Command: actuators.Command{Velocity: vel, Gripper: wild(rng)}}
		if rng.IntN(50) == 0 {
			in.Scores[ScoreEnergy] = math.NaN()
		}
		switch rng.IntN(20) {
		case 0:
			_ = g.Stop(ctx, "prop", "")
		case 1, 2, 3:
			g.mu.Lock()
			if g.pending == nil {
				g.pending = &resetRequest{actor: "prop", done: make(chan error, 1)}
			}
			g.mu.Unlock()
		}
		before, _, _ := arm.counts()
		wasRunning := g.Status().State == Running
		d, _ := g.Tick(ctx, &in)
		after, _, _ := arm.counts()
		if after == before { // stopped (or reset) this tick: the next command restarts from standstill
			if d.Command.Velocity != nil {
				t.Fatalf("seed %d tick %d: decision reports a command that was not written", seed, n)
			}
			fresh = true
			lastNow = now
			continue
		}
		if !wasRunning {
			t.Fatalf("seed %d tick %d: command written while latched", seed, n)
		}
		out := arm.calls[len(arm.calls)-1].cmd
		if len(out.Velocity) != axes {
			t.Fatalf("seed %d: %d axes written", seed, len(out.Velocity))
		}
		sec := now.Sub(lastNow).Seconds()
		for i, v := range out.Velocity {
			fail := func(what string, bound float64) {
				t.Fatalf("seed %d tick %d axis %d: v=%v (prev %v, proposed %v) breaks %s %v", seed, n, i, v, prev[i], vel[i], what, bound)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				fail("finiteness", 0)
			}
			vmax := l.MaxVelocity[i]
			if math.Abs(v) > vmax+eps {
				fail("max_velocity", vmax)
			}
			lo, hi := -vmax, vmax
			if len(l.KPosition) > 0 {
				smin := -l.KPosition[i] * (st.Position[i] - l.SoftLower[i])
				smax := -l.KPosition[i] * (st.Position[i] - l.SoftUpper[i])
				switch {
				case smax < lo:
					hi = lo
				case smin > hi:
					lo = hi
				default:
					lo, hi = math.Max(lo, smin), math.Min(hi, smax)
				}
				if v < lo-eps || v > hi+eps {
					fail("soft position interval", hi)
				}
			}
			// Rate limits hold whenever the harder interval allows them.
			p := prev[i]
			if fresh {
				p = 0
			}
			if len(l.MaxDelta) > 0 && p >= lo-eps && p <= hi+eps && math.Abs(v-p) > l.MaxDelta[i]+eps {
				fail("max_delta", l.MaxDelta[i])
			}
			if len(l.MaxAcceleration) > 0 && p >= lo-eps && p <= hi+eps && math.Abs(v-p) > l.MaxAcceleration[i]*sec+eps {
				fail("max_acceleration", l.MaxAcceleration[i])
			}
			// Never beyond the proposal: the gate only slows.
			if pr := vel[i]; v > math.Max(p, math.Max(pr, lo))+eps || v < math.Min(p, math.Min(pr, hi))-eps {
				fail("the segment [previous, proposal]", pr)
			}
			prev[i] = v
		}
		gr := out.Gripper
		if math.IsNaN(gr) || gr < l.Gripper.Min-eps || gr > l.Gripper.Max+eps {
			t.Fatalf("seed %d tick %d: gripper %v outside [%v, %v]", seed, n, gr, l.Gripper.Min, l.Gripper.Max)
		}
		if l.Gripper.MaxDelta > 0 && !fresh && math.Abs(gr-prevG) > l.Gripper.MaxDelta+eps {
			t.Fatalf("seed %d tick %d: gripper step %v > %v", seed, n, gr-prevG, l.Gripper.MaxDelta)
		}
		prevG, fresh = gr, false
		lastNow = now
	}
	arm.checkViolations(t)
}
