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
			s := Summarize(f, tc.results)
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

// The join measures: medians over the episodes that measured them, and
// their ratio; the chunking mode and strength as run.
func TestSummarizeJoins(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	f := harness.Flags{Task: "assembly", Level: "0", Chunking: "denoised", ChunkingStrength: 1}
	rs := []Result{
		{JoinMax: v(0.4), JoinInside: v(0.02), SwitchMax: v(0.1), SwitchMedian: v(0.01)},
		{JoinMax: v(0.2), JoinInside: v(0.04), SwitchMax: v(0.3), SwitchMedian: v(0.03)},
		{JoinMax: v(0.3), JoinInside: v(0.03), SwitchMax: v(0.2), SwitchMedian: v(0.02)},
		{}, // measured nothing: left out
	}
	s := Summarize(f, rs)
	if *s.JoinMax != 0.3 || *s.JoinInside != 0.03 || *s.JoinRatio != 0.3/0.03 || *s.SwitchMax != 0.2 || *s.SwitchMedian != 0.02 {
		t.Errorf("joins %v %v %v, switches %v %v", *s.JoinMax, *s.JoinInside, *s.JoinRatio, *s.SwitchMax, *s.SwitchMedian)
	}
	if s.Chunking != "denoised" || s.ChunkingStrength != 1 || !strings.Contains(s.String(), "chunk joins 0.300 vs 0.030 inside (×10.00), plan switch max 0.200 median 0.020") {
		t.Errorf("chunking %q strength %v; line %s", s.Chunking, s.ChunkingStrength, s.String())
	}
	if off := Summarize(harness.Flags{}, nil); off.Chunking != "off" || off.JoinRatio != nil {
		t.Errorf("no episodes: chunking %q ratio %v", off.Chunking, off.JoinRatio)
	}
}

// Options.Summarize says how the episodes were driven: the added delay,
// observe-only and the step limit, in the JSON every tool writes (sim
// calibrate's --json summary had left the delay out).
func TestOptionsSummarizeSaysHowEpisodesWereDriven(t *testing.T) {
	o := Options{Flags: harness.Flags{Task: "bin-picking", Level: "0", Rate: 20}, MaxSteps: 300, Delay: 3, ObserveOnly: true}
	data, err := json.Marshal(o.Summarize([]Result{{Success: true, Steps: 90}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"delay_periods":3`, `"observe_only":true`, `"max_steps":300`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("summary JSON lacks %s: %s", want, data)
		}
	}
}

// Summarize counts the stops by kind from the episodes themselves, so that
// every summary written (sim eval's, sim calibrate's, the demo trace's)
// carries them; sim calibrate's had written "trips": {} beside episodes
// that ended in a stop.
func TestSummarizeCountsStopsByKind(t *testing.T) {
	rs := []Result{
		{End: "safety_stop", StopKind: "tracking"},
		{Success: true, End: "success"},
		{End: "safety_stop", StopKind: "energy", StopScore: "state_energy"},
		{End: "safety_stop", StopKind: "tracking"},
		{End: "truncated"},
	}
	s := Summarize(harness.Flags{Task: "bin-picking"}, rs)
	if len(s.Trips) != 2 || s.Trips["tracking"] != 2 || s.Trips["energy"] != 1 {
		t.Errorf("trips %v, want tracking 2 and energy 1", s.Trips)
	}
	if !strings.Contains(s.String(), "safety stops: energy=1 tracking=2") {
		t.Errorf("summary line: %s", s.String())
	}
	if none := Summarize(harness.Flags{}, []Result{{Success: true}}); none.Trips == nil || len(none.Trips) != 0 {
		t.Errorf("no stop: trips %v, want {} (written as an empty object)", none.Trips)
	}
}
