package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

func TestNewPredictorRefusesWhatDoesNotFit(t *testing.T) {
	const period = 50 * time.Millisecond
	tr := safety.TrackingConfig{Per: safety.TrackingPerTick, Scale: []float64{0.01, 0.01, 0.01}}
	cases := []struct {
		name string
		c    PredictConfig
		tr   safety.TrackingConfig
		want string // "" : accepted
	}{
		{"off", PredictConfig{}, tr, ""},
		{"the Meta-World layout", PredictConfig{Position: []int{0, 1, 2}, Also: []int{18, 19, 20}, Carried: []int{4, 5, 6, 22, 23, 24}, CarryRadius: 0.04}, tr, ""},
		{"an axis short", PredictConfig{Position: []int{0, 1}}, tr, "position has 2 entries: want one per commanded velocity axis (3)"},
		{"also not in groups", PredictConfig{Position: []int{0, 1, 2}, Also: []int{18}}, tr, "also has 1 entries: want groups of 3"},
		{"carried without a radius", PredictConfig{Position: []int{0, 1, 2}, Carried: []int{4, 5, 6}}, tr, "carry_radius 0: want groups of 3 entries"},
		{"an entry past the state", PredictConfig{Position: []int{0, 1, 39}}, tr, "entry 39 is outside the bundle's state input (39 entries)"},
		{"a model without the axes", PredictConfig{Position: []int{0, 1, 2}}, safety.TrackingConfig{Scale: []float64{0.01}}, "safety.tracking.scale, which has 1 axes: want 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := newPredictor(c.c, c.tr, period, 39, 3, 4, 16, 2, 1)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			case c.want == "" && (p == nil) != (len(c.c.Position) == 0):
				t.Fatalf("predictor %v for %+v", p, c.c)
			}
		})
	}
}

// apply moves the hand by the committed actions through the model's scale,
// moves a held object with it and leaves a distant one, the gripper and
// the history it was given as they were.
func TestPredictorApply(t *testing.T) {
	const period = 50 * time.Millisecond
	cfg := PredictConfig{Position: []int{0, 1, 2}, Also: []int{7, 8, 9}, Carried: []int{4, 5, 6}, CarryRadius: 0.04}
	rows := []float32{ // two actions: x, y, z velocity and the gripper
		1, 0, -0.5, 0.6,
		1, 0.5, -0.5, 0.6,
	}
	want := [3]float32{0.02, 0.005, -0.01} // (1+1, 0+0.5, −0.5−0.5) × 0.01
	cases := []struct {
		name    string
		per     string
		scale   float64
		object  [3]float32
		carried bool
	}{
		{"held object, per tick", safety.TrackingPerTick, 0.01, [3]float32{0.1, 0.6, 0.165}, true},
		{"object on the table", safety.TrackingPerTick, 0.01, [3]float32{0.1, 0.6, 0.02}, false},
		{"per second: scale × period", safety.TrackingPerSecond, 0.2, [3]float32{0.1, 0.6, 0.02}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := safety.TrackingConfig{Per: c.per, Scale: []float64{c.scale, c.scale, c.scale}}
			p, err := newPredictor(cfg, tr, period, 10, 3, 4, 16, 2, 1)
			if err != nil {
				t.Fatal(err)
			}
			state := func() []float32 {
				v := []float32{0.1, 0.6, 0.2, 0.9, 0, 0, 0, 0.1, 0.6, 0.2}
				copy(v[4:7], c.object[:])
				return v
			}
			h := []engines.ObsFrame{{state()}, {state()}}
			got := p.apply(h, 0, rows, 4)
			for f := range got {
				v, orig := got[f][0], state()
				for i := range 3 {
					near(t, "hand", v[i], orig[i]+want[i])
					near(t, "previous hand", v[7+i], orig[7+i]+want[i])
					moved := float32(0)
					if c.carried {
						moved = want[i]
					}
					near(t, "object", v[4+i], orig[4+i]+moved)
				}
				near(t, "gripper", v[3], orig[3])
				if h[f][0][0] != orig[0] {
					t.Errorf("frame %d: the history given was changed", f)
				}
			}
		})
	}
}

func near(t *testing.T, what string, got, want float32) {
	t.Helper()
	if d := got - want; d > 1e-6 || d < -1e-6 {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}
