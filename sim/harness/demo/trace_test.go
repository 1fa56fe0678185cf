package demo

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/eval"
)

// TestTracer writes the demo's episodes as sim calibrate --traces reads
// them: one group of lines per episode with a tick, in order, and a
// summary beside the file whose results match the groups one for one.
func TestTracer(t *testing.T) {
	step := 41
	cases := []struct {
		name      string
		episodes  []harness.Episode // each begun, given ticks, then ended by the next (the last interrupted)
		ticks     []int
		wantLevel string
		wantEnds  []string
	}{
		{
			name: "back to back",
			episodes: []harness.Episode{
				{Seed: 5000, Level: "0", Step: 45, Success: true, SuccessStep: &step, Done: true},
				{Seed: 5001, Level: "0", Step: 500, Done: true},
				{Seed: 5002, Level: "0", Step: 12},
			},
			ticks: []int{4, 3, 2}, wantLevel: "0", wantEnds: []string{"success", "truncated", "interrupted"},
		},
		{
			name: "a scene replaced before its first tick is left out",
			episodes: []harness.Episode{
				{Seed: 7, Level: "0", Step: 3},
				{Seed: 8, Level: "0", Step: 0, Success: true, SuccessStep: &step, Done: true},
				{Seed: 9, Level: "0", Step: 20, Success: true, SuccessStep: &step, Done: true},
			},
			ticks: []int{2, 0, 3}, wantLevel: "0", wantEnds: []string{"interrupted", "interrupted"},
		},
		{
			name: "levels mixed by the page",
			episodes: []harness.Episode{
				{Seed: 1, Level: "0", Step: 3},
				{Seed: 2, Level: "L", Step: 3},
			},
			ticks: []int{1, 1}, wantLevel: "mixed", wantEnds: []string{"interrupted", "interrupted"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "demo.jsonl")
			tr, err := newTracer(path, true)
			if err != nil {
				t.Fatal(err)
			}
			n := int64(0)
			for i, ep := range tc.episodes {
				if i > 0 {
					tr.end(tc.episodes[i-1])
				}
				tr.begin(ep)
				for k := 0; k < tc.ticks[i]; k++ {
					n++
					tr.onTick(runtime.Tick{N: n}, &safety.Decision{State: safety.Running},
						safety.Scores{safety.ScoreEnergy: 1, safety.ScoreCentered: math.NaN(), safety.ScoreStateEnergy: float64(k)})
				}
			}
			f := harness.Flags{Task: "button-press", Level: "0", Rate: 10}
			if err := tr.close(f, true); err != nil {
				t.Fatal(err)
			}
			var groups []int // the episode number of each run of lines
			var seeds []int
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				var l struct {
					Episode     int      `json:"episode"`
					Seed        int      `json:"seed"`
					State       string   `json:"state"`
					StateEnergy *float64 `json:"state_energy"`
					Centered    *float64 `json:"centered_energy"`
				}
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatal(err)
				}
				if l.StateEnergy == nil || l.Centered != nil || l.State != "RUNNING" {
					t.Fatalf("line %s: want state RUNNING, a state_energy and a null centered_energy", sc.Text())
				}
				if len(groups) == 0 || groups[len(groups)-1] != l.Episode {
					groups, seeds = append(groups, l.Episode), append(seeds, l.Seed)
				}
			}
			raw, err := os.ReadFile(strings.TrimSuffix(path, "l"))
			if err != nil {
				t.Fatal(err)
			}
			var s eval.Summary
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			if s.Episodes != len(groups) || len(s.Results) != len(groups) {
				t.Fatalf("summary: %d episodes, %d results; the lines hold %d episodes", s.Episodes, len(s.Results), len(groups))
			}
			if s.Level != tc.wantLevel || !s.ObserveOnly || s.RateHz != 10 || s.Task != "button-press" {
				t.Errorf("summary: level %q observe_only %v rate %g task %q; want level %q, observing, 10 Hz, button-press", s.Level, s.ObserveOnly, s.RateHz, s.Task, tc.wantLevel)
			}
			for i, r := range s.Results {
				if r.Episode != groups[i] || r.Seed != seeds[i] || r.End != tc.wantEnds[i] {
					t.Errorf("result %d: episode %d seed %d end %s; the lines say episode %d seed %d, want end %s", i, r.Episode, r.Seed, r.End, groups[i], seeds[i], tc.wantEnds[i])
				}
			}
		})
	}
}

// TestTracerRefusesAPath: the summary goes beside the scores file, so it
// must be a .jsonl.
func TestTracerRefusesAPath(t *testing.T) {
	_, err := newTracer(filepath.Join(t.TempDir(), "scores.json"), false)
	if err == nil || !strings.Contains(err.Error(), "must end in .jsonl") {
		t.Fatalf("err = %v, want the .jsonl refusal", err)
	}
}
