package enginebuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
)

// trtParsableOps mirrors training/energyflow/export.py ALLOWED_OPS: the
// operators the exported graphs may use, all parsed by TensorRT 10's ONNX
// parser. Keep the two lists in sync.
var trtParsableOps = []string{
	"Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Neg",
	"ReduceMean", "ReduceSum", "Reshape", "Exp", "Log", "Tanh", "Sigmoid", "Softplus",
	"Sin", "Cos", "Concat", "Unsqueeze", "Squeeze", "Transpose", "Sqrt", "Reciprocal",
	"Pow", "Slice", "Expand", "Shape", "Gather", "Constant", "Identity", "Flatten",
	"Relu", "MaxPool", "GlobalAveragePool", "ConstantOfShape", "Split",
}

// The toolkit's exported graphs that the engines tests commit — the
// policies' and the state term's — use only operators TensorRT parses.
func TestCommittedGraphsUseParsableOps(t *testing.T) {
	root := filepath.Join("..", "..", "engines", "testdata")
	graphs := []string{"parity/bundle/energy_grad.onnx", "parity-denoiser/bundle/energy_grad.onnx",
		"parity-diffusion/bundle/eps.onnx", "parity-state/bundle/energy_grad.onnx", "parity-state/bundle/state_energy.onnx"}
	for _, g := range graphs {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(g)))
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseONNX(data)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		ops := map[string]bool{}
		for _, n := range parsed.Nodes {
			ops[n.OpType] = true
		}
		var bad []string
		for op := range ops {
			if !slices.Contains(trtParsableOps, op) {
				bad = append(bad, op)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s uses operators outside the TensorRT-parsable list: %v", g, bad)
		}
		if strings.HasSuffix(g, "state_energy.onnx") {
			// The state term's reading: the max over σ is a MaxPool.
			for _, want := range []string{"MaxPool", "MatMul", "ReduceSum", "Sub", "Div"} {
				if !ops[want] {
					t.Errorf("%s: no %s node (ops %v)", g, want, ops)
				}
			}
		}
	}
}

// stateNodes is a state graph shaped like the toolkit's (its operators).
var stateNodes = []tn{
	{"/net/Unsqueeze", "Unsqueeze", []string{"cond"}, []string{"c3"}},
	{"/net/Log", "Log", []string{"sig"}, []string{"ls"}},
	{"/net/Sin", "Sin", []string{"ls"}, []string{"s"}},
	{"/net/Cos", "Cos", []string{"ls"}, []string{"c"}},
	{"/net/Concat", "Concat", []string{"s", "c"}, []string{"emb"}},
	{"/net/inp/MatMul", "MatMul", []string{"c3", "W"}, []string{"h0"}},
	{"/net/Sigmoid", "Sigmoid", []string{"h0"}, []string{"g"}},
	{"/net/Mul", "Mul", []string{"h0", "g"}, []string{"h"}},
	{"/net/ReduceSum", "ReduceSum", []string{"h"}, []string{"f"}},
	{"/Sub", "Sub", []string{"f", "mean"}, []string{"d"}},
	{"/Div", "Div", []string{"d", "std"}, []string{"z"}},
	{"/Reshape", "Reshape", []string{"z"}, []string{"z4"}},
	{"/MaxPool", "MaxPool", []string{"z4"}, []string{"m"}},
	{"/Squeeze", "Squeeze", []string{"m"}, []string{"state_energy"}},
}

// engine build builds the state term's plan next to the policy's, always in
// FP32, and records it for the runtime (which loads the result).
func TestBuildStateGraph(t *testing.T) {
	dir := writeTestBundle(t)
	raw := strings.Replace(manifestJSON, `"calibration": null,`, `"cond_dim": 5,
  "calibration": null,
  "state_energy": {"graph": "state_energy.onnx", "input": "cond", "output": "state_energy", "reading": "max_sigma_z"},`, 1)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state_energy.onnx"), onnxModel(stateNodes, []string{"cond"}, []string{"state_energy"}), 0o644); err != nil {
		t.Fatal(err)
	}
	trtexec, argLog := testDouble(t)
	var log bytes.Buffer
	built, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Log: &log})
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	var names []string
	for _, b := range built {
		names = append(names, b.Graph)
	}
	if !reflect.DeepEqual(names, []string{"energy_grad", "state_energy", "vision"}) {
		t.Fatalf("built %v", names)
	}
	st := built[1]
	if st.File != "plans/state_energy_10.3.0_Orin_fp32.plan" || st.Precision != "fp32" || built[0].Precision != "fp16" {
		t.Errorf("state plan %+v, policy plan precision %s", st.PlanEntry, built[0].Precision)
	}
	if slices.Contains(st.Args, "--fp16") || !slices.Contains(st.Args, "--minShapes=cond:1x5") || !slices.Contains(st.Args, "--maxShapes=cond:16x5") ||
		!slices.Contains(st.Args, "--onnx="+filepath.Join(dir, "state_energy.onnx")) {
		t.Errorf("state graph trtexec args %q", st.Args)
	}
	if !strings.Contains(log.String(), "engine build: state_energy: built in fp32 whatever --precision says") {
		t.Errorf("log does not say the state plan is FP32:\n%s", log.String())
	}
	if _, err := os.Stat(argLog); err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, dir)
	found := false
	for _, p := range m["plans"].([]any) {
		if p := p.(map[string]any); p["graph"] == "state_energy" {
			found = p["file"] == st.File && p["precision"] == "fp32"
		}
	}
	files := m["files"].(map[string]any)
	if !found || files[st.File] == nil {
		t.Fatalf("state plan not recorded: plans %v, files %v", m["plans"], files)
	}
	// Only the state graph, on request; a bundle without the block has none.
	if built, err = Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Graphs: []string{engines.GraphStateEnergy}, DryRun: true,
		TRTVersion: "10.3.0", GPU: "Orin"}); err != nil || len(built) != 1 || built[0].Precision != "fp32" {
		t.Fatalf("state graph alone: %+v, %v", built, err)
	}
	plain := writeTestBundle(t)
	if _, err := Build(context.Background(), Options{Bundle: plain, Graphs: []string{engines.GraphStateEnergy}, DryRun: true, TRTVersion: "10.3.0", GPU: "Orin"}); err == nil ||
		!strings.Contains(err.Error(), `no graph "state_energy"`) {
		t.Fatalf("state graph of a bundle without one: %v", err)
	}
	// A block without cond_dim cannot be built.
	bad := writeTestBundle(t)
	raw = strings.Replace(manifestJSON, `"calibration": null,`, `"calibration": null, "state_energy": {"graph": "state_energy.onnx"},`, 1)
	if err := os.WriteFile(filepath.Join(bad, "manifest.json"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Options{Bundle: bad, DryRun: true, TRTVersion: "10.3.0", GPU: "Orin"}); err == nil || !strings.Contains(err.Error(), "cond_dim") {
		t.Fatalf("no cond_dim: %v", err)
	}
}
