package camera

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxTrustedLatency is the largest receive-minus-X-Timestamp difference
// still taken at face value (clocks in sync); see HTTPSource.
const maxTrustedLatency = time.Second

// HTTPSource reads an MJPEG stream served over HTTP as
// multipart/x-mixed-replace (IP cameras, mjpg-streamer, the simulated
// robot). Each part is one JPEG frame; parts may carry Content-Length
// (used when present) and X-Timestamp.
//
// # Timestamps
//
// X-Timestamp is the sender's wall clock (Unix seconds with a fraction)
// at capture. Read maps it to the local monotonic clock as
// capture = receive − latency, where receive is the local time.Now() when
// the part was read (it carries the monotonic reading) and latency is:
//
//   - d = receiveWall − X-Timestamp, when every d seen on this connection
//     has been ≥ 0 and this one is ≤ 1s: the clocks agree (same host, or
//     NTP) and d is the true capture-to-receive latency;
//   - otherwise d − min(d) over this connection: the clocks disagree, so
//     the smallest delay seen is taken as the clock offset (plus the
//     minimum transport delay, which is then not counted).
//
// Latency is clamped to [0, read timeout]. Without X-Timestamp the capture
// time is the receive time. The offset estimate restarts on reconnect.
//
// # Errors and reconnects
//
// A dropped connection, an HTTP error or a read timeout closes the
// connection; Read returns the error (wrapping ErrDisconnected or
// ErrTimeout) and the next Read reconnects after an exponential backoff
// between reconnect_min and reconnect_max. A malformed JPEG part returns
// ErrBadFrame and keeps the connection.
type HTTPSource struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	now    func() time.Time

	mu   sync.Mutex // guards conn
	conn *httpConn

	closed     atomic.Bool
	closeOnce  sync.Once
	done       chan struct{} // closed by Close: wakes a backoff sleep
	bo         backoff
	nextTry    time.Time // guarded by mu
	seq        uint64
	reconnects atomic.Int64
	gen        atomic.Uint64 // bumped by Halt: a Read in progress returns ErrHalted
	width      atomic.Int64
	height     atomic.Int64
}

type httpConn struct {
	cancel   context.CancelFunc
	body     interface{ Close() error }
	pr       *partReader
	watchdog *time.Timer
	timedOut atomic.Bool
	minD     time.Duration
	haveMin  bool
	allSane  bool
}

func (c *httpConn) close() {
	c.cancel()
	c.watchdog.Stop()
	_ = c.body.Close()
}

var _ SourceCloser = (*HTTPSource)(nil)

// HTTPOption configures an HTTPSource.
type HTTPOption func(*HTTPSource)

// WithHTTPClient sets the client (default: a client with no overall
// timeout; the source enforces its own).
func WithHTTPClient(c *http.Client) HTTPOption { return func(s *HTTPSource) { s.client = c } }

// WithClock sets the clock used for receive times (default time.Now). It
// must return times with a monotonic reading in production.
func WithClock(now func() time.Time) HTTPOption { return func(s *HTTPSource) { s.now = now } }

// NewHTTPSource returns a source for cfg.URL (cfg as after WithDefaults).
// It connects on the first Read.
func NewHTTPSource(cfg Config, log *slog.Logger, opts ...HTTPOption) *HTTPSource {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &HTTPSource{
		cfg:    cfg,
		log:    log,
		client: &http.Client{},
		now:    time.Now,
		bo:     backoff{min: cfg.ReconnectMin, max: cfg.ReconnectMax},
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Info implements Source. The size is known after the first frame.
func (s *HTTPSource) Info() Info {
	return Info{Name: s.cfg.URL, Format: FormatMJPEG, Width: int(s.width.Load()), Height: int(s.height.Load())}
}

// Reconnects counts connections made after the first.
func (s *HTTPSource) Reconnects() int64 { return s.reconnects.Load() }

func (s *HTTPSource) connect(ctx context.Context) (*httpConn, error) {
	cctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	t := time.AfterFunc(s.cfg.ConnectTimeout, cancel)
	defer t.Stop()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (*httpConn, error) {
		cancel()
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("HTTP status %s", resp.Status))
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/x-mixed-replace" || params["boundary"] == "" {
		return fail(fmt.Errorf("Content-Type %q is not multipart/x-mixed-replace with a boundary — is this an MJPEG stream URL?", resp.Header.Get("Content-Type")))
	}
	c := &httpConn{cancel: cancel, body: resp.Body, pr: newPartReader(resp.Body, params["boundary"]), allSane: true}
	c.watchdog = time.AfterFunc(time.Hour, func() { c.timedOut.Store(true); cancel() })
	c.watchdog.Stop()
	return c, nil
}

// sleepCtx waits d, or until ctx ends (its error) or done is closed
// (ErrClosed).
func sleepCtx(ctx context.Context, d time.Duration, done <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrClosed
	case <-t.C:
		return nil
	}
}

// Read implements Source.
func (s *HTTPSource) Read(ctx context.Context, f *Frame) error {
	gen := s.gen.Load()
	for {
		if s.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		c, next := s.conn, s.nextTry
		s.mu.Unlock()
		if c == nil {
			if err := sleepCtx(ctx, time.Until(next), s.done); err != nil {
				return err
			}
			var err error
			c, err = s.connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				d := s.retryLater()
				return fmt.Errorf("%w: connect %s: %v (retrying in %v)", ErrDisconnected, s.cfg.URL, err, d)
			}
			s.mu.Lock()
			if s.closed.Load() || s.gen.Load() != gen {
				s.mu.Unlock()
				c.close()
				if s.closed.Load() {
					return ErrClosed
				}
				return ErrHalted
			}
			if s.seq > 0 {
				s.reconnects.Add(1)
			}
			s.conn = c
			s.mu.Unlock()
		}
		err := s.readFrame(ctx, c, f)
		if err == nil {
			s.bo.reset()
			return nil
		}
		if errors.Is(err, ErrBadFrame) {
			return err
		}
		s.drop(c)
		switch {
		case s.closed.Load():
			return ErrClosed
		case ctx.Err() != nil:
			return ctx.Err()
		case s.gen.Load() != gen:
			return ErrHalted
		}
		d := s.retryLater()
		if c.timedOut.Load() {
			return fmt.Errorf("%w: %s (%v); reconnecting in %v", ErrTimeout, s.cfg.URL, s.cfg.ReadTimeout, d)
		}
		return fmt.Errorf("%w: %s: %v; reconnecting in %v", ErrDisconnected, s.cfg.URL, err, d)
	}
}

func (s *HTTPSource) readFrame(ctx context.Context, c *httpConn, f *Frame) error {
	c.watchdog.Reset(s.cfg.ReadTimeout)
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, c.cancel)
	}
	for skipped := 0; ; skipped++ {
		h, err := c.pr.next(f)
		if err != nil {
			c.watchdog.Stop()
			if stop != nil {
				stop()
			}
			if err == bufio.ErrBufferFull {
				err = errors.New("line too long")
			}
			return err
		}
		if !h.jpeg && skipped < 16 {
			continue // not a frame (e.g. a text part); skip it
		}
		recv := s.now()
		c.watchdog.Stop()
		if stop != nil {
			stop()
		}
		w, hh, err := JPEGSize(f.Data)
		if err != nil {
			return err
		}
		s.width.Store(int64(w))
		s.height.Store(int64(hh))
		s.seq++
		f.Format, f.Width, f.Height, f.Stride, f.Seq = FormatMJPEG, w, hh, 0, s.seq
		f.Time = s.captureTime(c, recv, h)
		return nil
	}
}

// captureTime maps a part's X-Timestamp to the local monotonic clock (see
// the type's documentation).
func (s *HTTPSource) captureTime(c *httpConn, recv time.Time, h part) time.Time {
	if !h.hasTS {
		return recv
	}
	d := recv.Round(0).Sub(h.ts) // wall clock difference
	if !c.haveMin || d < c.minD {
		c.minD, c.haveMin = d, true
	}
	if d < 0 || d > maxTrustedLatency {
		c.allSane = false
	}
	lat := d
	if !c.allSane {
		lat = d - c.minD
	}
	lat = max(0, min(lat, s.cfg.ReadTimeout))
	return recv.Add(-lat)
}

// retryLater schedules the next connection attempt after the backoff.
func (s *HTTPSource) retryLater() time.Duration {
	d := s.bo.next()
	s.mu.Lock()
	s.nextTry = time.Now().Add(d)
	s.mu.Unlock()
	return d
}

func (s *HTTPSource) drop(c *httpConn) {
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	c.close()
}

// Halt implements Source: it drops the connection (a Read in progress
// returns ErrHalted); the next Read reconnects at once.
func (s *HTTPSource) Halt(context.Context) error {
	s.gen.Add(1)
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.nextTry = time.Time{}
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
	return nil
}

// Close implements io.Closer; idempotent.
func (s *HTTPSource) Close() error {
	s.closed.Store(true)
	s.closeOnce.Do(func() { close(s.done) })
	return s.Halt(context.Background())
}
