package camera

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// The fuzz targets check that malformed input gives an error, never a
// panic or a hang. `make test-camera-fuzz` runs each briefly; run longer by
// hand with e.g. go test ./camera -run '^$' -fuzz '^FuzzJPEG$' -fuzztime 10m.

func FuzzYUYV(f *testing.F) {
	// Two rows of the recorded 160×120 frame keep the seeds small (large
	// seeds slow the mutator down a lot).
	frame := readFile(f, "clip_160x120.yuyv")[:160*2*2]
	f.Add(frame, 160, 2, 320)
	f.Add(frame[:300], 160, 2, 0)
	f.Add([]byte{1, 2, 3, 4}, 2, 1, 4)
	f.Add([]byte{}, 0, 0, 0)
	f.Add(frame, -2, 5, -1)
	f.Fuzz(func(t *testing.T, data []byte, w, h, stride int) {
		if w > 4096 || h > 4096 || w < -4096 || h < -4096 {
			return // keep allocations bounded; sizes are validated by config
		}
		var dst RGB
		err := YUYVToRGB(&dst, data, w, h, stride, RangeLimited)
		if err == nil && (dst.Width != w || dst.Height != h) {
			t.Fatalf("ok but %dx%d for %dx%d", dst.Width, dst.Height, w, h)
		}
		if err != nil && !errors.Is(err, ErrBadFrame) {
			t.Fatalf("error not ErrBadFrame: %v", err)
		}
		// Through the whole pipeline too.
		p, _ := NewPipeline(Preprocess{Resize: [2]int{8, 8}, Crop: [2]int{4, 4}, Std: [3]float32{1, 1, 1}})
		fr := Frame{Format: FormatYUYV, Width: w, Height: h, Stride: stride, Data: data}
		_, _ = p.Process(make([]float32, 48), &fr)
	})
}

func jpegSeeds(f *testing.F) {
	// The smallest fixture, with and without its Huffman tables.
	b := readFile(f, "frames/0001.jpg")
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(stripDHT(b))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xd9})
	f.Add([]byte{0xff, 0xd8, 0xff, 0xc0, 0x00, 0x02})
	f.Add([]byte{})
}

func FuzzJPEG(f *testing.F) {
	jpegSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if w, h, err := JPEGSize(data); err == nil && w*h > 4096*4096 {
			return // image/jpeg would allocate the planes; not the point here
		}
		var d JPEGDecoder
		var dst RGB
		if err := d.Decode(&dst, data); err != nil && !errors.Is(err, ErrBadFrame) {
			t.Fatalf("error not ErrBadFrame: %v", err)
		}
		_, _ = AddHuffmanTables(nil, data)
		_, _ = jpegEnd(data)
	})
}

func FuzzSplitMJPEG(f *testing.F) {
	f.Add(readFile(f, "clip_160x120.mjpeg")[:4000])
	jpegSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := SplitMJPEG(data)
		if err == nil {
			for _, fr := range frames {
				if len(fr.Data) == 0 || !bytes.HasPrefix(fr.Data, []byte{0xff, 0xd8}) {
					t.Fatal("empty or misaligned frame")
				}
			}
		}
	})
}

func FuzzMultipart(f *testing.F) {
	jpg := readFile(f, "frames/0001.jpg")
	var good bytes.Buffer
	good.WriteString("--b\r\nContent-Type: image/jpeg\r\nContent-Length: ")
	good.WriteString(itoa(len(jpg)))
	good.WriteString("\r\nX-Timestamp: 1763800000.123456\r\n\r\n")
	good.Write(jpg)
	good.WriteString("\r\n--b\r\nContent-Type: image/jpeg\r\n\r\n")
	good.Write(jpg)
	good.WriteString("\r\n--b--\r\n")
	f.Add(good.Bytes())
	f.Add([]byte("--b\r\nContent-Length: 99999999999\r\n\r\n"))
	f.Add([]byte("--b\r\nX-Timestamp: 1.2.3\r\nbogus\r\n\r\n"))
	f.Add([]byte("junk\n--b\r\n\r\n\xff\xd8\r\n--b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pr := newPartReader(bytes.NewReader(data), "b")
		var fr Frame
		for i := 0; i < 100; i++ {
			if _, err := pr.next(&fr); err != nil {
				return
			}
			if len(fr.Data) > len(data) {
				t.Fatalf("part of %d bytes from %d input bytes", len(fr.Data), len(data))
			}
		}
	})
}

// stripDHT removes the DHT segments before the first scan (as UVC cameras
// send MJPEG).
func stripDHT(b []byte) []byte {
	info, err := scanJPEGHeader(b)
	if err != nil {
		return b
	}
	out := append([]byte(nil), b[:2]...)
	for i := 2; i < info.sos; {
		n := int(b[i+2])<<8 | int(b[i+3])
		if b[i+1] != mDHT {
			out = append(out, b[i:i+2+n]...)
		}
		i += 2 + n
	}
	return append(out, b[info.sos:]...)
}

func itoa(n int) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// TestFuzzSeedsRunAsUnitTests keeps `go test` (without -fuzz) exercising
// the seed corpora (it does so by default; this guards the context use).
func TestReadAfterCancelIsPrompt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := NewReplay("x", []Frame{{Format: FormatRGB24, Width: 1, Height: 1, Data: []byte{0, 0, 0}}}, 0, true)
	if err := src.Read(ctx, &Frame{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}
