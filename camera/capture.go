package camera

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Capture runs Source → Pipeline → History in one goroutine: it reads
// every frame, converts it, pushes its tensor into the history and hands
// the RGB image to an optional callback (the live view). It counts errors
// and reports staleness; it never stops on a frame error, only on Halt, on
// its context, or at the end of a finite replay.
type Capture struct {
	src  Source
	pipe *Pipeline
	hist *History
	opt  CaptureOptions

	mu      sync.Mutex
	st      Status
	cancel  context.CancelFunc
	done    chan struct{}
	lastLog time.Time
}

// CaptureOptions configures a Capture. Zero values take defaults.
type CaptureOptions struct {
	// StaleAfter is the frame age beyond which Status reports Stale
	// (default 500ms).
	StaleAfter time.Duration
	// OnFrame, when set, is called in the capture goroutine with each
	// decoded RGB image and its frame. Both are reused after it returns:
	// copy what you keep (RGB.CopyTo). It must be quick.
	OnFrame func(img *RGB, f *Frame)
	// Logger gets rate-limited error logs (default: discard).
	Logger *slog.Logger
	// Now is the clock for ages (default time.Now).
	Now func() time.Time
}

// State is a capture's condition.
type State string

// Capture states.
const (
	StateIdle      State = "idle"      // not started
	StateStarting  State = "starting"  // no frame yet
	StateStreaming State = "streaming" // frames arriving
	StateFailing   State = "failing"   // the last read failed (timeout, disconnected); retrying
	StateEnded     State = "ended"     // a finite replay ended
	StateHalted    State = "halted"    // stopped by Halt or its context
)

// Status is a snapshot of a capture's health for the runtime and
// telemetry.
type Status struct {
	State     State
	Info      Info
	LastFrame time.Time     // capture time of the newest frame (zero: none)
	Age       time.Duration // now − LastFrame (or since start when none)
	// Stale is true when no frame is younger than StaleAfter: the policy
	// must not act on the camera's view.
	Stale       bool
	Frames      uint64 // frames pushed into the history
	BadFrames   uint64 // frames that failed to decode or preprocess
	Timeouts    uint64
	Disconnects uint64 // disconnect and reconnect-failure errors
	LastError   string
	started     time.Time
}

// NewCapture wires src, pipe and hist. hist's tensor length must match
// the pipeline's output for the source's frame size.
func NewCapture(src Source, pipe *Pipeline, hist *History, opt CaptureOptions) *Capture {
	if opt.StaleAfter <= 0 {
		opt.StaleAfter = DefaultConfig().StaleAfter
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Capture{src: src, pipe: pipe, hist: hist, opt: opt, st: Status{State: StateIdle}}
}

// Start runs the capture loop in a goroutine until Halt or ctx ends.
// Calling Start on a running capture is an error-free no-op.
func (c *Capture) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	c.st.State = StateStarting
	c.st.started = c.opt.Now()
	go c.run(ctx, c.done)
}

// Done is closed when the capture loop has exited (nil before Start).
func (c *Capture) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// haltWait bounds how long Halt waits for the capture goroutine.
const haltWait = 3 * time.Second

// Halt stops the loop, waits for it to exit (at most 3s), and halts the
// source. It works with a cancelled ctx (the source halt runs without
// cancellation) and is idempotent. The history keeps its frames.
func (c *Capture) Halt(ctx context.Context) error {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		// Sources return from Read within about a second of cancellation;
		// wait for that even when ctx is already cancelled.
		t := time.NewTimer(haltWait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	err := c.src.Halt(context.WithoutCancel(ctx))
	c.mu.Lock()
	if c.st.State != StateEnded {
		c.st.State = StateHalted
	}
	c.mu.Unlock()
	return err
}

// Status returns the current status.
func (c *Capture) Status() Status {
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	now := c.opt.Now()
	if st.LastFrame.IsZero() {
		if !st.started.IsZero() {
			st.Age = now.Sub(st.started)
		}
		st.Stale = true
	} else {
		st.Age = now.Sub(st.LastFrame)
		st.Stale = st.Age > c.opt.StaleAfter
	}
	return st
}

func (c *Capture) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	var f Frame
	tensor := make([]float32, c.hist.TensorLen())
	for {
		err := c.src.Read(ctx, &f)
		if err == nil {
			var img *RGB
			img, err = c.pipe.RGB(&f)
			if err == nil {
				err = c.pipe.Tensor(tensor, img)
			}
			if err == nil {
				_ = c.hist.Push(f.Time, f.Seq, tensor)
				if c.opt.OnFrame != nil {
					c.opt.OnFrame(img, &f)
				}
				c.mu.Lock()
				c.st.Frames++
				c.st.LastFrame = f.Time
				c.st.State = StateStreaming
				c.st.Info = c.src.Info()
				c.mu.Unlock()
				continue
			}
			c.fail(err, &c.st.BadFrames)
			continue
		}
		switch {
		case ctx.Err() != nil, errors.Is(err, ErrClosed):
			return
		case errors.Is(err, ErrHalted):
			continue // someone halted the source directly; it restarts on Read
		case errors.Is(err, io.EOF):
			c.mu.Lock()
			c.st.State = StateEnded
			c.mu.Unlock()
			return
		case errors.Is(err, ErrTimeout):
			c.fail(err, &c.st.Timeouts)
		default:
			c.fail(err, &c.st.Disconnects)
		}
	}
}

// fail counts an error and logs it at most every 5 seconds.
func (c *Capture) fail(err error, counter *uint64) {
	c.mu.Lock()
	*counter++
	c.st.LastError = err.Error()
	if counter != &c.st.BadFrames {
		c.st.State = StateFailing
	}
	now := c.opt.Now()
	logIt := now.Sub(c.lastLog) >= 5*time.Second
	if logIt {
		c.lastLog = now
	}
	c.mu.Unlock()
	if logIt {
		c.opt.Logger.Warn("camera: capture error", "err", err)
	}
}
