package record

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	if r := os.Getenv("ENERGYFLOW_ROOT"); r != "" {
		return r
	}
	d, _ := os.Getwd()
	for ; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	t.Fatal("no go.mod above the test directory")
	return ""
}

func python(t *testing.T) string {
	t.Helper()
	py := filepath.Join(repoRoot(t), ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: make deps creates it", py)
		}
		t.Skip("no .venv (run make deps)")
	}
	return py
}

func testEpisode() *Episode {
	e := NewEpisode("button-press-v3", map[string][]int{"state": {3}, "camera": {2, 2, 3}}, 2, "energy")
	for i := 0; i < 5; i++ {
		f := float32(i)
		e.Obs["state"].AppendF32([]float32{f, f + 0.5, -f})
		e.Obs["camera"].AppendU8([]uint8{uint8(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
		e.Actions.AppendF32([]float32{f / 10, -f / 10})
		e.Scores["energy"].AppendF32([]float32{f * 2})
	}
	e.Success = true
	e.StopReason = "episode end"
	e.Events = []any{map[string]any{"kind": "energy", "tick": 3}}
	return e
}

func TestSaveWritesRobomimicLayout(t *testing.T) {
	py := python(t)
	dir := t.TempDir()
	path, err := Save(dir, testEpisode())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".hdf5") {
		t.Fatalf("final name %s", path)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.partial")); len(m) != 0 {
		t.Fatalf("temporary file left: %v", m)
	}
	script := `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
d = f["data/demo_0"]
out = {
 "env": f["data"].attrs["env"].decode() if isinstance(f["data"].attrs["env"], bytes) else str(f["data"].attrs["env"]),
 "total": int(f["data"].attrs["total"]),
 "num_samples": int(d.attrs["num_samples"]),
 "state": d["obs/state"][:].tolist(), "state_dtype": str(d["obs/state"].dtype),
 "camera_shape": list(d["obs/camera"].shape), "camera_dtype": str(d["obs/camera"].dtype),
 "actions": d["actions"][:].tolist(), "energy": d["scores/energy"][:].tolist(),
 "events": json.loads(d.attrs["safety_events"]),
}
print(json.dumps(out))`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	var got struct {
		Env         string      `json:"env"`
		Total       int         `json:"total"`
		NumSamples  int         `json:"num_samples"`
		State       [][]float64 `json:"state"`
		StateDtype  string      `json:"state_dtype"`
		CameraShape []int       `json:"camera_shape"`
		CameraDtype string      `json:"camera_dtype"`
		Actions     [][]float64 `json:"actions"`
		Energy      []float64   `json:"energy"`
		Events      []map[string]any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Env != "button-press-v3" || got.Total != 5 || got.NumSamples != 5 {
		t.Fatalf("attrs: %+v", got)
	}
	if got.StateDtype != "float32" || got.State[4][1] != 4.5 || got.State[2][2] != -2 {
		t.Fatalf("state: %v %s", got.State, got.StateDtype)
	}
	if got.CameraDtype != "uint8" || len(got.CameraShape) != 4 || got.CameraShape[0] != 5 || got.CameraShape[3] != 3 {
		t.Fatalf("camera: %v %s", got.CameraShape, got.CameraDtype)
	}
	if len(got.Actions) != 5 || got.Energy[3] != 6 || len(got.Events) != 1 {
		t.Fatalf("actions/energy/events: %v %v %v", got.Actions, got.Energy, got.Events)
	}
}

func TestSaveRefusesRaggedEpisodes(t *testing.T) {
	e := testEpisode()
	e.Obs["state"].AppendF32([]float32{1, 2, 3})
	if _, err := Save(t.TempDir(), e); err == nil || !strings.Contains(err.Error(), "obs/state has 6 steps") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Save(t.TempDir(), NewEpisode("x", nil, 2)); err == nil {
		t.Fatal("empty episode saved")
	}
}

func TestSaveNeverOverwrites(t *testing.T) {
	python(t)
	dir := t.TempDir()
	e := testEpisode()
	p1, err := Save(dir, e)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Save(dir, e)
	if err != nil {
		t.Fatal(err)
	}
	if p1 == p2 {
		t.Fatalf("second save overwrote %s", p1)
	}
}

// TestTrainingToolkitLoadsRecordings is the cross-language check: a file the
// runtime records is read by the training toolkit's own loader.
func TestTrainingToolkitLoadsRecordings(t *testing.T) {
	py := python(t)
	path, err := Save(t.TempDir(), testEpisode())
	if err != nil {
		t.Fatal(err)
	}
	script := `
import sys
sys.path.insert(0, sys.argv[2])
from energyflow.data import load_hdf5
demos, info = load_hdf5(sys.argv[1], ["state"], ["camera"])
d = demos[0]
assert info.env == "button-press-v3", info.env
assert info.action_dim == 2 and info.total == 5, info
assert d.length == 5 and d.obs["state"].shape == (5, 3) and d.obs["camera"].shape == (5, 2, 2, 3), d
assert abs(float(d.actions[4, 1]) + 0.4) < 1e-6
print("ok")`
	out, err := exec.Command(py, "-c", script, path, filepath.Join(repoRoot(t), "training")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("training loader: %v\n%s", err, out)
	}
}
