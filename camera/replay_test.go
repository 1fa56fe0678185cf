package camera

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

var imagenet = Preprocess{Resize: [2]int{104, 104}, Crop: [2]int{96, 96}, ChannelOrder: "RGB",
	Mean: [3]float32{0.485, 0.456, 0.406}, Std: [3]float32{0.229, 0.224, 0.225}}

func TestReplaySources(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		format PixelFormat
		w, h   int
	}{
		{"dir", Config{Replay: ReplayConfig{Dir: "testdata/frames"}}, FormatMJPEG, 160, 120},
		{"mjpeg", Config{Replay: ReplayConfig{File: "testdata/clip_160x120.mjpeg"}}, FormatMJPEG, 160, 120},
		{"yuyv", Config{Width: 160, Height: 120, Replay: ReplayConfig{File: "testdata/clip_160x120.yuyv"}}, FormatYUYV, 160, 120},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, err := Open(c.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if info := src.Info(); info.Format != c.format || info.Width != c.w || info.Height != c.h {
				t.Errorf("Info = %+v", info)
			}
			pipe, err := NewPipeline(imagenet)
			if err != nil {
				t.Fatal(err)
			}
			tensor := make([]float32, pipe.TensorLen(c.w, c.h))
			var f Frame
			var prev time.Time
			for i := 0; i < 3; i++ {
				if err := src.Read(ctx, &f); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if f.Seq != uint64(i+1) || f.Format != c.format || f.Width != c.w || f.Time.Before(prev) {
					t.Errorf("frame %d: %+v", i, f)
				}
				prev = f.Time
				img, err := pipe.Process(tensor, &f)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if img.Width != c.w || img.Height != c.h {
					t.Errorf("rgb %dx%d", img.Width, img.Height)
				}
			}
			if err := src.Read(ctx, &f); err != io.EOF {
				t.Errorf("after the last frame: %v, want io.EOF", err)
			}
			src.Close()
			if err := src.Read(ctx, &f); !errors.Is(err, ErrClosed) {
				t.Errorf("after Close: %v", err)
			}
		})
	}
}

func TestReplayLoopAndRate(t *testing.T) {
	src, err := OpenReplay(Config{Replay: ReplayConfig{Dir: "testdata/frames", Loop: true, Rate: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var f Frame
	for i := 0; i < 7; i++ {
		if err := src.Read(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
	}
	if f.Seq != 7 {
		t.Errorf("seq %d", f.Seq)
	}
	// A cancelled context stops a paced Read.
	slow := NewReplay("slow", []Frame{{Format: FormatRGB24, Width: 1, Height: 1, Data: []byte{1, 2, 3}}}, 0.001, true)
	_ = slow.Read(context.Background(), &f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := slow.Read(ctx, &f); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: %v", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); slow.Close() }()
	if err := slow.Read(context.Background(), &f); !errors.Is(err, ErrClosed) {
		t.Errorf("Close during a paced wait: %v", err)
	}
}

func TestReplayErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Replay: ReplayConfig{Dir: "testdata/nonexistent"}},
		{Replay: ReplayConfig{Dir: "."}}, // no images
		{Width: 100, Height: 100, Replay: ReplayConfig{File: "testdata/clip_160x120.yuyv"}},
		{Replay: ReplayConfig{File: "testdata/testsrc2_320x240.yuyv"}}, // default 640x480 does not divide
	} {
		if _, err := OpenReplay(cfg); err == nil {
			t.Errorf("%+v: no error", cfg.Replay)
		}
	}
	if _, err := SplitMJPEG([]byte("not a jpeg")); err == nil {
		t.Error("SplitMJPEG accepted junk")
	}
}

// TestCaptureReplay is the CI drive of the whole chain: replay → pipeline
// → history, with the live-view callback and the status.
func TestCaptureReplay(t *testing.T) {
	src, err := OpenReplay(Config{Replay: ReplayConfig{File: "testdata/clip_160x120.mjpeg"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pipe, err := NewPipeline(imagenet)
	if err != nil {
		t.Fatal(err)
	}
	hist := NewHistory(2, imagenet.TensorLen(160, 120))
	var views int
	var view RGB
	c := NewCapture(src, pipe, hist, CaptureOptions{OnFrame: func(img *RGB, f *Frame) {
		views++
		img.CopyTo(&view)
	}})
	if st := c.Status(); st.State != StateIdle || !st.Stale {
		t.Errorf("before start: %+v", st)
	}
	c.Start(context.Background())
	<-c.Done()
	st := c.Status()
	if st.State != StateEnded || st.Frames != 3 || views != 3 || st.BadFrames != 0 {
		t.Errorf("status after the recording: %+v (views %d)", st, views)
	}
	win := make([]Obs, 2)
	if err := hist.Window(win); err != nil {
		t.Fatal(err)
	}
	if win[0].Seq != 2 || win[1].Seq != 3 || !win[1].Time.After(win[0].Time) && !win[1].Time.Equal(win[0].Time) {
		t.Errorf("window seqs %d, %d", win[0].Seq, win[1].Seq)
	}
	if view.Width != 160 || view.Height != 120 {
		t.Errorf("live view %dx%d", view.Width, view.Height)
	}
	// Halt works with a cancelled context and is idempotent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Halt(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCaptureHaltAndStale(t *testing.T) {
	src, err := OpenReplay(Config{Replay: ReplayConfig{Dir: "testdata/frames", Loop: true, Rate: 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pipe, _ := NewPipeline(imagenet)
	hist := NewHistory(2, imagenet.TensorLen(160, 120))
	now := time.Now()
	clock := func() time.Time { return now }
	c := NewCapture(src, pipe, hist, CaptureOptions{StaleAfter: time.Second, Now: clock})
	c.Start(context.Background())
	for hist.Len() < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Halt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(); st.State != StateHalted || st.Frames < 2 {
		t.Errorf("after Halt: %+v", st)
	}
	// Ages come from the injected clock.
	last := hist.NewestTime()
	now = last.Add(500 * time.Millisecond)
	if st := c.Status(); st.Stale || st.Age != 500*time.Millisecond {
		t.Errorf("fresh: %+v", st)
	}
	now = last.Add(2 * time.Second)
	if st := c.Status(); !st.Stale {
		t.Errorf("stale not reported: %+v", st)
	}
}

func TestCaptureCountsBadFrames(t *testing.T) {
	frames := []Frame{
		{Format: FormatMJPEG, Width: 8, Height: 8, Data: []byte{0xff, 0xd8, 0xff, 0xd9}},
		{Format: FormatYUYV, Width: 4, Height: 2, Stride: 8, Data: make([]byte, 16)},
	}
	src := NewReplay("bad", frames, 0, false)
	pipe, _ := NewPipeline(Preprocess{Resize: [2]int{2, 2}, Std: [3]float32{1, 1, 1}})
	hist := NewHistory(2, 12)
	c := NewCapture(src, pipe, hist, CaptureOptions{})
	c.Start(context.Background())
	<-c.Done()
	if st := c.Status(); st.BadFrames != 1 || st.Frames != 1 || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
}
