package camera

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// streamServer serves the replay frames of testdata/clip_160x120.mjpeg as
// mjpg-streamer does. ts(i) gives frame i's X-Timestamp (nil: none).
type streamServer struct {
	frames     [][]byte
	perConn    int  // frames per connection before hanging up (0: all, then end)
	noLength   bool // omit Content-Length
	stall      bool // after perConn frames keep the connection open silently
	onlyFirst  bool // later connections get headers and then silence
	ts         func(i int) time.Time
	conns      atomic.Int32
	boundary   string
	contentTyp string
}

func newStreamServer(t *testing.T) *streamServer {
	frames, err := SplitMJPEG(readFile(t, "clip_160x120.mjpeg"))
	if err != nil {
		t.Fatal(err)
	}
	s := &streamServer{boundary: "boundarydonotcross"}
	for _, f := range frames {
		s.frames = append(s.frames, f.Data)
	}
	return s
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.conns.Add(1)
	ct := s.contentTyp
	if ct == "" {
		ct = "multipart/x-mixed-replace;boundary=" + s.boundary
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "preamble to ignore\r\n")
	w.(http.Flusher).Flush()
	if s.onlyFirst && s.conns.Load() > 1 {
		<-r.Context().Done()
		return
	}
	n := s.perConn
	if n == 0 {
		n = len(s.frames)
	}
	for i := 0; i < n; i++ {
		f := s.frames[i%len(s.frames)]
		fmt.Fprintf(w, "--%s\r\nContent-Type: image/jpeg\r\n", s.boundary)
		if !s.noLength {
			fmt.Fprintf(w, "Content-Length: %d\r\n", len(f))
		}
		if s.ts != nil {
			ts := s.ts(i)
			fmt.Fprintf(w, "X-Timestamp: %d.%06d\r\n", ts.Unix(), ts.Nanosecond()/1000)
		}
		fmt.Fprint(w, "\r\n")
		w.Write(f)
		fmt.Fprint(w, "\r\n")
		w.(http.Flusher).Flush()
	}
	if s.stall {
		<-r.Context().Done()
		return
	}
	if s.perConn == 0 {
		fmt.Fprintf(w, "--%s--\r\n", s.boundary)
	}
}

func httpCfg(url string) Config {
	return Config{URL: url, ReadTimeout: 2 * time.Second, ReconnectMin: time.Millisecond, ReconnectMax: 5 * time.Millisecond}
}

func TestHTTPSourceFramesAndTimestamps(t *testing.T) {
	for _, noLength := range []bool{false, true} {
		t.Run(fmt.Sprintf("noLength=%v", noLength), func(t *testing.T) {
			now := time.Unix(1763800000, 500000000) // fake local clock (wall only is fine here)
			ss := newStreamServer(t)
			ss.noLength = noLength
			ss.ts = func(i int) time.Time { return now.Add(-time.Duration(10*(i+1)) * time.Millisecond) }
			srv := httptest.NewServer(ss)
			defer srv.Close()
			src := NewHTTPSource(httpCfg(srv.URL), nil, WithClock(func() time.Time { return now }))
			defer src.Close()
			pipe, _ := NewPipeline(imagenet)
			tensor := make([]float32, imagenet.TensorLen(160, 120))
			var f Frame
			for i := 0; i < 3; i++ {
				if err := src.Read(context.Background(), &f); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if f.Format != FormatMJPEG || f.Width != 160 || f.Height != 120 || f.Seq != uint64(i+1) {
					t.Errorf("frame %d: %v %dx%d seq %d", i, f.Format, f.Width, f.Height, f.Seq)
				}
				if string(f.Data) != string(ss.frames[i]) {
					t.Errorf("frame %d: %d bytes differ from the %d sent", i, len(f.Data), len(ss.frames[i]))
				}
				// Clocks agree: capture = receive − (receive − X-Timestamp).
				if want := now.Add(-time.Duration(10*(i+1)) * time.Millisecond); !f.Time.Equal(want) {
					t.Errorf("frame %d: time %v, want %v", i, f.Time, want)
				}
				if _, err := pipe.Process(tensor, &f); err != nil {
					t.Fatal(err)
				}
			}
			if info := src.Info(); info.Width != 160 || info.Format != FormatMJPEG {
				t.Errorf("Info %+v", info)
			}
		})
	}
}

func TestHTTPSourceClockSkew(t *testing.T) {
	now := time.Unix(1763800000, 0)
	ss := newStreamServer(t)
	// The sender's clock runs 10 s ahead; frame i is (30−10i) ms old.
	ss.ts = func(i int) time.Time { return now.Add(10*time.Second - time.Duration(30-10*i)*time.Millisecond) }
	srv := httptest.NewServer(ss)
	defer srv.Close()
	src := NewHTTPSource(httpCfg(srv.URL), nil, WithClock(func() time.Time { return now }))
	defer src.Close()
	var f Frame
	// d_i = −10s + (30−10i)ms; min so far is d_i itself (decreasing), so each
	// frame's latency relative to the minimum is 0.
	for i := 0; i < 3; i++ {
		if err := src.Read(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
		if !f.Time.Equal(now) {
			t.Errorf("frame %d: %v, want the receive time (offset-corrected latency 0)", i, f.Time.Sub(now))
		}
	}
}

func TestHTTPSourceReconnects(t *testing.T) {
	ss := newStreamServer(t)
	ss.perConn = 2 // hang up after two frames
	srv := httptest.NewServer(ss)
	defer srv.Close()
	src := NewHTTPSource(httpCfg(srv.URL), nil)
	defer src.Close()
	var f Frame
	var got, disconnects int
	for got < 5 {
		err := src.Read(context.Background(), &f)
		switch {
		case err == nil:
			got++
		case errors.Is(err, ErrDisconnected):
			disconnects++
			if disconnects > 10 {
				t.Fatal("too many disconnects")
			}
		default:
			t.Fatal(err)
		}
	}
	if src.Reconnects() < 2 || ss.conns.Load() < 3 {
		t.Errorf("reconnects %d, connections %d", src.Reconnects(), ss.conns.Load())
	}
}

func TestHTTPSourceErrors(t *testing.T) {
	t.Run("not multipart", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>")
		}))
		defer srv.Close()
		src := NewHTTPSource(httpCfg(srv.URL), nil)
		defer src.Close()
		err := src.Read(context.Background(), &Frame{})
		if !errors.Is(err, ErrDisconnected) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("404", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		src := NewHTTPSource(httpCfg(srv.URL), nil)
		defer src.Close()
		if err := src.Read(context.Background(), &Frame{}); !errors.Is(err, ErrDisconnected) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "multipart/x-mixed-replace; boundary=b")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done() // headers, then silence
		}))
		defer srv.Close()
		cfg := httpCfg(srv.URL)
		cfg.ReadTimeout = 50 * time.Millisecond
		src := NewHTTPSource(cfg, nil)
		defer src.Close()
		if err := src.Read(context.Background(), &Frame{}); !errors.Is(err, ErrTimeout) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
		srv.CloseClientConnections()
	})
	t.Run("close unblocks read", func(t *testing.T) {
		ss := newStreamServer(t)
		ss.perConn, ss.stall = 1, true
		srv := httptest.NewServer(ss)
		defer srv.Close()
		cfg := httpCfg(srv.URL)
		cfg.ReadTimeout = time.Minute
		src := NewHTTPSource(cfg, nil)
		var f Frame
		if err := src.Read(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(20 * time.Millisecond); src.Close() }()
		if err := src.Read(context.Background(), &f); !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
		srv.CloseClientConnections()
	})
	t.Run("cancel unblocks read", func(t *testing.T) {
		ss := newStreamServer(t)
		ss.perConn, ss.stall = 1, true
		srv := httptest.NewServer(ss)
		defer srv.Close()
		cfg := httpCfg(srv.URL)
		cfg.ReadTimeout = time.Minute
		src := NewHTTPSource(cfg, nil)
		defer src.Close()
		var f Frame
		if err := src.Read(context.Background(), &f); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := src.Read(ctx, &f); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v", err)
		}
		srv.CloseClientConnections()
	})
}

func TestPartReaderTimestamps(t *testing.T) {
	ts, ok := parseUnixTime([]byte("1763800000.123456"))
	if !ok || ts.Unix() != 1763800000 || ts.Nanosecond() != 123456000 {
		t.Errorf("parseUnixTime = %v %v", ts, ok)
	}
	for _, bad := range []string{"", "abc", "1.2.3", "-5", "1e9"} {
		if _, ok := parseUnixTime([]byte(bad)); ok {
			t.Errorf("parseUnixTime(%q) accepted", bad)
		}
	}
}

func TestHTTPSourceHaltReconnectsAtOnce(t *testing.T) {
	ss := newStreamServer(t)
	ss.perConn, ss.stall = 2, true
	srv := httptest.NewServer(ss)
	defer srv.Close()
	cfg := httpCfg(srv.URL)
	cfg.ReconnectMin, cfg.ReconnectMax = time.Hour, time.Hour // Halt must not wait for backoff
	src := NewHTTPSource(cfg, nil)
	defer src.Close()
	var f Frame
	if err := src.Read(context.Background(), &f); err != nil {
		t.Fatal(err)
	}
	if err := src.Halt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := src.Read(context.Background(), &f); err != nil {
		t.Fatalf("read after Halt: %v", err)
	}
	if ss.conns.Load() != 2 {
		t.Errorf("connections %d, want 2", ss.conns.Load())
	}
	srv.CloseClientConnections()
}

// Capture over a flaky stream: frames keep arriving across reconnects and
// the disconnects are counted.
func TestCaptureHTTPReconnect(t *testing.T) {
	ss := newStreamServer(t)
	ss.perConn = 2
	srv := httptest.NewServer(ss)
	defer srv.Close()
	src := NewHTTPSource(httpCfg(srv.URL), nil)
	defer src.Close()
	pipe, _ := NewPipeline(imagenet)
	hist := NewHistory(2, imagenet.TensorLen(160, 120))
	c := NewCapture(src, pipe, hist, CaptureOptions{})
	c.Start(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	for c.Status().Frames < 6 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	st := c.Status()
	if st.Frames < 6 || st.Disconnects < 2 || st.State != StateHalted {
		t.Errorf("status %+v", st)
	}
}

func TestHTTPSourceHaltInterruptsRead(t *testing.T) {
	ss := newStreamServer(t)
	ss.perConn, ss.stall, ss.onlyFirst = 1, true, true
	srv := httptest.NewServer(ss)
	defer srv.Close()
	cfg := httpCfg(srv.URL)
	cfg.ReadTimeout = time.Minute
	src := NewHTTPSource(cfg, nil)
	defer src.Close()
	var f Frame
	if err := src.Read(context.Background(), &f); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // halt until the blocked Read notices (no timing assumption)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				src.Halt(context.Background())
			}
		}
	}()
	if err := src.Read(context.Background(), &f); !errors.Is(err, ErrHalted) {
		t.Errorf("err = %v, want ErrHalted", err)
	}
	srv.CloseClientConnections()
}
