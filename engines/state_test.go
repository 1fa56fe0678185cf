package engines_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// quadStateGraph is engines/testdata/quad/state_energy.onnx: state_energy =
// ½‖cond‖² − 1 for any cond width (enginestest.StateEnergy).
func quadStateGraph(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "quad", "state_energy.onnx"))
	if err != nil {
		t.Fatalf("read test graph: %v (regenerate with .venv/bin/python engines/testdata/quad/gen.py)", err)
	}
	return b
}

// stateBlock is a valid "state_energy" manifest block as the toolkit writes
// it, for the graph file state_energy.onnx.
func stateBlock() map[string]any {
	return map[string]any{
		"graph": "state_energy.onnx", "input": "cond", "output": "state_energy", "reading": "max_sigma_z",
		"sigmas": []float64{0.05, 0.3, 3}, "mean": []float64{10.5, 2.25, 0.5}, "std": []float64{3, 1, 0.25},
		"model": map[string]any{"kind": "mlp", "hidden": []int{256, 256}},
		"train": map[string]any{"steps": 4000, "seed": 0},
		"calibration": map[string]any{"mean": 0.4, "std": 0.9,
			"quantiles": map[string]any{"50": 0.2, "90": 1.5, "99": 2.8, "99.9": 3.5}, "max": 4.1, "n": 1200},
		"export_check": map[string]any{"state_energy": 1e-7},
	}
}

// withStateTerm adds the analytic state graph and its block to a bundle
// written by writeBundleDir's callers: the file bytes to files, the block and
// the file's hash to the manifest m.
func withStateTerm(t testing.TB, files map[string][]byte, m map[string]any) {
	g := quadStateGraph(t)
	files["state_energy.onnx"] = g
	m["files"].(map[string]any)["state_energy.onnx"] = sha256hex(g)
	m["state_energy"] = stateBlock()
}

// writeQuadStateBundle is the analytic bundle with the state term; mutate
// may then change the manifest.
func writeQuadStateBundle(t testing.TB, mutate func(m map[string]any)) string {
	t.Helper()
	var files map[string][]byte
	return writeQuadBundle(t, func(f map[string][]byte) { files = f }, func(m map[string]any) {
		withStateTerm(t, files, m)
		if mutate != nil {
			mutate(m)
		}
	})
}

func loadQuadState(t testing.TB) *engines.Bundle {
	t.Helper()
	b, err := engines.LoadBundle(writeQuadStateBundle(t, nil))
	if err != nil {
		t.Fatalf("LoadBundle: %v", err)
	}
	return b
}

func TestLoadBundleStateEnergy(t *testing.T) {
	b := loadQuadState(t)
	m := &b.Manifest
	se := m.StateEnergy
	if !m.HasStateEnergy() || se.Graph != "state_energy.onnx" || se.Reading != engines.ReadingMaxSigmaZ || len(se.Sigmas) != 3 ||
		se.Calibration.Quantiles[engines.StateEnergyQuantile] != 3.5 || se.Calibration.N != 1200 {
		t.Fatalf("state_energy parsed as %+v", se)
	}
	spec, err := b.GraphSpec(engines.GraphStateEnergy, 1)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Path != b.Path("state_energy.onnx") || len(spec.Inputs) != 1 || spec.Inputs[0].Name != "cond" ||
		spec.Inputs[0].Shape[1] != quadCond || len(spec.Outputs) != 1 || spec.Outputs[0].Name != "state_energy" {
		t.Fatalf("GraphSpec = %+v", spec)
	}
	// Without the block the graph does not exist and the bundle loads as before.
	plain := loadQuad(t)
	if plain.Manifest.HasStateEnergy() {
		t.Fatal("a bundle without the block has a state term")
	}
	if _, err := plain.GraphSpec(engines.GraphStateEnergy, 1); err == nil {
		t.Fatal("GraphSpec(state_energy) of a bundle without the block")
	}
}

func TestLoadBundleRefusesStateEnergy(t *testing.T) {
	block := func(edit func(se map[string]any)) func(m map[string]any) {
		return func(m map[string]any) { edit(m["state_energy"].(map[string]any)) }
	}
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   []string
	}{
		{"reading", block(func(se map[string]any) { se["reading"] = "min_sigma" }), []string{`"state_energy.reading"`, `got "min_sigma", expected "max_sigma_z" or "max_z"`}},
		{"components without max_z", block(func(se map[string]any) { se["components"] = []any{"g", "rnd"} }),
			[]string{`"state_energy.components"`, `expected none with reading "max_sigma_z"`}},
		{"max_z without components", block(func(se map[string]any) { se["reading"] = "max_z" }),
			[]string{`"state_energy.components"`, `expected "g" first`}},
		{"max_z unknown component", block(func(se map[string]any) {
			se["reading"], se["components"] = "max_z", []any{"g", "knn"}
		}), []string{`"state_energy.components"`, `expected distinct names from g, transition, rnd`}},
		{"graph not in files", func(m map[string]any) { delete(m["files"].(map[string]any), "state_energy.onnx") },
			[]string{`"state_energy.graph"`, `"state_energy.onnx" is not listed in "files"`}},
		{"graph empty", block(func(se map[string]any) { se["graph"] = "" }), []string{`"state_energy.graph"`, "empty"}},
		{"graph path", block(func(se map[string]any) { se["graph"] = "../g.onnx" }), []string{`"state_energy.graph"`, "clean relative path"}},
		{"mean length", block(func(se map[string]any) { se["mean"] = []float64{1, 2} }), []string{`"state_energy.mean"`, "has 2 values, expected 3"}},
		{"std length", block(func(se map[string]any) { se["std"] = []float64{1, 2, 3, 4} }), []string{`"state_energy.std"`, "has 4 values, expected 3"}},
		{"sigmas", block(func(se map[string]any) { se["sigmas"] = []float64{0.05, 0, 3} }), []string{`"state_energy.sigmas[1]"`, "> 0"}},
		{"no sigmas", block(func(se map[string]any) { se["sigmas"], se["mean"], se["std"] = []float64{}, []float64{}, []float64{} }),
			[]string{`"state_energy.sigmas"`, "empty"}},
		{"std zero", block(func(se map[string]any) { se["std"] = []float64{1, 0, 1} }), []string{`"state_energy.std[1]"`, "> 0"}},
		{"input", block(func(se map[string]any) { se["input"] = "obs" }), []string{`"state_energy.input"`, `expected "cond"`}},
		{"output", block(func(se map[string]any) { se["output"] = "g" }), []string{`"state_energy.output"`, `expected "state_energy"`}},
		{"no q99.9", block(func(se map[string]any) {
			se["calibration"].(map[string]any)["quantiles"] = map[string]any{"50": 0.2}
		}), []string{`"state_energy.calibration.quantiles"`, `"99.9"`}},
		{"calibration n", block(func(se map[string]any) { se["calibration"].(map[string]any)["n"] = 0 }), []string{`"state_energy.calibration.n"`}},
		{"wrong type", block(func(se map[string]any) { se["sigmas"] = "many" }), []string{"state_energy.sigmas", "expected []float64"}},
		{"closed loop on state_energy without the block", func(m map[string]any) {
			delete(m, "state_energy")
			m["calibration"] = closedLoopCalibration(func(cl map[string]any) { cl["score"] = "state_energy" })
		}, []string{`"calibration.closed_loop.score"`, `no "state_energy" block`}},
		{"plan for the state graph without the block", func(m map[string]any) {
			delete(m, "state_energy")
			m["plans"] = []any{map[string]any{"graph": "state_energy", "file": "state_energy.onnx", "trt_version": "10.3.0", "gpu": "Orin", "precision": "fp32"}}
		}, []string{`"plans[0].graph"`, `"state_energy" is not in "graphs"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engines.LoadBundle(writeQuadStateBundle(t, tc.mutate))
			if err == nil {
				t.Fatal("LoadBundle accepted a broken state_energy block")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A closed-loop calibration of the state score, and a plan for its
	// graph, are fine when the bundle has the state term.
	dir := writeQuadStateBundle(t, func(m map[string]any) {
		m["calibration"] = closedLoopCalibration(func(cl map[string]any) { cl["score"] = "state_energy" })
		m["plans"] = []any{map[string]any{"graph": "state_energy", "file": "state_energy.onnx", "trt_version": "10.3.0", "gpu": "Orin", "precision": "fp32"}}
	})
	if _, err := engines.LoadBundle(dir); err != nil {
		t.Fatalf("closed_loop on state_energy with the block: %v", err)
	}
	// The max_z reading with its components (computed inside the graph) loads.
	dir = writeQuadStateBundle(t, func(m map[string]any) {
		se := m["state_energy"].(map[string]any)
		se["reading"], se["components"] = engines.ReadingMaxZ, []any{"g", "transition", "rnd"}
	})
	if b, err := engines.LoadBundle(dir); err != nil || b.Manifest.StateEnergy.Reading != engines.ReadingMaxZ ||
		len(b.Manifest.StateEnergy.Components) != 3 {
		t.Fatalf("reading %q: %v", engines.ReadingMaxZ, err)
	}
	// The state graph is hash-checked like every other file.
	dir = writeQuadStateBundle(t, nil)
	if err := os.WriteFile(filepath.Join(dir, "state_energy.onnx"), truncatedQuad(1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := engines.LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "state_energy.onnx") || !strings.Contains(err.Error(), "sha256 is") {
		t.Fatalf("corrupted state graph: %v", err)
	}
}

func TestSamplerStateEnergy(t *testing.T) {
	b := loadQuadState(t)
	for name, be := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.HasStateEnergy() {
				t.Fatal("HasStateEnergy false on a bundle with the state term")
			}
			for seed := 0; seed < 3; seed++ {
				cond, _ := testInputs(seed)
				want := enginestest.StateEnergy(cond)
				var r engines.Result
				if err := s.Sample(cond, &r); err != nil {
					t.Fatal(err)
				}
				if !math.IsNaN(float64(r.StateEnergy)) {
					t.Errorf("Sample filled StateEnergy %v, want NaN (not evaluated)", r.StateEnergy)
				}
				sc, err := s.Score(r.Actions, cond)
				if err != nil {
					t.Fatal(err)
				}
				if d := math.Abs(float64(sc.StateEnergy - want)); d > 1e-5*math.Max(1, math.Abs(float64(want))) {
					t.Fatalf("seed %d: Score.StateEnergy %v, want %v", seed, sc.StateEnergy, want)
				}
				if v, ok := sc.Value(engines.ScoreStateEnergy); !ok || v != sc.StateEnergy {
					t.Errorf("Value(%q) = %v, %v", engines.ScoreStateEnergy, v, ok)
				}
				if math.IsNaN(float64(sc.Energy)) || math.IsNaN(float64(sc.CenteredEnergy)) {
					t.Errorf("the energies are NaN next to the state energy: %+v", sc)
				}
				alone, err := s.StateEnergy(cond)
				if err != nil || alone != sc.StateEnergy {
					t.Errorf("StateEnergy = %v, %v; Score's %v", alone, err, sc.StateEnergy)
				}
			}
			// ScoreObs and StateEnergyObs build cond from the history first.
			hist := []engines.ObsFrame{{[]float32{2, 2}}, {[]float32{0, -6}}}
			cond := make([]float32, quadCond)
			if err := s.Conditioner().Build(hist, cond); err != nil {
				t.Fatal(err)
			}
			var r engines.Result
			if err := s.Sample(cond, &r); err != nil {
				t.Fatal(err)
			}
			sc, err := s.ScoreObs(r.Actions, hist)
			if err != nil {
				t.Fatal(err)
			}
			alone, err := s.StateEnergyObs(hist)
			if want := enginestest.StateEnergy(cond); err != nil || sc.StateEnergy != alone || math.Abs(float64(alone-want)) > 1e-5*math.Max(1, float64(want)) {
				t.Fatalf("ScoreObs %v, StateEnergyObs %v (%v), want %v", sc.StateEnergy, alone, err, want)
			}
			if _, err := s.StateEnergy(cond[:1]); err == nil {
				t.Error("StateEnergy accepted a cond of the wrong width")
			}
		})
	}
}

func TestSamplerWithoutStateTerm(t *testing.T) {
	b := loadQuad(t)
	be := &enginestest.Backend{}
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond, _ := testInputs(0)
	var r engines.Result
	if err := s.Sample(cond, &r); err != nil {
		t.Fatal(err)
	}
	before := be.Runs()
	sc, err := s.Score(r.Actions, cond)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(sc.StateEnergy)) || s.HasStateEnergy() {
		t.Errorf("without a state term: StateEnergy %v, HasStateEnergy %v; want NaN, false", sc.StateEnergy, s.HasStateEnergy())
	}
	if got := be.Runs() - before; got != 2 {
		t.Errorf("Score made %d graph calls, want 2 (energy, references): no state call without the term", got)
	}
	if _, err := s.StateEnergy(cond); !errors.Is(err, engines.ErrNoStateEnergy) {
		t.Errorf("StateEnergy: %v, want ErrNoStateEnergy", err)
	}
	if _, err := engines.NewStateTerm(b, be); !errors.Is(err, engines.ErrNoStateEnergy) {
		t.Errorf("NewStateTerm: %v, want ErrNoStateEnergy", err)
	}
}

// A diffusion policy has no energy, but its state term works: StateEnergy
// and a StateTerm of its own, while Score still says ErrNoEnergy.
func TestStateTermOfADiffusionBundle(t *testing.T) {
	onnx, err := os.ReadFile(filepath.Join("testdata", "ddim", "eps.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m := ddimManifest(loadOracle(t))
	m["files"] = map[string]any{"eps.onnx": sha256hex(onnx)}
	files := map[string][]byte{"eps.onnx": onnx}
	withStateTerm(t, files, m)
	b, err := engines.LoadBundle(writeBundleDir(t, files, m))
	if err != nil {
		t.Fatal(err)
	}
	be := newORT(t)
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cond, _ := testInputs(4)
	var r engines.Result
	if err := s.Sample(cond, &r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Score(r.Actions, cond); !errors.Is(err, engines.ErrNoEnergy) {
		t.Errorf("Score: %v, want ErrNoEnergy", err)
	}
	want := enginestest.StateEnergy(cond)
	if v, err := s.StateEnergy(cond); err != nil || math.Abs(float64(v-want)) > 1e-5*math.Max(1, float64(want)) {
		t.Errorf("StateEnergy = %v, %v; want %v", v, err, want)
	}
	st, err := engines.NewStateTerm(b, be)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := st.Energy(cond); err != nil || math.Abs(float64(v-want)) > 1e-5*math.Max(1, float64(want)) {
		t.Errorf("StateTerm.Energy = %v, %v; want %v", v, err, want)
	}
	st.Close()
	if _, err := st.Energy(cond); err == nil {
		t.Error("Energy after Close accepted")
	}
}

// A state graph that does not keep the contract is refused when the
// sampler opens it, with an error naming the state term.
func TestSamplerRefusesABadStateGraph(t *testing.T) {
	dir := writeQuadStateBundle(t, func(m map[string]any) {
		m["state_energy"].(map[string]any)["graph"] = "energy_grad.onnx" // cond is there, state_energy is not
	})
	b, err := engines.LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = engines.NewSampler(b, newORT(t), engines.SamplerOptions{})
	if err == nil || !strings.Contains(err.Error(), "state term energy_grad.onnx") || !strings.Contains(err.Error(), `"state_energy"`) {
		t.Fatalf("NewSampler: %v", err)
	}
}

// The state term adds no allocation to the re-scoring hot path.
func TestSamplerStateEnergyAllocations(t *testing.T) {
	b := loadQuadState(t)
	for name, be := range backends(t) {
		s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 2})
		if err != nil {
			t.Fatal(err)
		}
		cond, _ := testInputs(2)
		hist := []engines.ObsFrame{{[]float32{1, 2}}, {[]float32{3, 4}}}
		var r engines.Result
		if err := s.Sample(cond, &r); err != nil {
			t.Fatal(err)
		}
		for what, f := range map[string]func() error{
			"Score":          func() error { _, err := s.Score(r.Actions, cond); return err },
			"ScoreObs":       func() error { _, err := s.ScoreObs(r.Actions, hist); return err },
			"StateEnergy":    func() error { _, err := s.StateEnergy(cond); return err },
			"StateEnergyObs": func() error { _, err := s.StateEnergyObs(hist); return err },
		} {
			if err := f(); err != nil { // warm-up
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if err := f(); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s %s: %v allocations per call, want 0", name, what, allocs)
			}
		}
		s.Close()
	}
}

// A diffusion bundle's calibration stays null, except for a closed-loop
// calibration of its state term (energyflow sim calibrate --score
// state_energy), which needs the state term.
func TestDiffusionCalibrationOfTheStateTerm(t *testing.T) {
	onnx, err := os.ReadFile(filepath.Join("testdata", "ddim", "eps.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	closedLoop := func(score string) map[string]any {
		return map[string]any{"closed_loop": closedLoopCalibration(func(cl map[string]any) { cl["score"] = score })["closed_loop"]}
	}
	cases := []struct {
		name   string
		state  bool
		cal    map[string]any
		errHas string
	}{
		{"state_energy closed loop", true, closedLoop("state_energy"), ""},
		{"energy closed loop", true, closedLoop("energy"), `"calibration"`},
		{"held-out calibration", true, closedLoopCalibration(func(cl map[string]any) { cl["score"] = "state_energy" }), `"calibration"`},
		{"without the state term", false, closedLoop("state_energy"), `no "state_energy" block`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := ddimManifest(loadOracle(t))
			m["files"] = map[string]any{"eps.onnx": sha256hex(onnx)}
			files := map[string][]byte{"eps.onnx": onnx}
			if tc.state {
				withStateTerm(t, files, m)
			}
			m["calibration"] = tc.cal
			_, err := engines.LoadBundle(writeBundleDir(t, files, m))
			if tc.errHas == "" && err != nil {
				t.Fatal(err)
			}
			if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want %q", err, tc.errHas)
			}
		})
	}
}
