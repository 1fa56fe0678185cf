package engines_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
)

func TestLoadBundleValid(t *testing.T) {
	b := loadQuad(t)
	m := b.Manifest
	if m.ActionDim != quadDa || m.PredHorizon != quadTp || m.CondDim != quadCond || len(m.ReferenceActions) != quadM {
		t.Fatalf("parsed shapes wrong: %+v", m)
	}
	if m.Schedule.SigmaMax != 10 || m.Sampler.Steps != 20 || m.Calibration != nil {
		t.Fatalf("parsed schedule/sampler wrong: %+v %+v", m.Schedule, m.Sampler)
	}
	spec, err := b.GraphSpec(engines.GraphEnergyGrad, 4)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Inputs[0].Name != "a_t" || spec.Inputs[2].Name != "t" || spec.Outputs[1].Name != "energy" || spec.MaxBatch != 4 {
		t.Fatalf("GraphSpec = %+v", spec)
	}
}

func TestLoadBundleRefuses(t *testing.T) {
	set := func(path string, v any) func(m map[string]any) {
		return func(m map[string]any) {
			keys := strings.Split(path, ".")
			cur := m
			for _, k := range keys[:len(keys)-1] {
				cur = cur[k].(map[string]any)
			}
			if v == nil {
				delete(cur, keys[len(keys)-1])
			} else {
				cur[keys[len(keys)-1]] = v
			}
		}
	}
	tests := []struct {
		name   string
		files  func(map[string][]byte)
		mutate func(map[string]any)
		want   []string // substrings of the error
	}{
		{"future format", nil, set("format_version", 2), []string{"manifest.json", `"format_version"`, "expected 1"}},
		{"missing field", nil, set("schedule", nil), []string{`"schedule"`, "missing"}},
		{"wrong type", nil, set("action_dim", "three"), []string{"action_dim", "expected int"}},
		{"policy", nil, set("policy", "ppo"), []string{`"policy"`, `expected "energyflow" or "diffusion"`}},
		{"diffusion fields on an energyflow graph", nil, set("policy", "diffusion"), []string{`"schedule.kind"`, `"sampler.kind"`, `"graphs"`, `no "eps" entry`, `"graphs.energy_grad"`}},
		{"sampler kind", nil, set("sampler.kind", "ddim"), []string{`"sampler.kind"`, "absent (Euler"}},
		{"std zero", nil, set("action_norm.std", []float64{1, 0, 1}), []string{`"action_norm.std[1]"`, "> 0"}},
		{"norm length", nil, set("action_norm.mean", []float64{1, 2}), []string{`"action_norm.mean"`, "expected 3"}},
		{"cond_dim", nil, set("cond_dim", 5), []string{`"cond_dim"`, "expected 4"}},
		{"cond item", nil, set("conditioning.items", []any{map[string]any{"obs": "camera", "width": 2}}), []string{`"conditioning.items[0].obs"`, "camera"}},
		{"cond width", nil, set("conditioning.items", []any{map[string]any{"obs": "state", "width": 3}}), []string{`"conditioning.items[0].width"`, "expected 2"}},
		{"layout", nil, set("conditioning.layout", "stacked"), []string{`"conditioning.layout"`, "history_flat"}},
		{"schedule", nil, set("schedule.sigma_max", 0.001), []string{`"schedule.sigma_max"`, "sigma_min"}},
		{"gamma", nil, set("schedule.gamma", 1.5), []string{`"schedule.gamma"`}},
		{"steps", nil, set("sampler.steps", 0), []string{`"sampler.steps"`}},
		{"warm start sigma", nil, set("sampler.warm_start", map[string]any{"sigma": 50, "steps": 5}), []string{`"sampler.warm_start"`, "outside the schedule"}},
		{"warm start steps", nil, set("sampler.warm_start", map[string]any{"sigma": 1, "steps": 0}), []string{`"sampler.warm_start"`, "at least 1"}},
		{"warm start past K", nil, set("sampler.warm_start", map[string]any{"sigma": 1, "steps": 21}), []string{`"sampler.warm_start.steps"`, "at most sampler.steps (20)"}},
		{"warm start rate", nil, set("sampler.warm_start", map[string]any{"sigma": 1, "steps": 5, "rate_hz": -20}), []string{`"sampler.warm_start.rate_hz"`, "Hz > 0"}},
		{"refs shape", nil, func(m map[string]any) {
			m["reference_actions"].([]any)[3] = []any{[]float64{1, 2, 3}}
		}, []string{`"reference_actions[3]"`, "expected pred_horizon = 4"}},
		{"graph shape", nil, func(m map[string]any) {
			g := m["graphs"].(map[string]any)["energy_grad"].(map[string]any)
			g["inputs"].([]any)[1] = map[string]any{"name": "cond", "shape": []int{-1, 7}}
		}, []string{`"graphs.energy_grad.inputs[1].shape"`, "[-1 4]"}},
		{"graph input missing", nil, func(m map[string]any) {
			g := m["graphs"].(map[string]any)["energy_grad"].(map[string]any)
			g["inputs"] = g["inputs"].([]any)[:2]
		}, []string{`"graphs.energy_grad.inputs"`, `"t"`}},
		{"no energy graph", nil, set("graphs", map[string]any{}), []string{`"graphs"`, "energy_grad"}},
		{"graph file unlisted", nil, set("files", map[string]any{}), []string{`"graphs.energy_grad.file"`, "not listed"}},
		{"bad hash format", nil, func(m map[string]any) { m["files"].(map[string]any)["energy_grad.onnx"] = "XYZ" }, []string{`"files.energy_grad.onnx"`, "sha256"}},
		{"unclean path", nil, func(m map[string]any) { m["files"].(map[string]any)["../x"] = strings.Repeat("0", 64) }, []string{"clean relative path"}},
		{"calibration score", nil, set("calibration", map[string]any{"recommended": map[string]any{"score": "vibes", "threshold": 1}}), []string{`"calibration.recommended.score"`}},
		{"closed loop", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) {
			cl["score"], cl["alpha"] = "vibes", 1.5
			cl["rule"] = map[string]any{"kind": "cusum", "n": 6, "m": 5}
			cl["bands"] = []any{
				map[string]any{"from": 3, "mean": 1, "std": 1, "threshold": 2},
				map[string]any{"from": 3, "mean": 1, "std": 0, "threshold": 2},
				map[string]any{"from": 2, "mean": 1, "std": -1, "threshold": 2},
			}
		})), []string{`"calibration.closed_loop.score"`, `"calibration.closed_loop.alpha"`, `"calibration.closed_loop.rule.kind"`, `"calibration.closed_loop.rule.n"`,
			`"calibration.closed_loop.bands[0].from"`, `"calibration.closed_loop.bands[1].from"`, `"calibration.closed_loop.bands[1].std"`,
			`"calibration.closed_loop.bands[2].from"`, `"calibration.closed_loop.bands[2].std"`}},
		{"closed loop without bands", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) { cl["bands"] = []any{} })),
			[]string{`"calibration.closed_loop.bands"`, "empty"}},
		{"closed loop band unit", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) { cl["band_unit"] = "seconds" })),
			[]string{`"calibration.closed_loop.band_unit"`, `got "seconds", expected "ticks"`, `"fresh_scores"`}},
		{"closed loop ceiling", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) { cl["ceiling"] = map[string]any{"alpha": 0, "q": -1} })),
			[]string{`"calibration.closed_loop.ceiling.alpha"`, `"calibration.closed_loop.ceiling.q"`, "below the rule's q"}},
		{"closed loop plan latency out of order", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) {
			cl["plan_latency"] = map[string]any{"p50_ms": 90, "p90_ms": 60, "plans": 10, "episodes": 2, "measured": "calibration"}
		})), []string{`"calibration.closed_loop.plan_latency"`, "p50_ms 90, p90_ms 60: expected 0 < p50 <= p90"}},
		{"closed loop plan latency of no plan", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) {
			cl["plan_latency"] = map[string]any{"p50_ms": 50, "p90_ms": 60, "plans": 0, "episodes": 2, "measured": "calibration"}
		})), []string{`"calibration.closed_loop.plan_latency"`, "0 plans over 2 episodes"}},
		{"closed loop plan latency of unknown origin", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) {
			cl["plan_latency"] = map[string]any{"p50_ms": 50, "p90_ms": 60, "plans": 10, "episodes": 2, "measured": "guessed"}
		})), []string{`"calibration.closed_loop.plan_latency.measured"`, `got "guessed", expected "calibration" or "afterwards"`}},
		{"closed loop window", nil, set("calibration", closedLoopCalibration(func(cl map[string]any) { cl["rule"] = map[string]any{"kind": "n_of_m", "n": 3, "m": 65} })),
			[]string{`"calibration.closed_loop.rule.m"`, "1..64"}},
		{"closed loop others without closed_loop", nil, set("calibration", withOthers(func(c map[string]any) { delete(c, "closed_loop") }, otherLoop(10, 20))),
			[]string{`"calibration.closed_loop_others"`, "no closed_loop"}},
		{"closed loop others of another score", nil, set("calibration", withOthers(nil, otherLoop(10, 20, func(o map[string]any) { o["score"] = "centered_energy" }))),
			[]string{`"calibration.closed_loop_others[0].score"`, `expected closed_loop's "energy"`}},
		{"closed loop others without rate", nil, set("calibration", withOthers(nil, otherLoop(0, 20))),
			[]string{`"calibration.closed_loop_others[0]"`, "expected both set"}},
		{"closed loop others at closed_loop's rate and K", nil, set("calibration", withOthers(nil, otherLoop(10, 20), otherLoop(20, 20))),
			[]string{`"calibration.closed_loop_others[1]"`, "like closed_loop"}},
		{"closed loop others twice at one rate", nil, set("calibration", withOthers(nil, otherLoop(10, 20), otherLoop(10, 20, func(o map[string]any) { o["alpha"] = 2.0 }))),
			[]string{`"calibration.closed_loop_others[1]"`, "like closed_loop_others[0]", `"calibration.closed_loop_others[1].alpha"`}},
		{"hash mismatch", func(f map[string][]byte) {
			b := append([]byte(nil), f["energy_grad.onnx"]...)
			b[len(b)/2] ^= 0xff
			f["energy_grad.onnx"] = b
		}, nil, []string{"energy_grad.onnx", "sha256 is", "files.energy_grad.onnx"}},
		{"missing file", func(f map[string][]byte) { delete(f, "energy_grad.onnx") }, nil, []string{"energy_grad.onnx", "missing"}},
		{"truncated onnx with matching hash", func(f map[string][]byte) {
			f["energy_grad.onnx"] = f["energy_grad.onnx"][:len(f["energy_grad.onnx"])-10]
		}, func(m map[string]any) {
			// the writer hashed the truncated file: only the structure check can catch it
			m["files"] = map[string]any{"energy_grad.onnx": sha256hex(truncatedQuad(10))}
		}, []string{"energy_grad.onnx", "not a valid ONNX model", "truncated"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeQuadBundle(t, tc.files, tc.mutate)
			_, err := engines.LoadBundle(dir)
			if err == nil {
				t.Fatal("LoadBundle accepted a broken bundle")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not mention %q", err, w)
				}
			}
			var fe *engines.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v is not a *FieldError", err)
			}
		})
	}
}

// closedLoopCalibration is a valid calibration block with a closed_loop
// block as energyflow sim calibrate writes it, changed by edit.
func closedLoopCalibration(edit func(cl map[string]any)) map[string]any {
	cl := map[string]any{
		"score": "energy", "alpha": 0.1, "rule": map[string]any{"kind": "n_of_m", "n": 3, "m": 5}, "q": 2.31,
		"bands": []any{
			map[string]any{"from": 0, "mean": 123.4, "std": 10.2, "threshold": 146.962},
			map[string]any{"from": 20, "mean": 110, "std": 8, "threshold": 128.48},
		},
		"task": "button-press", "level": "0", "rate_hz": 20, "steps_k": 20, "max_steps": 500,
		"episodes": 40, "fit_episodes": 20, "conformal_episodes": 20, "seeds": []int{1000, 1039},
	}
	if edit != nil {
		edit(cl)
	}
	return map[string]any{"n_windows": 512, "seed": 0, "steps": 20,
		"scores":      map[string]any{"energy": map[string]any{"mean": 100, "std": 20, "quantiles": map[string]any{"99.9": 160}}},
		"recommended": map[string]any{"score": "energy", "threshold": 160, "rule": "q99.9"},
		"closed_loop": cl}
}

// otherLoop is closedLoopCalibration's closed_loop at rateHz and k, changed
// by edits: an entry of closed_loop_others.
func otherLoop(rateHz float64, k int, edits ...func(o map[string]any)) map[string]any {
	o := closedLoopCalibration(nil)["closed_loop"].(map[string]any)
	o["rate_hz"], o["steps_k"] = rateHz, k
	for _, e := range edits {
		e(o)
	}
	return o
}

// withOthers is closedLoopCalibration (20 Hz, K=20) with others as its
// closed_loop_others, changed by edit.
func withOthers(edit func(c map[string]any), others ...map[string]any) map[string]any {
	c := closedLoopCalibration(nil)
	c["closed_loop_others"] = others
	if edit != nil {
		edit(c)
	}
	return c
}

func TestLoadBundleClosedLoop(t *testing.T) {
	dir := writeQuadBundle(t, nil, func(m map[string]any) { m["calibration"] = closedLoopCalibration(nil) })
	b, err := engines.LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Manifest.Calibration.ClosedLoop
	want := calibration.ClosedLoop{Score: "energy", Alpha: 0.1, Rule: calibration.Rule{Kind: "n_of_m", N: 3, M: 5}, Q: 2.31,
		Bands: []calibration.Band{{From: 0, Mean: 123.4, Std: 10.2, Threshold: 146.962}, {From: 20, Mean: 110, Std: 8, Threshold: 128.48}},
		Task:  "button-press", Level: "0", RateHz: 20, StepsK: 20, MaxSteps: 500, Episodes: 40, FitEpisodes: 20, ConformalEpisodes: 20, Seeds: [2]int{1000, 1039}}
	if cl == nil || !reflect.DeepEqual(*cl, want) {
		t.Fatalf("closed_loop parsed as %+v, want %+v", cl, want)
	}
	// Without band_unit the bands count fresh scores, as before the key;
	// sim calibrate writes ticks.
	if cl.Unit() != calibration.BandFreshScores {
		t.Fatalf("no band_unit: Unit() %q", cl.Unit())
	}
	for _, u := range []calibration.BandUnit{calibration.BandTicks, calibration.BandFreshScores} {
		dir := writeQuadBundle(t, nil, func(m map[string]any) {
			m["calibration"] = closedLoopCalibration(func(cl map[string]any) { cl["band_unit"] = u })
		})
		b, err := engines.LoadBundle(dir)
		if err != nil || b.Manifest.Calibration.ClosedLoop.BandUnit != u || b.Manifest.Calibration.ClosedLoop.Unit() != u {
			t.Fatalf("band_unit %q: %v", u, err)
		}
	}
	// plan_latency parses, and gives the p90 in the calibration's periods.
	dir = writeQuadBundle(t, nil, func(m map[string]any) {
		m["calibration"] = closedLoopCalibration(func(cl map[string]any) {
			cl["plan_latency"] = map[string]any{"p50_ms": 40, "p90_ms": 60, "plans": 300, "episodes": 40, "seeds": []int{1000, 1039}, "measured": "afterwards"}
		})
	})
	if b, err = engines.LoadBundle(dir); err != nil {
		t.Fatal(err)
	}
	pl := b.Manifest.Calibration.ClosedLoop.PlanLatency
	if want := (calibration.PlanLatency{P50Ms: 40, P90Ms: 60, Plans: 300, Episodes: 40, Seeds: [2]int{1000, 1039}, Measured: calibration.PlanLatencyAfterwards}); pl == nil || *pl != want {
		t.Fatalf("plan_latency parsed as %+v", pl)
	}
	if p := b.Manifest.Calibration.ClosedLoop.P90Periods(); math.Abs(p-1.2) > 1e-12 { // 60 ms at 20 Hz
		t.Fatalf("P90Periods() = %v, want 1.2", p)
	}
	// A calibration without closed_loop parses as before.
	dir = writeQuadBundle(t, nil, func(m map[string]any) {
		c := closedLoopCalibration(nil)
		delete(c, "closed_loop")
		m["calibration"] = c
	})
	if b, err = engines.LoadBundle(dir); err != nil || b.Manifest.Calibration.ClosedLoop != nil || b.Manifest.Calibration.Recommended.Threshold != 160 {
		t.Fatalf("calibration without closed_loop: %v", err)
	}
	// A bundle calibrated only in closed loop (sim calibrate on a bundle
	// without held-out windows) has no recommendation, and needs none.
	dir = writeQuadBundle(t, nil, func(m map[string]any) {
		m["calibration"] = map[string]any{"closed_loop": closedLoopCalibration(nil)["closed_loop"]}
	})
	if b, err = engines.LoadBundle(dir); err != nil || b.Manifest.Calibration.ClosedLoop == nil {
		t.Fatalf("closed-loop-only calibration: %v", err)
	}
	// Calibrations at other rates and K load beside it, and ClosedLoopFor
	// picks the one for a loop.
	dir = writeQuadBundle(t, nil, func(m map[string]any) {
		m["calibration"] = withOthers(nil, otherLoop(10, 20), otherLoop(20, 10))
	})
	if b, err = engines.LoadBundle(dir); err != nil || len(b.Manifest.Calibration.ClosedLoopOthers) != 2 {
		t.Fatalf("closed_loop_others: %v", err)
	}
	for _, tc := range []struct {
		rate  float64
		k     int
		want  *calibration.ClosedLoop
		match bool
	}{
		{20, 20, b.Manifest.Calibration.ClosedLoop, true},
		{10, 20, b.Manifest.Calibration.ClosedLoopOthers[0], true},
		{20, 10, b.Manifest.Calibration.ClosedLoopOthers[1], true},
		{10, 10, b.Manifest.Calibration.ClosedLoop, false},
	} {
		if got, ok := b.Manifest.Calibration.ClosedLoopFor(tc.rate, tc.k); got != tc.want || ok != tc.match {
			t.Errorf("ClosedLoopFor(%g Hz, K=%d) = %p, %v; want %p, %v", tc.rate, tc.k, got, ok, tc.want, tc.match)
		}
	}
}

func TestLoadBundleCollectsEveryProblem(t *testing.T) {
	dir := writeQuadBundle(t, nil, func(m map[string]any) {
		m["cond_dim"] = 9
		m["sampler"] = map[string]any{"steps": -1}
	})
	_, err := engines.LoadBundle(dir)
	if err == nil || !strings.Contains(err.Error(), "cond_dim") || !strings.Contains(err.Error(), "sampler.steps") {
		t.Fatalf("want both problems, got %v", err)
	}
}

func TestLoadBundleNotABundle(t *testing.T) {
	_, err := engines.LoadBundle(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no manifest.json") {
		t.Fatalf("got %v", err)
	}
}
