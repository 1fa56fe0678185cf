//go:build linux

package camera

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is this OS thread's CPU time (user+system). On a shared,
// overloaded machine it measures the work, not the wait for a core.
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// frame640 returns 640×480 test frames: the committed 4:2:2 JPEG and a
// YUYV frame made by doubling the 320×240 testsrc2 fixture.
func frame640(t testing.TB, format PixelFormat) Frame {
	if format == FormatMJPEG {
		return Frame{Format: FormatMJPEG, Width: 640, Height: 480, Data: readFile(t, "testsrc2_640x480.jpg")}
	}
	small := readFile(t, "testsrc2_320x240.yuyv")
	big := make([]byte, 640*480*2)
	for y := 0; y < 480; y++ {
		src := small[(y/2)*640:]
		dst := big[y*1280:]
		for x := 0; x < 320; x += 2 { // one YUYV macropixel = 2 pixels
			m := src[2*x : 2*x+4]
			copy(dst[4*x:], []byte{m[0], m[1], m[0], m[3]})
			copy(dst[4*x+4:], []byte{m[2], m[1], m[2], m[3]})
		}
	}
	return Frame{Format: FormatYUYV, Width: 640, Height: 480, Stride: 1280, Data: big}
}

// TestPipelineAllocs: the YUYV path (conversion + preprocessing) and the
// RGB path allocate nothing after warm-up; MJPEG allocates only inside
// image/jpeg (reported by the benchmark).
func TestPipelineAllocs(t *testing.T) {
	pipe, err := NewPipeline(imagenet)
	if err != nil {
		t.Fatal(err)
	}
	f := frame640(t, FormatYUYV)
	tensor := make([]float32, pipe.TensorLen(640, 480))
	if _, err := pipe.Process(tensor, &f); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(5, func() { _, _ = pipe.Process(tensor, &f) }); a != 0 {
		t.Errorf("YUYV pipeline: %v allocations per frame, want 0", a)
	}
	rgb := Frame{Format: FormatRGB24, Width: 640, Height: 480, Data: make([]byte, 640*480*3)}
	_, _ = pipe.Process(tensor, &rgb)
	if a := testing.AllocsPerRun(5, func() { _, _ = pipe.Process(tensor, &rgb) }); a != 0 {
		t.Errorf("RGB pipeline: %v allocations per frame, want 0", a)
	}
	// Replay Read into a reused frame allocates nothing either.
	src := NewReplay("alloc", []Frame{f}, 0, true)
	var g Frame
	_ = src.Read(t.Context(), &g)
	if a := testing.AllocsPerRun(5, func() { _ = src.Read(t.Context(), &g) }); a != 0 {
		t.Errorf("replay Read: %v allocations per frame, want 0", a)
	}
}

// benchPipeline reports the median per-frame time (ms) besides Go's mean.
func benchPipeline(b *testing.B, format PixelFormat) {
	pipe, err := NewPipeline(imagenet)
	if err != nil {
		b.Fatal(err)
	}
	f := frame640(b, format)
	tensor := make([]float32, pipe.TensorLen(640, 480))
	if _, err := pipe.Process(tensor, &f); err != nil {
		b.Fatal(err)
	}
	times := make([]time.Duration, 0, b.N)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := pipe.Process(tensor, &f); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	cpu := threadCPU() - cpu0
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e6, "median-ms")
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkPipelineYUYV640: 640×480 YUYV → RGB → 104×104 → crop 96×96
// normalized CHW tensor.
func BenchmarkPipelineYUYV640(b *testing.B) { benchPipeline(b, FormatYUYV) }

// BenchmarkPipelineMJPEG640: 640×480 4:2:2 JPEG → RGB → 96×96 tensor.
func BenchmarkPipelineMJPEG640(b *testing.B) { benchPipeline(b, FormatMJPEG) }

// BenchmarkPreprocess640: only the resize/crop/normalize step.
func BenchmarkPreprocess640(b *testing.B) {
	pre, _ := NewPreprocessor(imagenet)
	img := NewRGB(640, 480)
	tensor := make([]float32, imagenet.TensorLen(640, 480))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = pre.Apply(tensor, img)
	}
}

func BenchmarkYUYVToRGB640(b *testing.B) {
	f := frame640(b, FormatYUYV)
	var dst RGB
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = YUYVToRGB(&dst, f.Data, 640, 480, 1280, RangeLimited)
	}
}
