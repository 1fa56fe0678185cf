package calibrate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/eval"
)

// readTraces reads recorded level-0 traces for sim calibrate --traces:
// each comma-separated FILE is a `sim eval --scores` file, FILE's --json
// summary (FILE less its final "l": x.jsonl → x.json) beside it says what
// was driven. Each episode's trace is the score of every RUNNING tick after
// the one that armed the gate, NaN without a fresh score, as sim calibrate
// records it while driving. Faulted or shifted episodes, or a control rate
// other than rate, are refused. ok says, per trace, whether its episode
// succeeded (the summary's results, in episode order).
func readTraces(list, score string, rate float64) ([][]float64, []bool, provenance, error) {
	var (
		traces [][]float64
		ok     []bool
		p      = provenance{seeds: [2]int{math.MaxInt, math.MinInt}}
		tasks  []string
		first  = true
	)
	for _, path := range strings.Split(list, ",") {
		path = strings.TrimSpace(path)
		sumPath := strings.TrimSuffix(path, "l")
		if sumPath == path || !strings.HasSuffix(sumPath, ".json") {
			return nil, nil, p, harness.Usagef("--traces %s: expected a .jsonl per-tick scores file (sim eval --scores) with its .json summary beside it", path)
		}
		var sum eval.Summary
		raw, err := os.ReadFile(sumPath)
		if err == nil {
			err = json.Unmarshal(raw, &sum)
		}
		if err != nil {
			return nil, nil, p, fmt.Errorf("--traces %s: its summary %s: %w", path, sumPath, err)
		}
		switch {
		case sum.Level != "0":
			return nil, nil, p, harness.Usagef("--traces %s: level %s, calibration needs level-0 (in-distribution) episodes", path, sum.Level)
		case sum.RateHz != 0 && sum.RateHz != rate:
			return nil, nil, p, harness.Usagef("--traces %s: recorded at %g Hz, not --rate %g", path, sum.RateHz, rate)
		}
		for _, r := range sum.Results {
			if r.Fault != "" {
				return nil, nil, p, harness.Usagef("--traces %s: episode %d has the fault %s, calibration needs episodes without faults", path, r.Episode, r.Fault)
			}
		}
		eps, err := readScoreLines(path, score)
		if err != nil {
			return nil, nil, p, err
		}
		if len(eps) != sum.Episodes {
			return nil, nil, p, fmt.Errorf("--traces %s: %d episodes of scores, its summary says %d", path, len(eps), sum.Episodes)
		}
		traces = append(traces, eps...)
		for i := range eps {
			ok = append(ok, i < len(sum.Results) && sum.Results[i].Success)
		}
		if !slices.Contains(tasks, sum.Task) {
			tasks = append(tasks, sum.Task)
		}
		if first {
			p.steps, p.maxSteps, first = sum.Steps, sum.MaxSteps, false
		}
		if sum.Steps != p.steps {
			p.steps = 0
		}
		if sum.MaxSteps != p.maxSteps {
			p.maxSteps = 0
		}
		for _, r := range sum.Results {
			p.seeds[0], p.seeds[1] = min(p.seeds[0], r.Seed), max(p.seeds[1], r.Seed)
		}
	}
	p.task = strings.Join(tasks, ",")
	return traces, ok, p, nil
}

// readScoreLines is the per-episode traces of score in a sim eval --scores
// file, in episode order (see readTraces).
func readScoreLines(path, score string) ([][]float64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--traces: %w", err)
	}
	defer fh.Close()
	var (
		out        [][]float64
		cur        = -1
		wasRunning bool
	)
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("--traces %s:%d: %w", path, n, err)
		}
		ep, ok := l["episode"].(float64)
		st, ok2 := l["state"].(string)
		x, has := l[score]
		if !ok || !ok2 || !has {
			return nil, fmt.Errorf("--traces %s:%d: want a sim eval --scores line with episode, state and %s", path, n, score)
		}
		if int(ep) != cur {
			cur, wasRunning = int(ep), false
			out = append(out, nil)
		}
		v := math.NaN()
		if f, ok := x.(float64); ok {
			v = f
		}
		running := st == safety.Running.String()
		if running && wasRunning {
			out[len(out)-1] = append(out[len(out)-1], v)
		}
		wasRunning = running
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--traces %s: %w", path, err)
	}
	return out, nil
}

// freshScores counts the fresh scores of a per-tick trace (its finite
// entries; NaN: a running tick without one).
func freshScores(trace []float64) int {
	n := 0
	for _, x := range trace {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}
