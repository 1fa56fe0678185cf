package vpx

import (
	"fmt"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// testFrame fills an I420 frame with a moving gradient.
func testFrame(buf []byte, w, h, n int) {
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			buf[y*w+x] = byte(16 + (x+y+n*4)%220)
		}
	}
	cw, ch := w/2, h/2
	u := buf[w*h:]
	v := u[cw*ch:]
	for y := 0; y < ch; y++ {
		for x := 0; x < cw; x++ {
			u[y*cw+x] = byte(64 + (x+n)%128)
			v[y*cw+x] = byte(64 + (y+n)%128)
		}
	}
}

func TestEncoderProducesKeyframe(t *testing.T) {
	const w, h = 320, 240
	enc, err := NewEncoder(Config{Width: w, Height: h, FPS: 15})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	buf := make([]byte, I420Size(w, h))
	var dst []byte
	for i := 0; i < 5; i++ {
		testFrame(buf, w, h, i)
		frame, key, err := enc.Encode(buf, i == 3, dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) == 0 {
			t.Fatalf("frame %d: empty", i)
		}
		wantKey := i == 0 || i == 3
		if key != wantKey {
			t.Fatalf("frame %d: key=%v, want %v", i, key, wantKey)
		}
		fw, fh, ok := KeyframeInfo(frame)
		if ok != wantKey {
			t.Fatalf("frame %d: header says keyframe=%v", i, ok)
		}
		if ok && (fw != w || fh != h) {
			t.Fatalf("frame %d: keyframe size %dx%d, want %dx%d", i, fw, fh, w, h)
		}
		dst = frame
	}
}

func TestEncoderRejectsBadInput(t *testing.T) {
	if _, err := NewEncoder(Config{Width: 321, Height: 240}); err == nil {
		t.Fatal("odd width accepted")
	}
	enc, err := NewEncoder(Config{Width: 64, Height: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := enc.Encode(make([]byte, 10), false, nil); err == nil {
		t.Fatal("short buffer accepted")
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, _, err := enc.Encode(make([]byte, I420Size(64, 64)), false, nil); err != ErrClosed {
		t.Fatalf("Encode after Close: %v", err)
	}
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// sceneFrame is camera-like content: a static textured background with a
// 120×120 block moving across it.
func sceneFrame(buf []byte, w, h, n int) {
	testFrame(buf, w, h, 0)
	bx, by := (n*8)%(w-120), h/2-60
	for y := by; y < by+120; y++ {
		for x := bx; x < bx+120; x++ {
			buf[y*w+x] = byte(200 - (x - bx) - (y-by)/2)
		}
	}
}

// BenchmarkEncode640x480 reports the encode time of one 640×480 frame
// (15 fps, 1 Mbit/s CBR, one thread) as wall-clock and thread-CPU medians,
// for the default cpu_used -8 and the faster -12, on a full-frame moving
// gradient (worst case) and on camera-like content.
func BenchmarkEncode640x480(b *testing.B) {
	const w, h = 640, 480
	for _, content := range []struct {
		name string
		fill func([]byte, int, int, int)
	}{{"moving", testFrame}, {"scene", sceneFrame}} {
		for _, cpu := range []int{-8, -12} {
			b.Run(fmt.Sprintf("%s/cpu%d", content.name, cpu), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				enc, err := NewEncoder(Config{Width: w, Height: h, FPS: 15, BitrateKbps: 1000, CPUUsed: cpu})
				if err != nil {
					b.Fatal(err)
				}
				defer enc.Close()
				frames := make([][]byte, 16)
				for i := range frames {
					frames[i] = make([]byte, I420Size(w, h))
					content.fill(frames[i], w, h, i)
				}
				dst := make([]byte, I420Size(w, h))
				walls := make([]time.Duration, 0, b.N)
				cpus := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0, c0 := time.Now(), threadCPU()
					if _, _, err := enc.Encode(frames[i%len(frames)], false, dst); err != nil {
						b.Fatal(err)
					}
					cpus = append(cpus, threadCPU()-c0)
					walls = append(walls, time.Since(t0))
				}
				b.StopTimer()
				med := func(d []time.Duration) float64 {
					sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
					return float64(d[len(d)/2]) / 1e6
				}
				b.ReportMetric(med(walls), "median-ms")
				b.ReportMetric(med(cpus), "cpu-median-ms")
			})
		}
	}
}

func TestRGBToI420(t *testing.T) {
	const w, h = 4, 2
	rgb := make([]byte, w*h*3)
	for i := 0; i < w*h; i++ {
		rgb[i*3] = 255 // red
	}
	dst := make([]byte, I420Size(w, h))
	if err := RGBToI420(dst, rgb, w, h); err != nil {
		t.Fatal(err)
	}
	// BT.601 limited range red: Y 82, U 90, V 240.
	if y, u, v := dst[0], dst[w*h], dst[w*h+w*h/4]; y < 81 || y > 83 || u < 89 || u > 91 || v < 239 || v > 241 {
		t.Fatalf("red → Y %d U %d V %d, want 82 90 240", y, u, v)
	}
	for i := range rgb {
		rgb[i] = 255
	}
	RGBToI420(dst, rgb, w, h)
	if dst[0] != 235 || dst[w*h] != 128 {
		t.Fatalf("white → Y %d U %d", dst[0], dst[w*h])
	}
	if err := RGBToI420(dst, rgb[:5], w, h); err == nil {
		t.Fatal("short rgb accepted")
	}
	if err := RGBToI420(dst, rgb, 3, 2); err == nil {
		t.Fatal("odd width accepted")
	}
}

func BenchmarkRGBToI420_640x480(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rgb := make([]byte, 640*480*3)
	for i := range rgb {
		rgb[i] = byte(i * 7)
	}
	dst := make([]byte, I420Size(640, 480))
	c0 := threadCPU()
	for i := 0; i < b.N; i++ {
		RGBToI420(dst, rgb, 640, 480)
	}
	b.ReportMetric(float64(threadCPU()-c0)/1e6/float64(b.N), "cpu-ms/op")
}
