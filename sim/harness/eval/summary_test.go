package eval

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/energyflow/edge/sim/harness"
)

func TestSummarize(t *testing.T) {
	step := func(n int) *int { return &n }
	f := harness.Flags{Task: "button-press", Level: "0", Steps: 20}
	tests := []struct {
		name                       string
		results                    []Result
		meanTo, medianTo, p50, p90 any // nil or float64
		text                       []string
	}{
		{"successes only count for steps to success", []Result{
			{Success: true, SuccessStep: step(40), Steps: 45, inferMs: []float64{10, 20}},
			{Success: true, SuccessStep: step(100), Steps: 104, inferMs: []float64{30}},
			{Success: true, SuccessStep: step(70), Steps: 71, inferMs: []float64{40}},
			{Success: false, Steps: 500, inferMs: []float64{50}},
		}, 70.0, 70.0, 30.0, 50.0, []string{"success 3/4", "steps to success mean 70.0 median 70", "inference p50 30.0 ms p90 50.0 ms"}},
		{"even count: median between the middle two", []Result{
			{Success: true, SuccessStep: step(10), inferMs: []float64{5}},
			{Success: true, SuccessStep: step(30), inferMs: []float64{5}},
		}, 20.0, 20.0, 5.0, 5.0, []string{"mean 20.0 median 20"}},
		{"no success, no inference: null", []Result{{Steps: 500}}, nil, nil, nil, nil,
			[]string{"steps to success: no success", "inference p50: none"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(f, tc.results, map[string]int{})
			for _, c := range []struct {
				name string
				got  *float64
				want any
			}{{"mean_steps_to_success", s.MeanToSuccess, tc.meanTo}, {"median_steps_to_success", s.MedianToSuccess, tc.medianTo},
				{"inference_p50_ms", s.InferP50, tc.p50}, {"inference_p90_ms", s.InferP90, tc.p90}} {
				switch {
				case c.want == nil && c.got != nil:
					t.Errorf("%s = %v, want null", c.name, *c.got)
				case c.want != nil && (c.got == nil || *c.got != c.want.(float64)):
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
			for _, w := range tc.text {
				if !strings.Contains(s.String(), w) {
					t.Errorf("summary line lacks %q: %s", w, s.String())
				}
			}
			data, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"mean_steps_to_success", "median_steps_to_success", "inference_p50_ms", "inference_p90_ms"} {
				if !bytes.Contains(data, []byte(`"`+key+`":`)) {
					t.Errorf("JSON lacks %s: %s", key, data)
				}
			}
		})
	}
}
