package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/telemetry/gpu"
	"github.com/pion/webrtc/v3"
)

// Options are the collaborators of a Server. Nil fields take the defaults
// noted.
type Options struct {
	// Controller receives STOP and RESET; nil answers 503 to both.
	Controller Controller
	// Episodes restarts the scene (a simulated robot's episodes); nil on a
	// real robot: the episode routes answer 404 and the page hides them.
	Episodes EpisodeControl
	// GPU is read every stats interval; nil reports "no GPU".
	GPU gpu.Reader
	// Logger; nil discards.
	Logger *slog.Logger
	// Announce receives the generated tokens once; nil: os.Stderr.
	Announce io.Writer
	// Metrics; nil creates a fresh set (Server.Metrics returns it).
	Metrics *Metrics
	// ProcRoot is where /proc is found ("/" when empty); for tests.
	ProcRoot string
	// Stages, if set, gives the stage latencies the stats message carries
	// (the page's "stages" row); nil: none.
	Stages StageSource
}

// Server is the live view: HTTP page and API, WebRTC viewers, metrics.
// Create with New, serve with Serve or ListenAndServe, stop with Close.
type Server struct {
	cfg     Config
	tokens  Tokens
	ctrl    Controller
	gpu     gpu.Reader
	log     *slog.Logger
	metrics *Metrics
	api     *webrtc.API
	video   *videoPipeline
	overlay overlayState
	cpu     cpuSampler
	handler http.Handler

	episodes EpisodeControl // nil: no episode control
	stages   StageSource    // nil: no stage latencies

	// Samples waiting for the broadcaster: a ring the control loop writes.
	ringMu   sync.Mutex
	ring     []Sample
	ringW    uint64
	ringR    uint64
	wake     chan struct{}
	scratch  []byte
	evMu     sync.Mutex
	events   []Event // recent events, oldest first
	evQueue  [][]byte
	statsMu  sync.Mutex
	lastStat []byte

	vMu       sync.Mutex
	viewers   map[uint64]*viewer
	nextID    uint64
	connected atomic.Int32

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New builds a server from a validated configuration and starts its encoder
// and broadcaster goroutines. Tokens missing from cfg.Auth are loaded from,
// or generated into, cfg.Auth.TokenFile.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	announce := opts.Announce
	if announce == nil {
		announce = os.Stderr
	}
	tokens, _, err := LoadTokens(cfg.Auth, announce)
	if err != nil {
		return nil, err
	}
	m := opts.Metrics
	if m == nil {
		m = NewMetrics()
	}
	g := opts.GPU
	if g == nil {
		g = gpu.None{Reason: "no GPU reader configured"}
	}
	root := opts.ProcRoot
	if root == "" {
		root = "/"
	}
	s := &Server{
		cfg: cfg, tokens: tokens, ctrl: opts.Controller, episodes: opts.Episodes, stages: opts.Stages, gpu: g, log: log, metrics: m,
		ring:    make([]Sample, 256),
		wake:    make(chan struct{}, 1),
		viewers: make(map[uint64]*viewer),
		done:    make(chan struct{}),
		cpu:     cpuSampler{root: root},
	}
	if s.api, err = newAPI(cfg.ICE); err != nil {
		return nil, err
	}
	s.video, err = newVideoPipeline(cfg.Video, m, &s.overlay, func() int { return int(s.connected.Load()) }, log.With("part", "video"))
	if err != nil {
		return nil, err
	}
	if err := s.video.start(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	s.cpu.read() // prime the counters
	s.wg.Add(2)
	go s.broadcaster()
	go s.statsLoop()
	return s, nil
}

// Metrics returns the collectors the runtime observes.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Tokens returns the access tokens in force.
func (s *Server) Tokens() Tokens { return s.tokens }

// Config returns the configuration the server runs with.
func (s *Server) Config() Config { return s.cfg }

// Viewers returns the number of connected viewers.
func (s *Server) Viewers() int { return int(s.connected.Load()) }

// Handler returns the HTTP handler (page, API, signaling, metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// ListenAndServe listens on cfg.Listen and serves until ctx is cancelled.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("telemetry: listen %s: %w — is the address on this machine and the port free?", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTP on ln until ctx is cancelled, then shuts the HTTP
// server down gracefully (viewers are closed by Close).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops the encoder and broadcaster and closes every viewer. It is
// idempotent. It does not stop Serve (cancel its context).
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.video.stop()
		s.wg.Wait()
		s.vMu.Lock()
		vs := make([]*viewer, 0, len(s.viewers))
		for _, v := range s.viewers {
			vs = append(vs, v)
		}
		s.vMu.Unlock()
		for _, v := range vs {
			s.dropViewer(v)
		}
	})
	return nil
}

// SubmitFrame offers one camera frame (packed 8-bit RGB, w×h) to the live
// view. It copies the frame and returns at once: false means the frame was
// dropped (encoder busy, faster than video.fps, or bad size) and counted.
// t is the capture time (zero: now).
func (s *Server) SubmitFrame(rgb []byte, w, h int, t time.Time) bool {
	return s.video.submit(rgb, w, h, t)
}

// Publish hands one control tick to the overlay and the viewers. It never
// blocks on viewers and allocates nothing once warmed up; when the
// broadcaster falls behind by more than 256 samples the oldest are dropped.
func (s *Server) Publish(sample Sample) {
	s.overlay.update(&sample)
	s.ringMu.Lock()
	sampleCopy(&s.ring[s.ringW%uint64(len(s.ring))], &sample)
	s.ringW++
	if s.ringW-s.ringR > uint64(len(s.ring)) {
		s.ringR = s.ringW - uint64(len(s.ring))
		s.metrics.dcDropped.Inc()
	}
	s.ringMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// PublishEvent records a safety event, keeps it for viewers that join later
// and sends it to every viewer.
func (s *Server) PublishEvent(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Trace = append([]float64(nil), e.Trace[max(0, len(e.Trace)-4*traceLen):]...) // the most recent part
	msg := appendEventJSON(nil, &e, true)
	s.evMu.Lock()
	s.events = append(s.events, e)
	if over := len(s.events) - s.cfg.EventHistory; over > 0 {
		s.events = append(s.events[:0], s.events[over:]...)
	}
	if len(s.evQueue) < 1024 {
		s.evQueue = append(s.evQueue, msg)
	} else {
		s.metrics.dcDropped.Inc()
	}
	s.evMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// broadcaster turns queued samples and events into data-channel messages.
func (s *Server) broadcaster() {
	defer s.wg.Done()
	var batch [][]byte
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		batch = batch[:0]
		s.evMu.Lock()
		batch = append(batch, s.evQueue...)
		s.evQueue = s.evQueue[:0]
		s.evMu.Unlock()
		for {
			s.ringMu.Lock()
			if s.ringR == s.ringW {
				s.ringMu.Unlock()
				break
			}
			s.scratch = appendSampleJSON(s.scratch[:0], &s.ring[s.ringR%uint64(len(s.ring))])
			s.ringR++
			s.ringMu.Unlock()
			batch = append(batch, bytes.Clone(s.scratch))
		}
		s.broadcast(batch)
	}
}

// broadcast sends messages to every viewer whose data channel is open,
// skipping viewers whose channel is backed up.
func (s *Server) broadcast(msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	s.vMu.Lock()
	vs := make([]*viewer, 0, len(s.viewers))
	for _, v := range s.viewers {
		if v.dcOpen.Load() {
			vs = append(vs, v)
		}
	}
	s.vMu.Unlock()
	for _, v := range vs {
		for _, m := range msgs {
			if v.dc.BufferedAmount() > 1<<20 {
				s.metrics.dcDropped.Inc()
				continue
			}
			if err := v.dc.SendText(string(m)); err != nil {
				s.metrics.dcDropped.Inc()
			}
		}
	}
}

// statsMessage is the "stats" data-channel message.
type statsMessage struct {
	Type      string      `json:"type"`
	T         float64     `json:"t"`
	CPU       CPUStats    `json:"cpu"`
	GPU       []gpu.Stats `json:"gpu"`
	GPUSource string      `json:"gpu_source"`
	GPUError  string      `json:"gpu_error,omitempty"`
	Video     videoStats  `json:"video"`
	// Stages is absent without a StageSource or before any stage has run
	// (and from older servers): pages that do not know it ignore it.
	Stages []stageStats `json:"stages,omitempty"`
}

// stageStats is one stage's latency in the stats message, in ms.
type stageStats struct {
	Stage string  `json:"stage"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
}

type videoStats struct {
	Width           int     `json:"width"`
	Height          int     `json:"height"`
	FPS             int     `json:"fps"`          // the configured limit (video.fps)
	MeasuredFPS     float64 `json:"fps_measured"` // frames actually encoded per second, last 5 s
	Viewers         int     `json:"viewers"`
	EncodeMedian    float64 `json:"encode_ms_median"`
	EncodeCPUMedian float64 `json:"encode_cpu_ms_median"`
	EncodedFrames   uint64  `json:"encoded_frames"`
}

func (s *Server) readStats() statsMessage {
	m := statsMessage{Type: "stats", T: unixMillis(time.Now()), GPUSource: "none"}
	m.CPU, _ = s.cpu.read()
	if src, ok := s.gpu.(gpu.Source); ok {
		m.GPUSource = src.Source()
	}
	g, err := s.gpu.Read()
	if err != nil {
		m.GPUError = err.Error()
		if n, ok := s.gpu.(gpu.None); ok && n.Reason != "" {
			m.GPUError = "no GPU: " + n.Reason
		}
	}
	m.GPU = g
	if m.GPU == nil {
		m.GPU = []gpu.Stats{}
	}
	m.Video = videoStats{Width: s.cfg.Video.Width, Height: s.cfg.Video.Height, FPS: s.cfg.Video.FPS, Viewers: s.Viewers()}
	es := s.video.stats.snapshot(time.Now())
	m.Video.EncodeMedian, m.Video.EncodeCPUMedian, m.Video.EncodedFrames = durMillis(es.MedianWall), durMillis(es.MedianCPU), es.Frames
	m.Video.MeasuredFPS = es.FPS
	if s.stages != nil {
		for _, l := range s.stages.StageLatencies() {
			m.Stages = append(m.Stages, stageStats{Stage: l.Stage, Count: l.Count, P50: durMillis(l.P50), P90: durMillis(l.P90)})
		}
	}
	return m
}

func (s *Server) statsLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.StatsInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		b, err := json.Marshal(s.readStats())
		if err != nil {
			continue
		}
		s.statsMu.Lock()
		s.lastStat = b
		s.statsMu.Unlock()
		s.broadcast([][]byte{b})
	}
}

// EncodeStats returns the recent cost of encoding a frame.
func (s *Server) EncodeStats() EncodeStats { return s.video.stats.snapshot(time.Now()) }
