package camera

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxReplayBytes bounds a recording held in memory.
const maxReplayBytes = 1 << 30

// Replay serves recorded frames: a directory of images, an MJPEG dump
// (concatenated JPEGs, as `ffmpeg -f mjpeg` or `curl` of a stream body
// writes) or a raw YUYV dump, once or looping, at a fixed rate. It is the
// camera stand-in for tests, CI and offline evaluation: frames go through
// the same Pipeline as live ones. The recording is loaded into memory at
// open. Each Read stamps the frame with the current monotonic time.
type Replay struct {
	name   string
	frames []Frame
	rate   float64
	loop   bool
	now    func() time.Time

	mu     sync.Mutex // guards the fields below (Halt may run concurrently)
	i      int
	seq    uint64
	anchor time.Time // pacing origin; zero = restart pacing
	k      int64     // frames emitted since anchor

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
}

var _ SourceCloser = (*Replay)(nil)

// ReplayOption configures a Replay.
type ReplayOption func(*Replay)

// ReplayClock sets the clock that stamps frames and paces them (default
// time.Now), for tests that need deterministic capture times. Pacing
// still sleeps on real timers; use rate 0 with a fake clock.
func ReplayClock(now func() time.Time) ReplayOption { return func(r *Replay) { r.now = now } }

// NewReplay returns a source serving copies of frames (which it keeps;
// do not modify them) at rate frames per second (0: as fast as read).
func NewReplay(name string, frames []Frame, rate float64, loop bool, opts ...ReplayOption) *Replay {
	r := &Replay{name: name, frames: frames, rate: rate, loop: loop, now: time.Now, done: make(chan struct{})}
	for _, o := range opts {
		o(r)
	}
	return r
}

// OpenReplay loads the recording cfg.Replay names.
func OpenReplay(cfg Config) (*Replay, error) {
	cfg = cfg.WithDefaults()
	r := cfg.Replay
	var frames []Frame
	var err error
	name := r.Dir
	switch {
	case r.Dir != "":
		frames, err = loadImageDir(r.Dir)
	case r.File != "":
		name = r.File
		frames, err = loadDump(r.File, cfg.Width, cfg.Height)
	default:
		err = fmt.Errorf("camera: replay: set replay.dir or replay.file")
	}
	if err != nil {
		return nil, err
	}
	return NewReplay(name, frames, r.Rate, r.Loop), nil
}

func loadImageDir(dir string) ([]Frame, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("camera: replay: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".jpg", ".jpeg", ".png":
			if e.Type().IsRegular() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("camera: replay: no .jpg, .jpeg or .png images in %s", dir)
	}
	frames := make([]Frame, 0, len(names))
	for _, n := range names {
		p := filepath.Join(dir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("camera: replay: %w", err)
		}
		if strings.EqualFold(filepath.Ext(n), ".png") {
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("camera: replay: %s: %w", p, err)
			}
			var rgb RGB
			FromImage(&rgb, img)
			frames = append(frames, Frame{Format: FormatRGB24, Width: rgb.Width, Height: rgb.Height, Stride: rgb.Stride, Data: rgb.Pix})
			continue
		}
		w, h, err := JPEGSize(b)
		if err != nil {
			return nil, fmt.Errorf("camera: replay: %s: %s", p, trimPkg(err))
		}
		frames = append(frames, Frame{Format: FormatMJPEG, Width: w, Height: h, Data: b})
	}
	return frames, nil
}

func loadDump(path string, w, h int) ([]Frame, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("camera: replay: %w", err)
	}
	if st.Size() > maxReplayBytes {
		return nil, fmt.Errorf("camera: replay: %s is %d bytes; recordings over %d bytes are not loaded", path, st.Size(), maxReplayBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("camera: replay: %w", err)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yuyv", ".yuv":
		frames, err := SplitYUYV(b, w, h)
		if err != nil {
			return nil, fmt.Errorf("camera: replay: %s: %s", path, trimPkg(err))
		}
		return frames, nil
	default:
		frames, err := SplitMJPEG(b)
		if err != nil {
			return nil, fmt.Errorf("camera: replay: %s: %s", path, trimPkg(err))
		}
		return frames, nil
	}
}

// SplitYUYV cuts a raw YUYV dump of w×h frames into frames (sharing b).
func SplitYUYV(b []byte, w, h int) ([]Frame, error) {
	if w <= 0 || h <= 0 || w%2 != 0 {
		return nil, fmt.Errorf("%w: YUYV size %dx%d (set width and height; width must be even)", ErrBadFrame, w, h)
	}
	n := w * h * 2
	if len(b) == 0 || len(b)%n != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %dx%d YUYV frames (%d bytes each)", ErrBadFrame, len(b), w, h, n)
	}
	frames := make([]Frame, 0, len(b)/n)
	for off := 0; off < len(b); off += n {
		frames = append(frames, Frame{Format: FormatYUYV, Width: w, Height: h, Stride: 2 * w, Data: b[off : off+n : off+n]})
	}
	return frames, nil
}

// SplitMJPEG cuts concatenated JPEGs into frames (sharing b). Bytes
// between frames are skipped.
func SplitMJPEG(b []byte) ([]Frame, error) {
	var frames []Frame
	for len(b) > 0 {
		i := bytes.Index(b, []byte{0xff, mSOI})
		if i < 0 {
			break
		}
		b = b[i:]
		n, err := jpegEnd(b)
		if err != nil {
			return nil, fmt.Errorf("%w: frame %d: %v", ErrBadFrame, len(frames), err)
		}
		w, h, err := JPEGSize(b[:n])
		if err != nil {
			return nil, err
		}
		frames = append(frames, Frame{Format: FormatMJPEG, Width: w, Height: h, Data: b[:n:n]})
		b = b[n:]
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("%w: no JPEG frames found", ErrBadFrame)
	}
	return frames, nil
}

// Len is the number of frames in the recording.
func (r *Replay) Len() int { return len(r.frames) }

// Info implements Source (the first frame's format and size).
func (r *Replay) Info() Info {
	f := r.frames[0]
	return Info{Name: r.name, Format: f.Format, Width: f.Width, Height: f.Height, FPS: r.rate}
}

// Read implements Source. It returns io.EOF after the last frame unless
// looping.
func (r *Replay) Read(ctx context.Context, f *Frame) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.i >= len(r.frames) {
		if !r.loop {
			r.mu.Unlock()
			return io.EOF
		}
		r.i = 0
	}
	var wait time.Duration
	if r.rate > 0 {
		period := time.Duration(float64(time.Second) / r.rate)
		now := r.now()
		if r.anchor.IsZero() {
			r.anchor, r.k = now, 0
		}
		deadline := r.anchor.Add(time.Duration(r.k) * period)
		wait = deadline.Sub(now)
		if wait < -period {
			// The reader fell behind by more than a frame: do not burst
			// to catch up, restart pacing from now.
			r.anchor, r.k, wait = now, 0, 0
		}
		r.k++
	}
	src := &r.frames[r.i]
	r.i++
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	if err := sleepCtx(ctx, wait, r.done); err != nil {
		return err
	}
	src.CopyTo(f)
	f.Time = r.now()
	f.Seq = seq
	return nil
}

// Halt implements Source: pacing restarts at the next Read (the position
// is kept).
func (r *Replay) Halt(context.Context) error {
	r.mu.Lock()
	r.anchor = time.Time{}
	r.mu.Unlock()
	return nil
}

// Rewind restarts the recording from its first frame.
func (r *Replay) Rewind() {
	r.mu.Lock()
	r.i, r.anchor = 0, time.Time{}
	r.mu.Unlock()
}

// Close implements io.Closer; idempotent.
func (r *Replay) Close() error {
	r.closed.Store(true)
	r.closeOnce.Do(func() { close(r.done) })
	return nil
}
