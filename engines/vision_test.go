package engines_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
)

// writeVisionBundle writes the analytic bundle with a state and an image
// input: cond = 2 steps × (state 2 + camera features 4) = 12.
func writeVisionBundle(t *testing.T) string {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "quad", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	energy, vision := read("energy_grad_c12.onnx"), read("vision.onnx")
	return writeQuadBundle(t, func(f map[string][]byte) {
		f["energy_grad.onnx"] = energy
		f["vision.onnx"] = vision
	}, func(m map[string]any) {
		m["files"] = map[string]any{"energy_grad.onnx": sha256hex(energy), "vision.onnx": sha256hex(vision)}
		m["obs"] = append(m["obs"].([]any), map[string]any{"name": "camera", "kind": "image", "shape": []int{3, 8, 8},
			"graph": "vision", "features": 4,
			"preprocess": map[string]any{"resize": []int{10, 10}, "crop": []int{8, 8}, "channel_order": "RGB",
				"mean": []float64{0.485, 0.456, 0.406}, "std": []float64{0.229, 0.224, 0.225}}})
		m["conditioning"] = map[string]any{"layout": "history_flat", "items": []any{
			map[string]any{"obs": "state", "width": 2}, map[string]any{"obs": "camera", "width": 4}}}
		m["cond_dim"] = 12
		g := m["graphs"].(map[string]any)
		g["energy_grad"].(map[string]any)["inputs"].([]any)[1] = map[string]any{"name": "cond", "shape": []int{-1, 12}}
		g["vision"] = map[string]any{"file": "vision.onnx",
			"inputs":  []any{map[string]any{"name": "image", "shape": []int{-1, 3, 8, 8}}},
			"outputs": []any{map[string]any{"name": "features", "shape": []int{-1, 4}}}}
	})
}

func TestVisionConditioningAndSampling(t *testing.T) {
	b, err := engines.LoadBundle(writeVisionBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	be := newORT(t)
	enc, err := engines.NewVisionEncoder(b, be, "camera")
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if enc.ImageSize() != 3*8*8 || enc.Features() != 4 || enc.Obs() != 1 {
		t.Fatalf("encoder sizes %d %d %d", enc.ImageSize(), enc.Features(), enc.Obs())
	}
	img := make([]float32, enc.ImageSize())
	for i := range img {
		img[i] = float32(math.Sin(float64(i) * 0.37))
	}
	feat := make([]float32, 4)
	if err := enc.Encode(img, feat); err != nil {
		t.Fatal(err)
	}
	for f := 0; f < 4; f++ {
		var want float64
		for c := 0; c < 3; c++ {
			var mean float64
			for _, v := range img[c*64 : (c+1)*64] {
				mean += float64(v)
			}
			want += mean / 64 * 0.5 * math.Cos(float64(c+2*f))
		}
		if math.Abs(float64(feat[f])-want) > 1e-5 {
			t.Fatalf("feature %d = %v, want %v", f, feat[f], want)
		}
	}
	if allocs := testing.AllocsPerRun(20, func() { _ = enc.Encode(img, feat) }); allocs != 0 {
		t.Errorf("Encode allocates %v per call", allocs)
	}

	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Steps: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feat2 := []float32{0.1, -0.2, 0.3, 0.4}
	hist := []engines.ObsFrame{{[]float32{2, 2}, feat2}, {[]float32{0, -6}, feat}}
	cond := make([]float32, 12)
	if err := s.Conditioner().Build(hist, cond); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]float32{2, 1}, feat2...), -2, -1), feat...)
	if !equal(cond, want) {
		t.Fatalf("cond = %v, want %v (oldest step first, items in manifest order)", cond, want)
	}
	_, z := testInputs(4)
	res := make([]engines.Result, 1)
	if err := s.SampleWithNoise(cond, z, res); err != nil {
		t.Fatal(err)
	}
	wantA, wantE, _ := refSample(&b.Manifest, to64(cond), to64(z), 8)
	for i := range wantA {
		if math.Abs(float64(res[0].Actions[i])-wantA[i]) > 1e-4*math.Max(1, math.Abs(wantA[i])) {
			t.Fatalf("action[%d] = %v, want %v", i, res[0].Actions[i], wantA[i])
		}
	}
	if math.Abs(float64(res[0].Energy)-wantE) > 1e-4*math.Abs(wantE) {
		t.Fatalf("energy %v, want %v", res[0].Energy, wantE)
	}
	var r engines.Result
	if err := s.SampleObs(hist, &r); err != nil {
		t.Fatal(err)
	}
}

func TestVisionBundleValidation(t *testing.T) {
	dir := writeVisionBundle(t)
	// An image input whose graph is missing is refused with the field named.
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engines.ParseManifest("manifest.json", b); err != nil {
		t.Fatalf("valid vision manifest refused: %v", err)
	}
	bad := writeQuadBundle(t, nil, func(m map[string]any) {
		m["obs"] = append(m["obs"].([]any), map[string]any{"name": "camera", "kind": "image", "shape": []int{3, 8, 8}, "graph": "vision", "features": 4})
	})
	_, err = engines.LoadBundle(bad)
	for _, w := range []string{`"obs[1].graph"`, `"obs[1].preprocess"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %s", err, w)
		}
	}
}

// An image input's palette (the unseen-colour check's colours) is read and
// checked: levels a power of two from 2 to 64, exactly levels³/8 bytes of
// base64, the frames it was built from.
func TestVisionBundlePalette(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(writeVisionBundle(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cells := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, tc := range []struct {
		name    string
		palette map[string]any
		want    string // "" valid, else a field named in the error
	}{
		{"valid", map[string]any{"levels": 16, "seen": cells(512), "frames": 100, "held_out": map[string]any{"frames": 10, "max_unseen": 1}}, ""},
		{"two levels", map[string]any{"levels": 2, "seen": cells(1), "frames": 1}, ""},
		{"levels 12", map[string]any{"levels": 12, "seen": cells(216), "frames": 1}, ".palette.levels"},
		{"levels 128", map[string]any{"levels": 128, "seen": cells(262144), "frames": 1}, ".palette.levels"},
		{"short", map[string]any{"levels": 16, "seen": cells(500), "frames": 1}, ".palette.seen"},
		{"not base64", map[string]any{"levels": 16, "seen": "!!", "frames": 1}, ".palette.seen"},
		{"no frames", map[string]any{"levels": 16, "seen": cells(512)}, ".palette.frames"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			obs := m["obs"].([]any)
			img := -1
			for i, o := range obs {
				if o.(map[string]any)["kind"] == "image" {
					img = i
					o.(map[string]any)["palette"] = tc.palette
				}
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			man, err := engines.ParseManifest("manifest.json", out)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if p := man.Obs[img].Palette; p == nil || p.Levels != tc.palette["levels"] {
					t.Fatalf("palette not read: %+v", p)
				}
				return
			}
			if w := fmt.Sprintf("obs[%d]%s", img, tc.want); err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("error %v does not name %s", err, w)
			}
		})
	}
}

// A watch camera (a second camera only the stop reads) is read and checked:
// a named camera of a size > 0, not the policy's own, and a valid palette.
func TestVisionBundleWatchCamera(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(writeVisionBundle(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cells := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	palette := map[string]any{"levels": 16, "seen": cells(512), "frames": 100}
	cam := func(name string, w, h int) map[string]any {
		return map[string]any{"name": name, "width": w, "height": h}
	}
	for _, tc := range []struct {
		name     string
		watch    map[string]any
		ownCam   string // the image input's camera name ("": none)
		wantErrs []string
	}{
		{"valid", map[string]any{"camera": cam("corner", 96, 96), "palette": palette}, "topview", nil},
		{"no size", map[string]any{"camera": cam("corner", 0, 96), "palette": palette}, "", []string{`"watch_camera.camera"`}},
		{"no name", map[string]any{"camera": cam("", 96, 96), "palette": palette}, "", []string{`"watch_camera.camera"`}},
		{"the policy's own", map[string]any{"camera": cam("topview", 96, 96), "palette": palette}, "topview", []string{`"watch_camera.camera.name"`}},
		{"bad palette", map[string]any{"camera": cam("corner", 96, 96), "palette": map[string]any{"levels": 16, "seen": cells(3), "frames": 1}}, "", []string{`"watch_camera.palette.seen"`}},
		{"no palette", map[string]any{"camera": cam("corner", 96, 96)}, "", []string{`"watch_camera.palette.levels"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["watch_camera"] = tc.watch
			if tc.ownCam != "" {
				for _, o := range m["obs"].([]any) {
					if o.(map[string]any)["kind"] == "image" {
						o.(map[string]any)["camera"] = cam(tc.ownCam, 8, 8)
					}
				}
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			man, err := engines.ParseManifest("manifest.json", out)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if w := man.WatchCamera; w == nil || w.Camera.Name != "corner" || w.Palette.Levels != 16 {
					t.Fatalf("watch camera not read: %+v", w)
				}
				return
			}
			for _, w := range tc.wantErrs {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v does not name %s", err, w)
				}
			}
		})
	}
}
