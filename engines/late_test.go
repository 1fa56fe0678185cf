package engines_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
)

// writeLateBundle writes the analytic bundle with a late network whose
// graph file holds late (the quad graph itself when nil), then applies
// mutate to the manifest.
func writeLateBundle(t testing.TB, late []byte, mutate func(m map[string]any)) string {
	t.Helper()
	if late == nil {
		var err error
		if late, err = os.ReadFile(filepath.Join("testdata", "quad", "energy_grad.onnx")); err != nil {
			t.Fatal(err)
		}
	}
	return writeQuadBundle(t, func(files map[string][]byte) { files["energy_grad_late.onnx"] = late }, func(m map[string]any) {
		m["files"].(map[string]any)["energy_grad_late.onnx"] = sha256hex(late)
		graphs := m["graphs"].(map[string]any)
		entry := map[string]any{}
		for k, v := range graphs["energy_grad"].(map[string]any) {
			entry[k] = v
		}
		entry["file"] = "energy_grad_late.onnx"
		graphs["energy_grad_late"] = entry
		m["late_policy"] = map[string]any{"graph": "energy_grad_late", "from_periods": 2}
		if mutate != nil {
			mutate(m)
		}
	})
}

func TestLoadBundleLatePolicy(t *testing.T) {
	b, err := engines.LoadBundle(writeLateBundle(t, nil, nil))
	if err != nil {
		t.Fatalf("LoadBundle: %v", err)
	}
	if lp := b.Manifest.LatePolicy; lp == nil || lp.Graph != engines.GraphEnergyGradLate || lp.FromPeriods != 2 {
		t.Fatalf("late_policy %+v", lp)
	}
	spec, err := b.GraphSpec(engines.GraphEnergyGradLate, 1)
	if err != nil || filepath.Base(spec.Path) != "energy_grad_late.onnx" {
		t.Fatalf("GraphSpec(late): %+v, %v", spec, err)
	}
}

func TestLoadBundleRefusesLatePolicy(t *testing.T) {
	lateEntry := func(m map[string]any) map[string]any {
		return m["graphs"].(map[string]any)["energy_grad_late"].(map[string]any)
	}
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   []string
	}{
		{"from_periods 0", func(m map[string]any) { m["late_policy"].(map[string]any)["from_periods"] = 0 },
			[]string{`"late_policy.from_periods"`, "got 0, expected the plan latency"}},
		{"from_periods negative", func(m map[string]any) { m["late_policy"].(map[string]any)["from_periods"] = -3 },
			[]string{`"late_policy.from_periods"`, "got -3"}},
		{"the main graph", func(m map[string]any) { m["late_policy"].(map[string]any)["graph"] = "energy_grad" },
			[]string{`"late_policy.graph"`, `got "energy_grad", expected "energy_grad_late"`}},
		{"no graph entry", func(m map[string]any) { delete(m["graphs"].(map[string]any), "energy_grad_late") },
			[]string{`"late_policy.graph"`, `"energy_grad_late" is not in "graphs"`}},
		{"a graph without the block", func(m map[string]any) { delete(m, "late_policy") },
			[]string{`"graphs.energy_grad_late"`, `without a "late_policy" block`}},
		{"other inputs", func(m map[string]any) {
			lateEntry(m)["inputs"] = []any{map[string]any{"name": "a_t", "shape": []int{-1, quadTp, quadDa}},
				map[string]any{"name": "cond", "shape": []int{-1, 12}}, map[string]any{"name": "t", "shape": []int{-1}}}
		}, []string{`"graphs.energy_grad_late.inputs[1].shape"`, "expected [-1 4]"}},
		{"file not listed", func(m map[string]any) { delete(m["files"].(map[string]any), "energy_grad_late.onnx") },
			[]string{`"graphs.energy_grad_late.file"`, "is not listed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engines.LoadBundle(writeLateBundle(t, nil, tc.mutate))
			if err == nil {
				t.Fatal("loaded, want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// The late sampler steps on the late graph's file, Euler steps alone: with
// the main graph's weights it samples what the main sampler does (same
// seed). A broken late file is refused at load; the late sampler is
// refused without ActionsOnly and on a bundle without a late network.
func TestSamplerOnTheLateNetwork(t *testing.T) {
	be := newORT(t)
	open := func(dir string, opts engines.SamplerOptions) (*engines.Sampler, error) {
		b, err := engines.LoadBundle(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := engines.NewSampler(b, be, opts)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}
	dir := writeLateBundle(t, nil, nil)
	late := engines.SamplerOptions{Seed: 7, ActionsOnly: true, Graph: engines.GraphEnergyGradLate}
	ls, err := open(dir, late)
	if err != nil {
		t.Fatalf("late sampler: %v", err)
	}
	ms, err := open(dir, engines.SamplerOptions{Seed: 7, ActionsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	cond := []float32{0.5, -1, 2, 0.25}
	var lr, mr engines.Result
	if err := ls.Sample(cond, &lr); err != nil {
		t.Fatal(err)
	}
	if err := ms.Sample(cond, &mr); err != nil {
		t.Fatal(err)
	}
	for i := range mr.Actions {
		if lr.Actions[i] != mr.Actions[i] {
			t.Fatalf("action %d: late %v, main %v (the same weights and seed)", i, lr.Actions[i], mr.Actions[i])
		}
	}

	if _, err := engines.LoadBundle(writeLateBundle(t, truncatedQuad(100), nil)); err == nil || !strings.Contains(err.Error(), "energy_grad_late.onnx") {
		t.Errorf("a broken late file: %v, want a refusal naming it", err)
	}
	if _, err := open(dir, engines.SamplerOptions{Graph: engines.GraphEnergyGradLate}); err == nil || !strings.Contains(err.Error(), "ActionsOnly") {
		t.Errorf("late sampler without ActionsOnly: %v", err)
	}
	if _, err := open(writeQuadBundle(t, nil, nil), late); err == nil || !strings.Contains(err.Error(), "late_policy") {
		t.Errorf("late sampler on a bundle without a late network: %v", err)
	}
}
