package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines/enginestest"
)

// bundle verify prints the state_energy block and evaluates the state term
// once, for an energyflow bundle (where re-scoring must agree) and a
// diffusion one; a state graph that breaks the contract fails the check.
func TestBundleVerifyStateTerm(t *testing.T) {
	diffusion := filepath.Join(t.TempDir(), "dp")
	if err := os.CopyFS(diffusion, os.DirFS(filepath.Join(moduleRoot(t), "runtime", "testdata", "simarm-diffusion"))); err != nil {
		t.Fatal(err)
	}
	enginestest.AddStateTerm(t, diffusion, 6.5)
	cases := []struct {
		name string
		dir  string
		want []string
	}{
		{"energyflow (the parity fixture's trained state term)", filepath.Join(moduleRoot(t), "engines", "testdata", "parity-state", "bundle"),
			[]string{"ok    state term state_energy.onnx: reading max_sigma_z over 4 noise levels (σ 0.05–3); held-out q99.9 4.00", "n=512",
				"ok    test sample", "ok    state term test evaluation (observations at their mean): state_energy ", "verify: OK"}},
		{"diffusion", diffusion,
			[]string{"over 3 noise levels (σ 0.05–3); held-out q99.9 6.5 (n=100", "ok    test sample", "state term test evaluation (observations at their mean): state_energy -1 (held-out q99.9 6.5)", "verify: OK"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := realMain([]string{"bundle", "verify", "--threads", "1", tc.dir}, &out, &errb); code != exitOK {
				t.Fatalf("verify exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	// Without the block, nothing about a state term is printed.
	var out, errb bytes.Buffer
	if code := realMain([]string{"bundle", "verify", "--threads", "1", writeTestBundle(t)}, &out, &errb); code != exitOK || strings.Contains(out.String(), "state term") {
		t.Errorf("a bundle without the state term: exit %d\n%s", code, out.String())
	}
	// A block naming a graph that is not a state graph fails the check.
	bad := writeTestBundle(t)
	enginestest.AddStateTerm(t, bad, 6.5)
	mf := filepath.Join(bad, "manifest.json")
	raw, _ := os.ReadFile(mf)
	if err := os.WriteFile(mf, bytes.Replace(raw, []byte(`"graph": "state_energy.onnx"`), []byte(`"graph": "energy_grad.onnx"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"bundle", "verify", "--threads", "1", bad}, &out, &errb); code != exitCheckFailed ||
		!strings.Contains(errb.String(), "state term energy_grad.onnx") || !strings.Contains(errb.String(), `"state_energy"`) {
		t.Errorf("a state term that is not a state graph: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}
