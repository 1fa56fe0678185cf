package enginebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Minimal protobuf encoder for test ONNX models.

func pbVarint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func pbBytes(field int, payload []byte) []byte {
	b := pbVarint(uint64(field)<<3 | wireLengthDelim)
	b = append(b, pbVarint(uint64(len(payload)))...)
	return append(b, payload...)
}

func pbString(field int, s string) []byte { return pbBytes(field, []byte(s)) }

func pbInt(field int, v []byte) []byte {
	return append(pbVarint(uint64(field)<<3|wireVarint), v...)
}

type tn struct {
	name, op string
	in, out  []string
}

func onnxModel(nodes []tn, inputs, outputs []string) []byte {
	var g []byte
	for _, n := range nodes {
		var nb []byte
		for _, i := range n.in {
			nb = append(nb, pbString(nodeInput, i)...)
		}
		for _, o := range n.out {
			nb = append(nb, pbString(nodeOutput, o)...)
		}
		if n.name != "" {
			nb = append(nb, pbString(nodeName, n.name)...)
		}
		nb = append(nb, pbString(nodeOpType, n.op)...)
		g = append(g, pbBytes(graphNode, nb)...)
	}
	g = append(g, pbString(2, "main_graph")...)    // GraphProto.name
	g = append(g, pbBytes(5, pbString(8, "W"))...) // an initializer (skipped)
	for _, i := range inputs {
		g = append(g, pbBytes(graphInput, pbString(valueInfoName, i))...)
	}
	for _, o := range outputs {
		g = append(g, pbBytes(graphOutput, pbString(valueInfoName, o))...)
	}
	var m []byte
	m = append(m, pbInt(1, pbVarint(8))...) // ir_version
	m = append(m, pbString(2, "pytorch")...)
	m = append(m, pbBytes(modelGraph, g)...)
	m = append(m, pbBytes(8, append(pbString(1, ""), pbInt(2, pbVarint(17))...))...) // opset_import
	return m
}

var energyNodes = []tn{
	{"/time_mlp/Mul", "Mul", []string{"t", "freqs"}, []string{"tf"}},
	{"/enc/Sin", "Sin", []string{"tf"}, []string{"s1"}},
	{"/enc/Cos", "Cos", []string{"tf"}, []string{"c1"}},
	{"/enc/Concat", "Concat", []string{"s1", "c1"}, []string{"e"}},
	{"/enc/lin/MatMul", "MatMul", []string{"e", "W"}, []string{"m"}},
	{"/enc/lin/Add", "Add", []string{"m", "b"}, []string{"m2"}},
	{"/enc/act/Mish", "Mish", []string{"m2"}, []string{"h"}},
	{"/enc/lin2/MatMul", "MatMul", []string{"h", "W2"}, []string{"h2"}},
	{"/down.0/conv/Conv", "Conv", []string{"a_t", "Wc"}, []string{"x"}},
	{"/down.0/gn/ReduceMean", "ReduceMean", []string{"x"}, []string{"mean"}},
	{"/down.0/gn/Sub", "Sub", []string{"x", "mean"}, []string{"xc"}},
	{"/down.0/gn/Sqrt", "Sqrt", []string{"xc"}, []string{"sd"}},
	{"/down.0/gn/Div", "Div", []string{"xc", "sd"}, []string{"xn"}},
	{"/down.0/norm1/Mul", "Mul", []string{"xn", "gamma"}, []string{"xs"}},
	{"/down.0/act/Mish", "Mish", []string{"xs"}, []string{"x2"}},
	{"/mid/Mul_3", "Mul", []string{"x2", "h2"}, []string{"y"}},
	{"/out/MatMul", "MatMul", []string{"y", "Wo"}, []string{"z"}},
	{"/out/ReduceSum", "ReduceSum", []string{"z"}, []string{"energy"}},
	{"/head/Constant", "Constant", nil, []string{"k"}},
	{"/grad/Mul", "Mul", []string{"z", "k"}, []string{"grad_a"}},
	{"", "ReduceMax", []string{"z"}, []string{"unused"}},
}

var wantFP32 = []string{
	"/down.0/gn/Div", "/down.0/gn/ReduceMean", "/down.0/gn/Sqrt", "/down.0/norm1/Mul",
	"/enc/Concat", "/enc/Cos", "/enc/Sin", "/enc/lin/Add", "/enc/lin/MatMul",
	"/mid/Mul_3", "/out/MatMul", "/out/ReduceSum", "/time_mlp/Mul",
}

func TestParseONNX(t *testing.T) {
	model := onnxModel(energyNodes, []string{"a_t", "cond", "t"}, []string{"grad_a", "energy"})
	g, err := ParseONNX(model)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != len(energyNodes) || g.Nodes[4].Name != "/enc/lin/MatMul" || g.Nodes[4].OpType != "MatMul" ||
		!reflect.DeepEqual(g.Nodes[4].Inputs, []string{"e", "W"}) || !reflect.DeepEqual(g.Nodes[4].Outputs, []string{"m"}) {
		t.Fatalf("nodes: %+v", g.Nodes[:5])
	}
	if !reflect.DeepEqual(g.Inputs, []string{"a_t", "cond", "t"}) || !reflect.DeepEqual(g.Outputs, []string{"grad_a", "energy"}) {
		t.Fatalf("io: %v %v", g.Inputs, g.Outputs)
	}
	if _, err := ParseONNX(model[:len(model)-3]); err == nil {
		t.Error("truncated model parsed")
	}
	if _, err := ParseONNX([]byte("not an onnx file at all")); err == nil {
		t.Error("text parsed as ONNX")
	}
	if _, err := ParseONNX(pbString(2, "no graph")); err == nil || !strings.Contains(err.Error(), "no graph") {
		t.Errorf("model without a graph: %v", err)
	}
}

func TestFP32Layers(t *testing.T) {
	g, err := ParseONNX(onnxModel(energyNodes, nil, []string{"energy"}))
	if err != nil {
		t.Fatal(err)
	}
	got, unnamed := FP32Layers(g, "energy")
	if !reflect.DeepEqual(got, wantFP32) {
		t.Errorf("FP32Layers =\n %q\nwant\n %q", got, wantFP32)
	}
	if unnamed != 1 {
		t.Errorf("unnamed = %d, want 1", unnamed)
	}
}

const manifestJSON = `{
  "format_version": 1,
  "policy": "energyflow",
  "name": "tiny",
  "action_norm": {"mean": [0.10000000149011612, -2.5e-08, 3], "std": [1, 1, 1]},
  "graphs": {
    "energy_grad": {"file": "energy_grad.onnx",
      "inputs": [{"name": "a_t", "shape": [-1, 4, 3]}, {"name": "cond", "shape": [-1, 5]}, {"name": "t", "shape": [-1]}],
      "outputs": [{"name": "grad_a", "shape": [-1, 4, 3]}, {"name": "energy", "shape": [-1]}]},
    "vision": {"file": "vision.onnx",
      "inputs": [{"name": "image", "shape": [-1, 3, 8, 8]}], "outputs": [{"name": "features", "shape": [-1, 6]}]}
  },
  "calibration": null,
  "files": {"energy_grad.onnx": "aa", "vision.onnx": "bb"},
  "model": {"down_dims": [64, 128, 256]}
}
`

func writeTestBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{
		"manifest.json":    []byte(manifestJSON),
		"energy_grad.onnx": onnxModel(energyNodes, []string{"a_t", "cond", "t"}, []string{"grad_a", "energy"}),
		"vision.onnx":      onnxModel([]tn{{"/conv/Conv", "Conv", []string{"image"}, []string{"f0"}}, {"/pool/ReduceMean", "ReduceMean", []string{"f0"}, []string{"features"}}}, []string{"image"}, []string{"features"}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testDouble(t *testing.T) (path, argLog string) {
	t.Helper()
	path, err := filepath.Abs("testdata/trtexec-testdouble.sh")
	if err != nil {
		t.Fatal(err)
	}
	argLog = filepath.Join(t.TempDir(), "args.txt")
	t.Setenv("TRTEXEC_TESTDOUBLE_LOG", argLog)
	t.Setenv("TRTEXEC_TESTDOUBLE_VERSION", "10.3.0")
	t.Setenv("TRTEXEC_TESTDOUBLE_GPU", "Orin")
	t.Setenv("TRTEXEC_TESTDOUBLE_FAIL", "0")
	return path, argLog
}

func readManifest(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildWithTrtexecTestDouble(t *testing.T) {
	dir := writeTestBundle(t)
	trtexec, argLog := testDouble(t)
	var log bytes.Buffer
	built, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, WorkspaceMB: 1024, Graphs: []string{"energy_grad"}, Log: &log})
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	if len(built) != 1 || built[0].File != "plans/10.3.0_Orin_fp16.plan" || built[0].TRTVersion != "10.3.0" || built[0].GPU != "Orin" || built[0].FP32Layers != len(wantFP32) {
		t.Fatalf("built %+v", built)
	}
	args, err := os.ReadFile(argLog)
	if err != nil {
		t.Fatal(err)
	}
	fp32 := make([]string, len(wantFP32))
	for i, n := range wantFP32 {
		fp32[i] = n + ":fp32"
	}
	list := strings.Join(fp32, ",")
	want := []string{
		"--onnx=" + filepath.Join(dir, "energy_grad.onnx"),
		"--saveEngine=" + filepath.Join(dir, "plans", ".building-energy_grad-"), // prefix
		"--minShapes=a_t:1x4x3,cond:1x5,t:1",
		"--optShapes=a_t:1x4x3,cond:1x5,t:1",
		"--maxShapes=a_t:16x4x3,cond:16x5,t:16",
		"--timingCacheFile=" + filepath.Join(dir, "plans", "timing.cache"),
		"--skipInference",
		"--memPoolSize=workspace:1024M",
		"--fp16",
		"--precisionConstraints=obey",
		"--layerPrecisions=" + list,
		"--layerOutputTypes=" + list,
	}
	got := strings.Split(strings.TrimSpace(string(args)), "\n")
	if len(got) != len(want) {
		t.Fatalf("trtexec args:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if got[i] != want[i] && !(i == 1 && strings.HasPrefix(got[i], want[i])) {
			t.Errorf("arg %d = %q, want %q", i, got[i], want[i])
		}
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plans", "10.3.0_Orin_fp16.plan"))
	if err != nil || !strings.Contains(string(plan), "max=a_t:16x4x3,cond:16x5,t:16") {
		t.Fatalf("plan: %q, %v", plan, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "plans", ".building-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary plans left: %v", leftovers)
	}
	m := readManifest(t, dir)
	plans := m["plans"].([]any)
	if len(plans) != 1 || !reflect.DeepEqual(plans[0], map[string]any{"graph": "energy_grad", "file": "plans/10.3.0_Orin_fp16.plan", "trt_version": "10.3.0", "gpu": "Orin", "precision": "fp16"}) {
		t.Fatalf("plans = %v", plans)
	}
	files := m["files"].(map[string]any)
	sum, _ := fileSHA256(filepath.Join(dir, "plans", "10.3.0_Orin_fp16.plan"))
	if files["plans/10.3.0_Orin_fp16.plan"] != sum || sum != built[0].SHA256 || files["energy_grad.onnx"] != "aa" || files["plans/timing.cache"] == nil {
		t.Fatalf("files = %v", files)
	}
	// The rest of the manifest is untouched: key order and float digits.
	raw, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	for _, s := range []string{`0.10000000149011612`, `-2.5e-08`, `"calibration": null`} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("manifest lost %s:\n%s", s, raw)
		}
	}
	order := []string{`"format_version"`, `"policy"`, `"action_norm"`, `"graphs"`, `"calibration"`, `"files"`, `"model"`, `"plans"`}
	last := -1
	for _, k := range order {
		i := strings.Index(string(raw), k)
		if i < last {
			t.Errorf("key %s moved:\n%s", k, raw)
		}
		last = i
	}

	// Rebuilding replaces the entry; an fp32 build and the vision graph add theirs.
	if _, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec}); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Precision: "fp32", Graphs: []string{"energy_grad"}}); err != nil {
		t.Fatal(err)
	}
	args, _ = os.ReadFile(argLog)
	if strings.Contains(string(args), "--fp16") || strings.Contains(string(args), "layerPrecisions") {
		t.Errorf("fp32 build passed FP16 flags:\n%s", args)
	}
	m = readManifest(t, dir)
	var gotFiles []string
	for _, p := range m["plans"].([]any) {
		gotFiles = append(gotFiles, p.(map[string]any)["file"].(string))
	}
	slices.Sort(gotFiles)
	if !reflect.DeepEqual(gotFiles, []string{"plans/10.3.0_Orin_fp16.plan", "plans/10.3.0_Orin_fp32.plan", "plans/vision_10.3.0_Orin_fp16.plan"}) {
		t.Fatalf("plans after rebuilds: %v", gotFiles)
	}
}

func TestBuildFailureLeavesBundleAlone(t *testing.T) {
	dir := writeTestBundle(t)
	trtexec, _ := testDouble(t)
	t.Setenv("TRTEXEC_TESTDOUBLE_FAIL", "1")
	_, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec})
	if err == nil || !strings.Contains(err.Error(), "simulated build failure") || !strings.Contains(err.Error(), "trtexec failed for graph") {
		t.Fatalf("Build: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if string(raw) != manifestJSON {
		t.Error("manifest changed after a failed build")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "plans", "*.plan")); len(m) != 0 {
		t.Errorf("plans left: %v", m)
	}
}

func TestBuildVersionAndGPU(t *testing.T) {
	dir := writeTestBundle(t)
	trtexec, _ := testDouble(t)
	probe := func(v, g string, err error) func() (string, string, error) {
		return func() (string, string, error) { return v, g, err }
	}
	// The runtime's TensorRT differs from trtexec's: the plan would be refused.
	_, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Graphs: []string{"energy_grad"}, Probe: probe("10.2.0", "Orin", nil)})
	if err == nil || !strings.Contains(err.Error(), "trtexec is TensorRT 10.3.0 but the runtime is TensorRT 10.2.0") {
		t.Fatalf("version mismatch: %v", err)
	}
	// No runtime in this binary: trtexec's log names the plan.
	t.Setenv("TRTEXEC_TESTDOUBLE_GPU", "NVIDIA H100 80GB HBM3")
	built, err := Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Graphs: []string{"energy_grad"}, Probe: probe("", "", errors.New("trt: built without TensorRT"))})
	if err != nil || built[0].File != "plans/10.3.0_NVIDIA-H100-80GB-HBM3_fp16.plan" || built[0].GPU != "NVIDIA H100 80GB HBM3" {
		t.Fatalf("from trtexec's log: %+v, %v", built, err)
	}
	// Explicit flags win.
	built, err = Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, Graphs: []string{"energy_grad"}, TRTVersion: "10.3.0", GPU: "NVIDIA H100 80GB HBM3", Precision: "fp32"})
	if err != nil || built[0].File != "plans/10.3.0_NVIDIA-H100-80GB-HBM3_fp32.plan" {
		t.Fatalf("explicit: %+v, %v", built, err)
	}
	// TensorRT 11 has no weakly typed FP16 builds.
	_, err = Build(context.Background(), Options{Bundle: dir, Trtexec: trtexec, TRTVersion: "11.1.0", GPU: "Orin"})
	if err == nil || !strings.Contains(err.Error(), "strongly typed") {
		t.Fatalf("TensorRT 11 fp16: %v", err)
	}
}

func TestDryRunAndOptions(t *testing.T) {
	dir := writeTestBundle(t)
	var log bytes.Buffer
	built, err := Build(context.Background(), Options{Bundle: dir, DryRun: true, TRTVersion: "10.3.0", GPU: "Orin", Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != 2 || built[1].File != "plans/vision_10.3.0_Orin_fp16.plan" || !strings.Contains(log.String(), "trtexec --onnx=") {
		t.Fatalf("dry run: %+v\n%s", built, log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "plans")); !os.IsNotExist(err) {
		t.Error("dry run created plans/")
	}
	for _, o := range []Options{
		{},
		{Bundle: dir, Precision: "int8"},
		{Bundle: dir, MinBatch: 4, OptBatch: 2},
		{Bundle: dir, TRTVersion: "10.3.0"},
		{Bundle: dir, Graphs: []string{"nope"}, DryRun: true},
		{Bundle: t.TempDir()},
		{Bundle: dir, Trtexec: filepath.Join(dir, "no-such-trtexec")},
	} {
		if _, err := Build(context.Background(), o); err == nil {
			t.Errorf("Build(%+v) succeeded", o)
		}
	}
}

func TestMaxBatchCoversReferenceScoring(t *testing.T) {
	dir := writeTestBundle(t)
	raw := strings.Replace(manifestJSON, `"calibration": null,`, `"reference_actions": [`+strings.Repeat(`[[0,0,0]],`, 15)+`[[0,0,0]]],
  "calibration": null,`, 1)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	built, err := Build(context.Background(), Options{Bundle: dir, DryRun: true, TRTVersion: "10.3.0", GPU: "Orin", Graphs: []string{"energy_grad"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(built[0].Args, "--maxShapes=a_t:17x4x3,cond:17x5,t:17") || !slices.Contains(built[0].Args, "--optShapes=a_t:1x4x3,cond:1x5,t:1") {
		t.Errorf("16 references: args %q, want max batch 17", built[0].Args)
	}
	built, err = Build(context.Background(), Options{Bundle: dir, DryRun: true, TRTVersion: "10.3.0", GPU: "Orin", Graphs: []string{"energy_grad"}, MaxBatch: 32})
	if err != nil || !slices.Contains(built[0].Args, "--maxShapes=a_t:32x4x3,cond:32x5,t:32") {
		t.Errorf("explicit max batch: %v, %q", err, built[0].Args)
	}
}

func TestIdentify(t *testing.T) {
	v, g := identify([]byte("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec\n[11/22/2026-10:00:00] [I] Selected Device: Orin\n"))
	if v != "10.3.0" || g != "Orin" {
		t.Errorf("identify = %q, %q", v, g)
	}
}
