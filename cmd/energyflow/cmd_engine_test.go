package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runEngine(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := realMain(append([]string{"engine"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestEngineBuildWithTrtexecTestDouble(t *testing.T) {
	dir := t.TempDir()
	manifest := `{"format_version": 1, "graphs": {"energy_grad": {"file": "energy_grad.onnx",
  "inputs": [{"name": "a_t", "shape": [-1, 16, 10]}, {"name": "cond", "shape": [-1, 78]}, {"name": "t", "shape": [-1]}],
  "outputs": [{"name": "grad_a", "shape": [-1, 16, 10]}, {"name": "energy", "shape": [-1]}]}},
  "files": {"energy_grad.onnx": "00"}}`
	for name, data := range map[string]string{"manifest.json": manifest, "energy_grad.onnx": "not parsed for fp32"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	double, err := filepath.Abs("../../trt/enginebuild/testdata/trtexec-testdouble.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRTEXEC_TESTDOUBLE_LOG", filepath.Join(t.TempDir(), "args"))
	t.Setenv("TRTEXEC_TESTDOUBLE_VERSION", "10.3.0")
	t.Setenv("TRTEXEC_TESTDOUBLE_GPU", "Orin")
	t.Setenv("TRTEXEC_TESTDOUBLE_FAIL", "0")
	code, stdout, stderr := runEngine(t, "build", "--bundle", dir, "--trtexec", double, "--precision", "fp32", "--workspace", "512")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "energy_grad\tplans/10.3.0_Orin_fp32.plan\tTensorRT 10.3.0\tOrin\tfp32\tsha256 ") {
		t.Errorf("stdout: %s", stdout)
	}
	var m struct {
		Plans []map[string]string `json:"plans"`
		Files map[string]string   `json:"files"`
	}
	data, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Plans) != 1 || m.Plans[0]["file"] != "plans/10.3.0_Orin_fp32.plan" || len(m.Files["plans/10.3.0_Orin_fp32.plan"]) != 64 {
		t.Errorf("manifest: %s", data)
	}
	t.Setenv("TRTEXEC_TESTDOUBLE_FAIL", "1")
	if code, _, stderr := runEngine(t, "build", "--bundle", dir, "--trtexec", double, "--precision", "fp32"); code != exitFailure || !strings.Contains(stderr, "simulated build failure") {
		t.Errorf("failing trtexec: exit %d, stderr %s", code, stderr)
	}
}

func TestEngineUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"build"}, {"build", "--bundle", "x", "extra"}, {"build", "--nope"}} {
		if code, _, _ := runEngine(t, args...); code != exitUsage {
			t.Errorf("engine %q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, out, _ := runEngine(t, "--help"); code != exitOK || !strings.Contains(out, "engine <subcommand>") {
		t.Errorf("--help: %d %s", code, out)
	}
}
