package camera

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readPNG(t testing.TB, name string) *RGB {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	var out RGB
	FromImage(&out, img)
	return &out
}

// diffStats compares two RGB images: max abs, mean abs and the 99th
// percentile of the per-sample absolute difference.
type diffStats struct {
	max  int
	mean float64
	p99  int
}

func compareRGB(t testing.TB, got, want *RGB) diffStats {
	t.Helper()
	if got.Width != want.Width || got.Height != want.Height {
		t.Fatalf("size %dx%d, want %dx%d", got.Width, got.Height, want.Width, want.Height)
	}
	var hist [256]int
	var sum, n int
	for y := 0; y < got.Height; y++ {
		g := got.Pix[y*got.Stride : y*got.Stride+3*got.Width]
		w := want.Pix[y*want.Stride : y*want.Stride+3*want.Width]
		for i := range g {
			d := int(g[i]) - int(w[i])
			if d < 0 {
				d = -d
			}
			hist[d]++
			sum += d
			n++
		}
	}
	var s diffStats
	s.mean = float64(sum) / float64(n)
	acc := 0
	s.p99 = -1
	for d, c := range hist {
		if c > 0 {
			s.max = d
		}
		acc += c
		if s.p99 < 0 && float64(acc) >= 0.99*float64(n) {
			s.p99 = d
		}
	}
	return s
}

// Tolerances against ffmpeg's own conversion (see docs/camera.md).
const (
	// YUYV: the same BT.601 limited-range formula; only rounding differs
	// (measured: max 1, mean 0.000).
	yuyvMaxAbs  = 1
	yuyvMeanAbs = 0.01
	// JPEG: Go's IDCT differs from ffmpeg's (measured: max 3, mean 0.007,
	// p99 0).
	jpegMaxAbs  = 4
	jpegP99     = 1
	jpegMeanAbs = 0.05
)

func TestGoldenYUYV(t *testing.T) {
	src := readFile(t, "testsrc2_320x240.yuyv")
	want := readPNG(t, "testsrc2_320x240_yuyv_ref.png")
	var got RGB
	if err := YUYVToRGB(&got, src, 320, 240, 0, RangeLimited); err != nil {
		t.Fatal(err)
	}
	s := compareRGB(t, &got, want)
	t.Logf("YUYV vs ffmpeg: max %d, mean %.3f, p99 %d", s.max, s.mean, s.p99)
	if s.max > yuyvMaxAbs || s.mean > yuyvMeanAbs {
		t.Errorf("YUYV vs ffmpeg: max %d (≤%d), mean %.3f (≤%.2f)", s.max, yuyvMaxAbs, s.mean, yuyvMeanAbs)
	}
	// Full range would be visibly wrong: make sure the test can tell.
	var full RGB
	_ = YUYVToRGB(&full, src, 320, 240, 0, RangeFull)
	if fs := compareRGB(t, &full, want); fs.mean < 2 {
		t.Errorf("full-range conversion is as close as limited (mean %.2f): the golden cannot tell them apart", fs.mean)
	}
}

func TestGoldenJPEG(t *testing.T) {
	want := readPNG(t, "testsrc2_320x240_jpg_ref.png")
	for _, name := range []string{"testsrc2_320x240.jpg", "testsrc2_320x240_nohuff.jpg"} {
		t.Run(name, func(t *testing.T) {
			var d JPEGDecoder
			var got RGB
			if err := d.Decode(&got, readFile(t, name)); err != nil {
				t.Fatal(err)
			}
			s := compareRGB(t, &got, want)
			t.Logf("%s vs ffmpeg: max %d, mean %.3f, p99 %d", name, s.max, s.mean, s.p99)
			if s.max > jpegMaxAbs || s.p99 > jpegP99 || s.mean > jpegMeanAbs {
				t.Errorf("max %d (≤%d), p99 %d (≤%d), mean %.3f (≤%.2f)", s.max, jpegMaxAbs, s.p99, jpegP99, s.mean, jpegMeanAbs)
			}
		})
	}
}

func TestNoHuffmanSplice(t *testing.T) {
	with := readFile(t, "testsrc2_320x240.jpg")
	without := readFile(t, "testsrc2_320x240_nohuff.jpg")
	if info, _ := scanJPEGHeader(without); info.hasDHT {
		t.Fatal("fixture still has a DHT segment")
	}
	var d JPEGDecoder
	var a, b RGB
	if err := d.Decode(&a, with); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(&b, without); err != nil {
		t.Fatal(err)
	}
	if s := compareRGB(t, &a, &b); s.max != 0 {
		t.Errorf("spliced standard tables decode differently from the original: max diff %d", s.max)
	}
	spliced, err := AddHuffmanTables(nil, without)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := scanJPEGHeader(spliced); !info.hasDHT {
		t.Error("AddHuffmanTables did not add a DHT segment")
	}
}

// preprocessTol is the largest allowed |Go − training| on the normalized
// tensor (units of one std; 1e-5·std·255 ≈ 0.0006 grey levels).
const preprocessTol = 1e-5

type goldenCase struct {
	Name  string `json:"name"`
	Input string `json:"input"`
	Spec  struct {
		Resize       [2]int     `json:"resize"`
		Crop         [2]int     `json:"crop"`
		ChannelOrder string     `json:"channel_order"`
		Mean         [3]float32 `json:"mean"`
		Std          [3]float32 `json:"std"`
	} `json:"spec"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
}

func loadGoldenCases(t testing.TB) []goldenCase {
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(readFile(t, "preprocess_golden.json"), &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

func readF32(t testing.TB, name string) []float32 {
	b := readFile(t, name)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestGoldenPreprocess(t *testing.T) {
	for _, c := range loadGoldenCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			spec := Preprocess(c.Spec)
			p, err := NewPreprocessor(spec)
			if err != nil {
				t.Fatal(err)
			}
			img := readPNG(t, c.Input)
			want := readF32(t, c.File)
			if h, w := spec.OutputSize(img.Width, img.Height); h != c.Shape[1] || w != c.Shape[2] {
				t.Fatalf("output %dx%d, want %v", h, w, c.Shape)
			}
			got := make([]float32, spec.TensorLen(img.Width, img.Height))
			if len(got) != len(want) {
				t.Fatalf("len %d, want %d", len(got), len(want))
			}
			if err := p.Apply(got, img); err != nil {
				t.Fatal(err)
			}
			var maxd float64
			for i := range got {
				maxd = math.Max(maxd, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("%s: max |Go − preprocess.py| = %.3g", c.Name, maxd)
			if maxd > preprocessTol {
				t.Errorf("max abs diff %.3g > %g", maxd, preprocessTol)
			}
		})
	}
}

func TestStripDHTHelper(t *testing.T) {
	b := stripDHT(readFile(t, "frames/0001.jpg"))
	if info, err := scanJPEGHeader(b); err != nil || info.hasDHT {
		t.Fatalf("stripDHT: %v %v", info, err)
	}
	var d JPEGDecoder
	if err := d.Decode(&RGB{}, b); err != nil {
		t.Fatal(err)
	}
}

func TestYUYVStrideAndErrors(t *testing.T) {
	src := readFile(t, "clip_160x120.yuyv")[:160*120*2]
	var want RGB
	if err := YUYVToRGB(&want, src, 160, 120, 0, RangeLimited); err != nil {
		t.Fatal(err)
	}
	// The same picture with 64 padding bytes per row.
	padded := make([]byte, (320+64)*120)
	for y := 0; y < 120; y++ {
		copy(padded[y*384:], src[y*320:(y+1)*320])
	}
	var got RGB
	if err := YUYVToRGB(&got, padded, 160, 120, 384, RangeLimited); err != nil {
		t.Fatal(err)
	}
	if s := compareRGB(t, &got, &want); s.max != 0 {
		t.Errorf("stride changes the result: %+v", s)
	}
	for _, c := range []struct{ w, h, stride, n int }{{3, 2, 0, 12}, {0, 2, 0, 0}, {4, 2, 6, 16}, {4, 2, 0, 15}} {
		if err := YUYVToRGB(&got, make([]byte, c.n), c.w, c.h, c.stride, RangeLimited); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	// Known values: limited-range black, white, and saturated red.
	var px RGB
	_ = YUYVToRGB(&px, []byte{16, 128, 235, 128, 81, 90, 81, 240}, 4, 1, 0, RangeLimited)
	// (81, 90, 240) is BT.601 red rounded to integers: R = 254.4.
	if want := []byte{0, 0, 0, 255, 255, 255, 254, 0, 0, 254, 0, 0}; string(px.Pix) != string(want) {
		t.Errorf("BT.601 limited: got %v, want %v", px.Pix, want)
	}
}

func TestJPEGVariants(t *testing.T) {
	// Go's encoder writes 4:2:0; grayscale decodes to image.Gray.
	img := readPNG(t, "testsrc2_320x240_yuyv_ref.png")
	for _, gray := range []bool{false, true} {
		var buf bytes.Buffer
		var src image.Image = img
		if gray {
			g := image.NewGray(img.Bounds())
			draw.Draw(g, g.Bounds(), img, image.Point{}, draw.Src)
			src = g
		}
		if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 95}); err != nil {
			t.Fatal(err)
		}
		var d JPEGDecoder
		var got RGB
		if err := d.Decode(&got, buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		want := &RGB{}
		ref, _ := jpeg.Decode(bytes.NewReader(buf.Bytes()))
		FromImage(want, ref)
		if s := compareRGB(t, &got, want); s.max > 2 {
			t.Errorf("gray=%v: differs from image/jpeg + color conversion by %+v", gray, s)
		}
	}
	if w, h, err := JPEGSize(readFile(t, "testsrc2_640x480.jpg")); err != nil || w != 640 || h != 480 {
		t.Errorf("JPEGSize = %d, %d, %v", w, h, err)
	}
}

func TestPreprocessRejectsInconsistentRGB(t *testing.T) {
	p, _ := NewPreprocessor(imagenet)
	dst := make([]float32, imagenet.TensorLen(10, 10))
	for _, img := range []*RGB{{Width: 10, Height: 10, Stride: 30, Pix: make([]byte, 299)}, {Width: 10, Height: 10, Stride: 20, Pix: make([]byte, 300)}, {}} {
		if err := p.Apply(dst, img); err == nil {
			t.Errorf("%dx%d stride %d with %d bytes accepted", img.Width, img.Height, img.Stride, len(img.Pix))
		}
	}
	if err := p.Apply(dst[:5], NewRGB(10, 10)); err == nil {
		t.Error("short tensor accepted")
	}
}

// TestFramesRuntimeGolden pins what the camera loop decodes from the
// replay test frames (testdata/frames, 160×120) and from an odd-sized one
// (odd_97x95.jpg), all 4:2:0 JPEG, to testdata/frames_runtime.rgb and
// odd_97x95_runtime.rgb: the frames one after another, raw RGB. The
// training toolkit's palette decodes demonstration frames as the runtime
// does and checks itself against these files
// (training/tests/test_palette.py). UPDATE_GOLDEN=1 rewrites them.
func TestFramesRuntimeGolden(t *testing.T) {
	frames, err := filepath.Glob(filepath.Join("testdata", "frames", "*.jpg"))
	if err != nil || len(frames) == 0 {
		t.Fatalf("test frames: %v (%d files)", err, len(frames))
	}
	for _, tc := range []struct {
		golden string
		files  []string
	}{
		{"frames_runtime.rgb", frames},
		{"odd_97x95_runtime.rgb", []string{filepath.Join("testdata", "odd_97x95.jpg")}},
	} {
		var got []byte
		var rgb RGB
		var dec JPEGDecoder
		for _, name := range tc.files {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f := Frame{Format: FormatMJPEG, Data: b}
			if err := ToRGB(&rgb, &f, &dec, RangeLimited); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for y := 0; y < rgb.Height; y++ {
				got = append(got, rgb.Pix[y*rgb.Stride:y*rgb.Stride+3*rgb.Width]...)
			}
		}
		golden := filepath.Join("testdata", tc.golden)
		if os.Getenv("UPDATE_GOLDEN") == "1" {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if want := readFile(t, tc.golden); !bytes.Equal(got, want) {
			t.Errorf("decoded %d frames (%d bytes) differ from %s (%d bytes)", len(tc.files), len(got), golden, len(want))
		}
	}
}
