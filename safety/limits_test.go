package safety

import (
	"math"
	"testing"
	"time"
)

func TestLimits(t *testing.T) {
	base := LimitsConfig{MaxVelocity: []float64{1}, Gripper: GripperLimits{Min: -1, Max: 1}}
	with := func(f func(*LimitsConfig)) LimitsConfig {
		c := base
		f(&c)
		return c
	}
	type step struct {
		in, pos, grip float64
		dt            time.Duration
		want, wantG   float64
		clamp         Limit
		clamped       bool
	}
	const dt = 100 * time.Millisecond
	cases := []struct {
		name  string
		cfg   LimitsConfig
		steps []step
	}{
		{"velocity", base, []step{
			{in: 0.5, dt: dt, want: 0.5},
			{in: 3, dt: dt, want: 1, clamp: LimitVelocity, clamped: true},
			{in: -3, dt: dt, want: -1, clamp: LimitVelocity, clamped: true},
		}},
		{"soft position slows toward the upper bound", with(func(c *LimitsConfig) {
			c.SoftLower, c.SoftUpper, c.KPosition = []float64{-1}, []float64{1}, []float64{2}
		}), []step{
			{in: 1, pos: 0, dt: dt, want: 1},                                              // k·(1−0)=2 > vmax
			{in: 1, pos: 0.8, dt: dt, want: 0.4, clamp: LimitSoftPosition, clamped: true}, // 2·(1−0.8)
			{in: 1, pos: 1, dt: dt, want: 0, clamp: LimitSoftPosition, clamped: true},
			{in: 0, pos: 1.2, dt: dt, want: -0.4, clamp: LimitSoftPosition, clamped: true}, // pushed back
			{in: -1, pos: 1.2, dt: dt, want: -1},                                           // moving away is free
			{in: 0, pos: 3, dt: dt, want: -1, clamp: LimitSoftPosition, clamped: true},     // far out: velocity bound wins
			{in: -1, pos: -0.9, dt: dt, want: -0.2, clamp: LimitSoftPosition, clamped: true},
		}},
		{"delta per tick", with(func(c *LimitsConfig) { c.MaxDelta = []float64{0.3} }), []step{
			{in: 1, dt: dt, want: 0.3, clamp: LimitDelta, clamped: true},
			{in: 1, dt: 10 * time.Second, want: 0.6, clamp: LimitDelta, clamped: true},
			{in: 0.5, dt: dt, want: 0.5},
			{in: -1, dt: dt, want: 0.2, clamp: LimitDelta, clamped: true},
		}},
		{"acceleration", with(func(c *LimitsConfig) { c.MaxAcceleration = []float64{2} }), []step{
			{in: 1, dt: dt, want: 0.2, clamp: LimitAcceleration, clamped: true},
			{in: 1, dt: 200 * time.Millisecond, want: 0.6, clamp: LimitAcceleration, clamped: true},
			{in: 1, dt: 0, want: 0.6, clamp: LimitAcceleration, clamped: true}, // no time, no change
			{in: 0.7, dt: dt, want: 0.7},
		}},
		{"jerk", with(func(c *LimitsConfig) {
			c.MaxAcceleration = []float64{10}
			c.MaxJerk = []float64{20}
		}), []step{
			{in: 1, dt: dt, want: 0.2, clamp: LimitJerk, clamped: true},  // a 0→2 allowed (j·dt² = 0.2)
			{in: 1, dt: dt, want: 0.6, clamp: LimitJerk, clamped: true},  // a 2→4
			{in: 0.6, dt: dt, want: 0.6},                                 // would need to keep accelerating: never beyond the proposal
			{in: -1, dt: dt, want: 0.4, clamp: LimitJerk, clamped: true}, // a 0→−2 allowed
		}},
		{"soft limit beats acceleration", with(func(c *LimitsConfig) {
			c.SoftLower, c.SoftUpper, c.KPosition = []float64{-1}, []float64{1}, []float64{10}
			c.MaxAcceleration = []float64{1}
		}), []step{
			{in: 0.1, pos: 0, dt: dt, want: 0.1},
			{in: 0.2, pos: 0.99, dt: dt, want: 0.1, clamp: LimitSoftPosition, clamped: true}, // 10·0.01 = 0.1 within accel
			{in: 0.2, pos: 1.0, dt: dt, want: 0, clamp: LimitSoftPosition, clamped: true},    // needs −1/s·0.1 = accel ok
		}},
		{"gripper", with(func(c *LimitsConfig) { c.Gripper = GripperLimits{Min: 0, Max: 0.8, MaxDelta: 0.5} }), []step{
			{in: 0, grip: 1, dt: dt, wantG: 0.8, clamp: LimitGripper, clamped: true},
			{in: 0, grip: -1, dt: dt, wantG: 0.3, clamp: LimitGripper, clamped: true},
			{in: 0, grip: 0.1, dt: dt, wantG: 0.1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(tc.cfg)
			out := make([]float64, 1)
			for i, s := range tc.steps {
				var c Clamps
				g := l.apply(out, []float64{s.in}, s.grip, []float64{s.pos}, s.dt, &c)
				if math.Abs(out[0]-s.want) > 1e-12 || math.Abs(g-s.wantG) > 1e-12 {
					t.Fatalf("step %d: v=%v g=%v, want v=%v g=%v", i, out[0], g, s.want, s.wantG)
				}
				if s.clamped && (c[s.clamp] != 1 || c.Total() != 1) {
					t.Fatalf("step %d: clamps %v, want one %v", i, c, s.clamp)
				}
				if !s.clamped && c.Total() != 0 {
					t.Fatalf("step %d: unexpected clamps %v", i, c)
				}
			}
		})
	}
}
