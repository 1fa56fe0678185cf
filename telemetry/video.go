package telemetry

import (
	"errors"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/telemetry/lograte"
	"github.com/energyflow/edge/telemetry/vpx"
	"github.com/pion/webrtc/v3"
	"github.com/pion/webrtc/v3/pkg/media"
)

// frameBuf is one pooled input frame.
type frameBuf struct {
	rgb  []byte
	w, h int
	t    time.Time
}

// videoPipeline owns the encoder goroutine. SubmitFrame feeds it without
// blocking; frames go through a pool of poolSize buffers and a one-slot
// queue.
type videoPipeline struct {
	cfg     VideoConfig
	metrics *Metrics
	overlay *overlayState
	log     *slog.Logger
	viewers func() int

	free chan *frameBuf
	work chan *frameBuf

	mu       sync.Mutex // guards next (frame-rate limiter)
	next     time.Time
	sinksMu  sync.Mutex
	sinks    []*videoSink // copy-on-write
	keyReq   atomic.Bool
	lastKey  atomic.Int64 // unix nanos of the last keyframe
	stats    encodeStats
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// encodeStats keeps a small ring of recent per-frame costs: wall time and
// the encoder thread's CPU time (overlay, conversion, VP8).
type encodeStats struct {
	mu    sync.Mutex
	wall  [256]time.Duration
	cpu   [256]time.Duration
	at    [256]time.Time // when each frame was encoded
	n     int
	total uint64
}

func (e *encodeStats) add(wall, cpu time.Duration, at time.Time) {
	e.mu.Lock()
	e.wall[e.total%uint64(len(e.wall))] = wall
	e.cpu[e.total%uint64(len(e.cpu))] = cpu
	e.at[e.total%uint64(len(e.at))] = at
	e.total++
	e.n = min(e.n+1, len(e.wall))
	e.mu.Unlock()
}

// EncodeStats describes recent encoding cost (last 256 frames).
type EncodeStats struct {
	MedianWall time.Duration // overlay + colour conversion + VP8, wall clock
	MedianCPU  time.Duration // the same, CPU time of the encoder thread
	Frames     uint64        // frames encoded since start
	// FPS is the rate frames were actually encoded at over the last
	// fpsWindow (0: fewer than two frames in it): the camera or the encoder
	// may run below the configured video.fps.
	FPS float64
}

// fpsWindow is the span EncodeStats.FPS is measured over.
const fpsWindow = 5 * time.Second

func medianOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func (e *encodeStats) snapshot(now time.Time) EncodeStats {
	e.mu.Lock()
	w := slices.Clone(e.wall[:e.n])
	c := slices.Clone(e.cpu[:e.n])
	st := EncodeStats{Frames: e.total}
	var first, last time.Time
	k := 0
	for _, t := range e.at[:e.n] {
		if now.Sub(t) > fpsWindow {
			continue
		}
		if k == 0 || t.Before(first) {
			first = t
		}
		if k == 0 || t.After(last) {
			last = t
		}
		k++
	}
	e.mu.Unlock()
	if span := last.Sub(first); k >= 2 && span > 0 {
		st.FPS = float64(k-1) / span.Seconds()
	}
	st.MedianWall, st.MedianCPU = medianOf(w), medianOf(c)
	return st
}

const poolSize = 3

func newVideoPipeline(cfg VideoConfig, m *Metrics, o *overlayState, viewers func() int, log *slog.Logger) (*videoPipeline, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &videoPipeline{
		cfg: cfg, metrics: m, overlay: o, log: log, viewers: viewers,
		free: make(chan *frameBuf, poolSize),
		work: make(chan *frameBuf, 1),
		done: make(chan struct{}),
	}
	for i := 0; i < poolSize; i++ {
		p.free <- &frameBuf{}
	}
	p.keyReq.Store(true)
	return p, nil
}

// submit copies a frame in if a buffer is free and the frame rate allows.
func (p *videoPipeline) submit(rgb []byte, w, h int, t time.Time) bool {
	p.metrics.framesCaptured.Inc()
	if w <= 0 || h <= 0 || w > 8192 || h > 8192 || len(rgb) < w*h*3 {
		p.metrics.dropInvalid.Inc()
		return false
	}
	if t.IsZero() {
		t = time.Now()
	}
	period := time.Second / time.Duration(p.cfg.FPS)
	p.mu.Lock()
	if t.Add(period / 4).Before(p.next) {
		p.mu.Unlock()
		p.metrics.dropRate.Inc()
		return false
	}
	p.next = p.next.Add(period)
	if p.next.Before(t.Add(-period)) || p.next.After(t.Add(2*period)) {
		p.next = t.Add(period)
	}
	p.mu.Unlock()
	var fb *frameBuf
	select {
	case fb = <-p.free:
	default:
		p.metrics.dropBusy.Inc()
		return false
	}
	n := w * h * 3
	if cap(fb.rgb) < n {
		fb.rgb = make([]byte, n)
	}
	fb.rgb = fb.rgb[:n]
	copy(fb.rgb, rgb[:n])
	fb.w, fb.h, fb.t = w, h, t
	select {
	case p.work <- fb:
		return true
	default:
		p.free <- fb
		p.metrics.dropBusy.Inc()
		return false
	}
}

// requestKeyframe asks for a keyframe on the next frame, at most every
// 250 ms (PLI storms from several viewers collapse into one).
func (p *videoPipeline) requestKeyframe() {
	if time.Since(time.Unix(0, p.lastKey.Load())) < 250*time.Millisecond {
		return
	}
	p.keyReq.Store(true)
}

// videoSink is one viewer's video track. The encoded frames are shared;
// each sink packetizes them for its viewer. A sink gets nothing until its
// sender is bound (DTLS up) and then starts at a keyframe, so a viewer
// never receives frames it cannot decode.
type videoSink struct {
	*webrtc.TrackLocalStaticSample
	p       *videoPipeline
	bound   atomic.Bool
	needKey atomic.Bool
	queue   chan queuedFrame // encoded frames for this viewer
	done    chan struct{}
	once    sync.Once
}

// queuedFrame is an encoded frame and when its camera frame was captured.
type queuedFrame struct {
	smp      media.Sample
	captured time.Time
}

// sinkQueue bounds the frames waiting for one viewer; a viewer that falls
// further behind skips frames and resumes at the next keyframe.
const sinkQueue = 4

// send writes queued frames to the viewer until the sink is closed, so a
// slow viewer never holds up the encoder or the other viewers.
func (s *videoSink) send() {
	for {
		select {
		case <-s.done:
			return
		case f := <-s.queue:
			if err := s.WriteSample(f.smp); err != nil && !errors.Is(err, io.ErrClosedPipe) {
				s.p.log.Debug("write sample", "err", err)
				continue
			}
			s.p.metrics.sendDelay.Observe(time.Since(f.captured).Seconds())
		}
	}
}

func (s *videoSink) close() { s.once.Do(func() { close(s.done) }) }

// Bind is called by pion when the viewer's sender starts.
func (s *videoSink) Bind(ctx webrtc.TrackLocalContext) (webrtc.RTPCodecParameters, error) {
	params, err := s.TrackLocalStaticSample.Bind(ctx)
	if err == nil {
		s.needKey.Store(true)
		s.bound.Store(true)
		s.p.keyReq.Store(true) // a joining viewer always gets a keyframe
	}
	return params, err
}

// Unbind is called by pion when the sender stops.
func (s *videoSink) Unbind(ctx webrtc.TrackLocalContext) error {
	s.bound.Store(false)
	return s.TrackLocalStaticSample.Unbind(ctx)
}

// addSink creates a track for one viewer.
func (p *videoPipeline) addSink() (*videoSink, error) {
	t, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "video", "energyflow")
	if err != nil {
		return nil, err
	}
	s := &videoSink{TrackLocalStaticSample: t, p: p, queue: make(chan queuedFrame, sinkQueue), done: make(chan struct{})}
	go s.send()
	p.sinksMu.Lock()
	p.sinks = append(slices.Clip(p.sinks), s)
	p.sinksMu.Unlock()
	return s, nil
}

func (p *videoPipeline) removeSink(s *videoSink) {
	s.close()
	p.sinksMu.Lock()
	p.sinks = slices.DeleteFunc(slices.Clone(p.sinks), func(x *videoSink) bool { return x == s })
	p.sinksMu.Unlock()
}

func (p *videoPipeline) currentSinks() []*videoSink {
	p.sinksMu.Lock()
	defer p.sinksMu.Unlock()
	return p.sinks
}

func (p *videoPipeline) start() error {
	enc, err := vpx.NewEncoder(vpx.Config{
		Width: p.cfg.Width, Height: p.cfg.Height, FPS: p.cfg.FPS, BitrateKbps: p.cfg.BitrateKbps,
		CPUUsed: p.cfg.CPUUsed, KeyframeInterval: max(1, int(p.cfg.KeyframeInterval.Seconds()*float64(p.cfg.FPS))),
	})
	if err != nil {
		return err
	}
	p.wg.Add(1)
	go p.run(enc)
	return nil
}

func (p *videoPipeline) stop() {
	p.stopOnce.Do(func() { close(p.done) })
	p.wg.Wait()
	for _, s := range p.currentSinks() {
		s.close()
	}
}

func (p *videoPipeline) run(enc *vpx.Encoder) {
	defer p.wg.Done()
	runtime.LockOSThread() // for threadCPUTime; the goroutine lives in cgo anyway
	defer runtime.UnlockOSThread()
	defer enc.Close()
	w, h := p.cfg.Width, p.cfg.Height
	scaled := make([]byte, w*h*3)
	i420 := make([]byte, vpx.I420Size(w, h))
	out := make([]byte, len(i420))
	var od overlayData
	var lastT time.Time
	var failing lograte.Repeat[struct{}] // encode failures: one line, then at most every 5 s
	for {
		var fb *frameBuf
		select {
		case <-p.done:
			return
		case fb = <-p.work:
		}
		if p.viewers() == 0 {
			// Nobody watches: skip the work; the next viewer gets a keyframe.
			p.keyReq.Store(true)
			p.free <- fb
			continue
		}
		t0, c0 := time.Now(), threadCPUTime()
		src := fb.rgb
		if fb.w != w || fb.h != h {
			scaleRGB(scaled, w, h, fb.rgb, fb.w, fb.h)
			src = scaled
		}
		if p.cfg.Overlay {
			p.overlay.snapshot(&od)
			drawOverlay(rgbImage{pix: src, w: w, h: h}, &od)
		}
		vpx.RGBToI420(i420, src, w, h) // sizes fixed at start; cannot fail
		ft := fb.t
		p.free <- fb
		sinks := p.currentSinks()
		force := p.keyReq.Swap(false)
		for _, sk := range sinks {
			if sk.bound.Load() && sk.needKey.Load() && time.Since(time.Unix(0, p.lastKey.Load())) > 500*time.Millisecond {
				force = true // a keyframe request got lost
			}
		}
		frame, key, err := enc.Encode(i420, force, out)
		if err != nil {
			if log, n := failing.Observe(time.Now(), struct{}{}); log {
				p.log.Warn("encode failed", "err", err, "repeated", n)
			}
			continue
		}
		if was, n := failing.End(); was {
			p.log.Info("encoding again", "failed_since_last_line", n)
		}
		wall := time.Since(t0)
		p.metrics.encodeDuration.Observe(wall.Seconds())
		p.stats.add(wall, threadCPUTime()-c0, time.Now())
		if len(frame) == 0 {
			continue
		}
		if key {
			p.lastKey.Store(time.Now().UnixNano())
			p.metrics.keyframes.Inc()
		}
		dur := time.Second / time.Duration(p.cfg.FPS)
		if !lastT.IsZero() {
			if d := ft.Sub(lastT); d > time.Millisecond && d < time.Second {
				dur = d
			}
		}
		lastT = ft
		// One read-only copy of the frame is shared by every viewer's queue.
		qf := queuedFrame{smp: media.Sample{Data: slices.Clone(frame), Duration: dur}, captured: ft}
		for _, sk := range sinks {
			if !sk.bound.Load() || (sk.needKey.Load() && !key) {
				continue
			}
			select {
			case sk.queue <- qf:
				sk.needKey.Store(false)
			default: // viewer backed up: skip to the next keyframe
				sk.needKey.Store(true)
				p.requestKeyframe()
			}
		}
		p.metrics.framesEncoded.Inc()
	}
}
