// Package telemetrytest holds test doubles for telemetry: a fake Controller
// that records STOP/RESET and plays the safety state, a fake EpisodeControl
// that records new episodes and level changes, and a synthetic
// camera/control-loop source that stamps a frame counter into each frame so
// a viewer can measure glass-to-glass delay.
package telemetrytest

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/telemetry"
)

// Call is one recorded Stop or Reset.
type Call struct {
	Actor, Reason string
	Time          time.Time
}

// FakeController records calls and keeps a latched safety state like the
// real safety layer: Stop latches STOPPED, Reset returns to RUNNING.
type FakeController struct {
	mu      sync.Mutex
	stops   []Call
	resets  []Call
	stopped bool
	reason  string
	// ResetErr, when set, is returned by Reset (and the state stays).
	ResetErr error
}

var _ telemetry.Controller = (*FakeController)(nil)

// Stop records the call and latches STOPPED. It ignores ctx, as a real
// stop must.
func (f *FakeController) Stop(_ context.Context, actor, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, Call{Actor: actor, Reason: reason, Time: time.Now()})
	f.stopped, f.reason = true, reason
	return nil
}

// Reset records the call and clears the stop unless ResetErr is set.
func (f *FakeController) Reset(_ context.Context, actor string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, Call{Actor: actor, Time: time.Now()})
	if f.ResetErr != nil {
		return f.ResetErr
	}
	f.stopped, f.reason = false, ""
	return nil
}

// Stops returns the recorded Stop calls.
func (f *FakeController) Stops() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.stops...)
}

// Resets returns the recorded Reset calls.
func (f *FakeController) Resets() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.resets...)
}

// State returns the safety state and reason.
func (f *FakeController) State() (state, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return telemetry.StateStopped, f.reason
	}
	return telemetry.StateRunning, ""
}

// rearm clears a latched stop without recording a Reset (a new episode's
// scene is in distribution again, and the gate re-arms).
func (f *FakeController) rearm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped, f.reason = false, ""
}

// EpisodeCall is one recorded NewEpisode or SetLevel.
type EpisodeCall struct {
	Actor, Level string
	Time         time.Time
}

// FakeEpisodes is an EpisodeControl that records its calls, like the
// simulated robot: episodes start at the first level with seed 1;
// NewEpisode starts the next one (seed + 1) at the level asked, or the
// pending one, and clears Controller's stop.
type FakeEpisodes struct {
	// LevelNames is what Levels returns (nil: "0", "S", "M", "L").
	LevelNames []string
	// Controller, when set, is re-armed by NewEpisode.
	Controller *FakeController
	// Err, when set, is returned by every method but Levels. Set it before
	// the server starts.
	Err error

	mu   sync.Mutex
	info telemetry.EpisodeInfo
	news []EpisodeCall
	sets []EpisodeCall
}

var _ telemetry.EpisodeControl = (*FakeEpisodes)(nil)

// Levels returns LevelNames or the default levels.
func (f *FakeEpisodes) Levels() []string {
	if f.LevelNames != nil {
		return append([]string(nil), f.LevelNames...)
	}
	return []string{"0", "S", "M", "L"}
}

// current returns the episode, starting the first one; f.mu is held.
func (f *FakeEpisodes) current() *telemetry.EpisodeInfo {
	if f.info.Episode == 0 {
		f.info = telemetry.EpisodeInfo{Level: f.Levels()[0], Seed: 1, Episode: 1}
	}
	return &f.info
}

// Episode reports the current episode.
func (f *FakeEpisodes) Episode(context.Context) (telemetry.EpisodeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Err != nil {
		return telemetry.EpisodeInfo{}, f.Err
	}
	return *f.current(), nil
}

// NewEpisode records the call, starts the next episode and re-arms.
func (f *FakeEpisodes) NewEpisode(_ context.Context, actor, level string) (telemetry.EpisodeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.news = append(f.news, EpisodeCall{Actor: actor, Level: level, Time: time.Now()})
	if f.Err != nil {
		return telemetry.EpisodeInfo{}, f.Err
	}
	in := f.current()
	switch {
	case level != "":
	case in.PendingLevel != "":
		level = in.PendingLevel
	default:
		level = in.Level
	}
	*in = telemetry.EpisodeInfo{Level: level, Seed: in.Seed + 1, Episode: in.Episode + 1}
	if f.Controller != nil {
		f.Controller.rearm()
	}
	return *in, nil
}

// SetLevel records the call and sets the pending level.
func (f *FakeEpisodes) SetLevel(_ context.Context, actor, level string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, EpisodeCall{Actor: actor, Level: level, Time: time.Now()})
	if f.Err != nil {
		return f.Err
	}
	in := f.current()
	in.PendingLevel = level
	if level == in.Level {
		in.PendingLevel = ""
	}
	return nil
}

// NewEpisodes returns the recorded NewEpisode calls.
func (f *FakeEpisodes) NewEpisodes() []EpisodeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]EpisodeCall(nil), f.news...)
}

// SetLevels returns the recorded SetLevel calls.
func (f *FakeEpisodes) SetLevels() []EpisodeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]EpisodeCall(nil), f.sets...)
}

// StampGeometry returns the block size and origin of the counter stamp for
// a w×h frame: 16 blocks of bs×bs pixels in a row, most significant bit
// first, white for 1 and black for 0, starting at (x0, y0).
func StampGeometry(w, h int) (bs, x0, y0 int) {
	bs = max(4, w/40)
	return bs, bs, h - 2*bs
}

// StampCounter writes n into the bottom-left corner of an RGB frame.
func StampCounter(rgb []byte, w, h int, n uint16) {
	bs, x0, y0 := StampGeometry(w, h)
	for i := 0; i < 16; i++ {
		v := byte(0)
		if n&(1<<(15-i)) != 0 {
			v = 255
		}
		for y := y0; y < y0+bs && y < h; y++ {
			for x := x0 + i*bs; x < x0+(i+1)*bs && x < w; x++ {
				p := (y*w + x) * 3
				rgb[p], rgb[p+1], rgb[p+2] = v, v, v
			}
		}
	}
}

// ReadCounter reads a stamp back (from the centre of each block).
func ReadCounter(rgb []byte, w, h int) uint16 {
	bs, x0, y0 := StampGeometry(w, h)
	var n uint16
	for i := 0; i < 16; i++ {
		p := ((y0+bs/2)*w + x0 + i*bs + bs/2) * 3
		if int(rgb[p])+int(rgb[p+1])+int(rgb[p+2]) > 3*128 {
			n |= 1 << (15 - i)
		}
	}
	return n
}

// Pattern fills an RGB frame with a moving colour pattern (phase n).
func Pattern(rgb []byte, w, h, n int) {
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := (y*w + x) * 3
			rgb[p] = byte((x + 2*n) * 255 / (w + 1))
			rgb[p+1] = byte(40 + (y*160)/h)
			rgb[p+2] = byte(128 + 100*math.Sin(float64(x+y+3*n)/40))
		}
	}
}

// Sink is what a Source feeds: a *telemetry.Server.
type Sink interface {
	SubmitFrame(rgb []byte, w, h int, t time.Time) bool
	Publish(s telemetry.Sample)
}

// Source generates frames and control samples.
type Source struct {
	Width, Height int
	FPS           int             // camera frame rate
	ControlRate   int             // samples per second
	Controller    *FakeController // safety state shown in samples; may be nil
	Threshold     float64         // energy threshold (default 1)

	frameTimes [1 << 16]atomic.Int64 // counter → submit time (unix ns)
	frames     atomic.Uint64
}

// FrameTime returns when the frame stamped n was submitted.
func (s *Source) FrameTime(n uint16) (time.Time, bool) {
	v := s.frameTimes[n].Load()
	return time.Unix(0, v), v != 0
}

// Frames returns the number of frames submitted.
func (s *Source) Frames() uint64 { return s.frames.Load() }

// Run feeds sink until ctx is cancelled. Frames are pre-rendered (8
// phases) so the source itself costs little CPU; only the stamp changes.
func (s *Source) Run(ctx context.Context, sink Sink) error {
	if s.Width <= 0 || s.Height <= 0 || s.FPS <= 0 || s.ControlRate <= 0 {
		return errors.New("telemetrytest: Source needs Width, Height, FPS and ControlRate")
	}
	thr := s.Threshold
	if thr == 0 {
		thr = 1
	}
	w, h := s.Width, s.Height
	var phases [8][]byte
	for i := range phases {
		phases[i] = make([]byte, w*h*3)
		Pattern(phases[i], w, h, i*4)
	}
	frame := make([]byte, w*h*3)
	framePeriod := time.Second / time.Duration(s.FPS)
	tickPeriod := time.Second / time.Duration(s.ControlRate)
	start := time.Now()
	nextFrame, nextTick := start, start
	var n uint16
	var tick uint64
	joints := make([]float64, 7)
	planned := make([][]float64, 8)
	for i := range planned {
		planned[i] = make([]float64, 3)
	}
	for {
		wait := time.Until(nextFrame)
		if d := time.Until(nextTick); d < wait {
			wait = d
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		} else if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		if !now.Before(nextTick) {
			nextTick = nextTick.Add(tickPeriod)
			tick++
			ph := float64(tick) / float64(s.ControlRate)
			for i := range joints {
				joints[i] = 0.5 * math.Sin(ph+float64(i))
			}
			for i := range planned {
				planned[i][0] = 0.02 * math.Sin(ph+float64(i)/4)
				planned[i][1] = 0.02 * math.Cos(ph+float64(i)/4)
				planned[i][2] = 0.005 * float64(i)
			}
			state, reason := telemetry.StateRunning, ""
			if s.Controller != nil {
				state, reason = s.Controller.State()
			}
			sink.Publish(telemetry.Sample{
				Tick: tick, Time: now, Energy: thr * (0.35 + 0.1*math.Sin(ph*2)), Threshold: thr, StateEnergy: math.NaN(),
				State: state, Reason: reason, LoopRateHz: float64(s.ControlRate),
				TickDuration: 3 * time.Millisecond, InferenceLatency: 12 * time.Millisecond,
				Joints: joints, EndEffector: joints[:3], Gripper: 0.5, Planned: planned,
			})
		}
		if !now.Before(nextFrame) {
			nextFrame = nextFrame.Add(framePeriod)
			n++
			copy(frame, phases[int(n/2)%len(phases)])
			StampCounter(frame, w, h, n)
			t := time.Now()
			s.frameTimes[n].Store(t.UnixNano())
			s.frames.Add(1)
			sink.SubmitFrame(frame, w, h, t)
		}
	}
}
