package safety

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	cases := []struct {
		name  string
		rule  rule
		xs    []float64
		alarm []bool
	}{
		{"2of3 single spike tolerated", newNOfM(10, 2, 3),
			[]float64{1, 50, 1, 1, 50, 1, 1},
			[]bool{false, false, false, false, false, false, false}},
		{"2of3 sustained trips on second", newNOfM(10, 2, 3),
			[]float64{1, 11, 11, 11},
			[]bool{false, false, true, true}},
		{"2of3 spaced pair within window", newNOfM(10, 2, 3),
			[]float64{11, 1, 11, 1, 1, 1},
			[]bool{false, false, true, false, false, false}},
		{"equal to threshold is not over", newNOfM(10, 1, 1),
			[]float64{10, 10.0001},
			[]bool{false, true}},
		{"3of5", newNOfM(10, 3, 5),
			[]float64{11, 1, 11, 1, 1, 11, 11},
			[]bool{false, false, false, false, false, false, true}},
		{"m=64 window", newNOfM(0, 64, 64),
			repeat(1, 64),
			append(repeat2(false, 63), true)},
		{"cusum big spike trips at once", newCUSUM(10, 1, 0, 2),
			[]float64{1, 12.5},
			[]bool{false, true}},
		{"cusum small spike accumulates", newCUSUM(10, 1, 0, 2),
			[]float64{10.8, 10.8, 10.8},
			[]bool{false, false, true}},
		{"cusum decays below threshold", newCUSUM(10, 1, 0, 2),
			[]float64{11.5, 8, 11.5, 8, 11.5},
			[]bool{false, false, false, false, false}},
		{"cusum drift", newCUSUM(10, 2, 0.5, 1),
			[]float64{12, 12, 12, 12},
			[]bool{false, false, true, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, x := range tc.xs {
				if got := tc.rule.observe(x); got != tc.alarm[i] || tc.rule.alarmed() != got {
					t.Fatalf("sample %d (%v): alarm %v, want %v", i, x, got, tc.alarm[i])
				}
			}
			tc.rule.reset()
			if tc.rule.alarmed() {
				t.Fatal("alarm after reset")
			}
		})
	}
}

func repeat(x float64, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = x
	}
	return s
}

func repeat2(b bool, n int) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = b
	}
	return s
}

func TestReplay(t *testing.T) {
	trace := []float64{1, 11, math.NaN(), 11, 1, 1, 11, 11, 11, 1}
	trips, err := Replay(RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: 2, M: 3}}, Threshold{Score: ScoreEnergy, Value: 10}, trace)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(trips, []int{3, 7}) { // NaN skipped; the rule restarts after a trip
		t.Fatalf("trips %v", trips)
	}
	trips, err = Replay(RuleConfig{Kind: RuleCUSUM, CUSUM: CUSUMConfig{Limit: 2}}, Threshold{Score: ScoreEnergy, Value: 10, Scale: 1}, []float64{13, 1, 11, 11, 11})
	if err != nil || !slices.Equal(trips, []int{0, 4}) {
		t.Fatalf("cusum trips %v, %v", trips, err)
	}
	if _, err := Replay(RuleConfig{Kind: RuleCUSUM}, Threshold{Value: 10}, nil); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Fatalf("bad rule accepted: %v", err)
	}
}
