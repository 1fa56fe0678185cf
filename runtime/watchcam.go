package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
)

// watchCam is the bundle's watch camera (engines.WatchCameraSpec): a second
// fixed camera that no graph reads. Its loop decodes each frame, counts the
// pixels outside the watch palette, and stamps the capture time; the loop's
// watchdog reads both beside the policy camera's (the older frame time and
// the older changed frame, the larger unseen count), so a watch camera that
// goes quiet (camera_stale) or repeats one frame while the arm moves
// (camera_frozen) stops the arm, and something new in its view stops it too
// (camera_unseen). With safety.watchdog.camera_moved set, its own view
// check (camera.ViewWatch) tells when it is knocked or turned, and the
// watchdog's camera_moved reads the larger of both cameras' fractions: a
// watch camera facing away would otherwise go on counting only what it
// sees, and see nothing new.
type watchCam struct {
	src     camera.SourceCloser
	rng     camera.YUVRange // camera_watch.yuv_range, for YUYV frames
	spec    engines.CameraSpec
	palette *camera.Palette   // nil: safety.watchdog.camera_unseen is 0, frames only keep it fresh
	view    *camera.ViewWatch // nil: safety.watchdog.camera_moved is 0
	log     *slog.Logger
	time    atomic.Int64  // unix nanos of the newest good frame (0: none yet)
	changed atomic.Int64  // unix nanos of the newest good frame that differs from the one before it
	unseen  atomic.Int64  // the smaller unseen count of the two newest frames
	moved   atomic.Uint64 // float64 bits: the view check's moved fraction (0: not moved)
	rebase  atomic.Int64  // unix nanos: a scene replaced on purpose; frames captured before it are skipped

	// run's own, across its frames
	prevUnseen int    // the previous frame's unseen count
	prevPix    []byte // the previous frame's pixels, for the frozen-camera check
	wasMoved   bool   // the view check said moved for the previous frame
}

// checkWatchCamera holds camera_watch to the bundle's watch camera: the
// same camera, a V4L2 capture of its size (a size left 0 is checked on the
// frames), and a bundle that has one. A bundle with a watch camera is
// refused while camera_watch says nothing, and taken with a warning when
// it says enabled: false: what only that camera sees is then not watched.
func checkWatchCamera(cfg *Config, b *engines.Bundle, log *slog.Logger) error {
	want := b.Manifest.WatchCamera
	cw := cfg.CameraWatch
	switch {
	case want == nil && cw.On():
		return cfg.keyError("camera_watch.enabled", fmt.Errorf("true, but bundle %s has no watch camera (python -m energyflow.palette --watch writes one)", b.Dir))
	case want == nil:
		return nil
	case cw.Off():
		log.Warn("the bundle names a watch camera, but camera_watch.enabled is false: what only that camera sees is not watched",
			"bundle", b.Manifest.Name, "watch_camera", want.Camera.Name)
		return nil
	case !cw.On():
		c := want.Camera
		return cfg.keyError("camera_watch", fmt.Errorf("not configured, but bundle %s watches a second camera, %q (%d×%d), for what its own camera cannot see: configure it (enabled: true, name: %s, and its source), or write enabled: false to run without that check",
			b.Dir, c.Name, c.Width, c.Height, c.Name))
	}
	c := want.Camera
	switch got := cw.Name; {
	case got == "":
		return cfg.keyError("camera_watch.name", fmt.Errorf("empty, but bundle %s's watch camera is %q (%d×%d): name the mounted camera", b.Dir, c.Name, c.Width, c.Height))
	case got != c.Name:
		return cfg.keyError("camera_watch.name", fmt.Errorf("%q, but bundle %s's watch camera is %q (%d×%d)", got, b.Dir, c.Name, c.Width, c.Height))
	}
	if s := cw.Config; (s.Source == "" || s.Source == camera.KindV4L2) && s.Width > 0 && (s.Width != c.Width || s.Height != c.Height) {
		return cfg.keyError("camera_watch.width", fmt.Errorf("%d×%d, but bundle %s's watch camera %q was recorded at %d×%d", s.Width, s.Height, b.Dir, c.Name, c.Width, c.Height))
	}
	if cfg.Safety.Watchdog.CameraMaxAge <= 0 {
		return cfg.keyError("safety.watchdog.camera_max_age", fmt.Errorf("0 turns the camera watchdog off, but camera_watch is on: set the oldest acceptable frame age (e.g. 250ms)"))
	}
	return nil
}

// openWatchCamera opens camera_watch for the bundle's watch camera (nil,
// nil when it is off). With safety.watchdog.camera_unseen > 0 its frames
// are read through the watch palette.
func openWatchCamera(cfg *Config, m *engines.Manifest, log *slog.Logger) (*watchCam, error) {
	if !cfg.CameraWatch.On() || m.WatchCamera == nil {
		return nil, nil
	}
	w := &watchCam{spec: m.WatchCamera.Camera, log: log, rng: cfg.CameraWatch.Range()}
	if cfg.Safety.Watchdog.CameraUnseen > 0 {
		p, err := camera.DecodePalette(m.WatchCamera.Palette.Levels, m.WatchCamera.Palette.Seen)
		if err != nil {
			return nil, fmt.Errorf("runtime: bundle watch_camera.palette: %w", err)
		}
		w.palette = p
		log.Info("watch camera on: something new in its view stops the arm (camera_unseen)",
			"camera", w.spec.Name, "pixels", cfg.Safety.Watchdog.CameraUnseen, "cells", p.Cells())
	} else {
		log.Warn("camera_watch is on, but safety.watchdog.camera_unseen is 0: something new in its view is not watched", "camera", w.spec.Name)
	}
	if trig := cfg.Safety.Watchdog.CameraMoved; trig > 0 {
		v, err := camera.NewViewWatch(camera.ViewWatchConfig{Trigger: trig})
		if err != nil {
			return nil, fmt.Errorf("runtime: safety.watchdog.camera_moved: %w", err)
		}
		w.view = v
		log.Info("watch camera view check on: a knocked or turned watch camera stops the arm (camera_moved)", "camera", w.spec.Name, "trigger", trig)
	}
	src, err := camera.Open(cfg.CameraWatch.Config, log)
	if err != nil {
		return nil, fmt.Errorf("runtime: camera_watch: %w", err)
	}
	w.src = src
	return w, nil
}

// Time is the capture time of the newest good frame (zero: none yet).
func (w *watchCam) Time() time.Time {
	if n := w.time.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Unseen is the smaller count of unseen pixels of the two newest frames
// (0 until a frame of the current scene is in).
func (w *watchCam) Unseen() int {
	if w.rebase.Load() != 0 {
		return 0
	}
	return int(w.unseen.Load())
}

// Moved is the fraction of the watch camera's steady image tiles that
// changed at once and still differ (camera.ViewStatus.Fraction; 0: not
// moved, or a new scene whose first frame is not in yet).
func (w *watchCam) Moved() float64 {
	if w.rebase.Load() != 0 {
		return 0
	}
	return math.Float64frombits(w.moved.Load())
}

// Changed is the capture time of the newest frame that differed from the
// one before it (zero: none yet), for the frozen-camera check.
func (w *watchCam) Changed() time.Time {
	if n := w.changed.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// SceneReplaced skips the frames captured before now and starts the count
// afresh: a new episode's scene.
func (w *watchCam) SceneReplaced() { w.rebase.Store(time.Now().UnixNano()) }

// run reads frames until ctx ends. Errors are logged (at most every 5 s)
// and the source reconnects by itself; a frame that cannot be decoded or
// is not the recorded size does not count as fresh, so the watchdog sees
// the last good one age.
func (w *watchCam) run(ctx context.Context) {
	var f camera.Frame
	var rgb camera.RGB
	var dec camera.JPEGDecoder
	var lastLog time.Time
	warn := func(msg string, err error) {
		if time.Since(lastLog) > 5*time.Second {
			w.log.Warn(msg, "camera", w.spec.Name, "err", err)
			lastLog = time.Now()
		}
	}
	for ctx.Err() == nil {
		if err := w.src.Read(ctx, &f); err != nil {
			if ctx.Err() != nil {
				return
			}
			warn("watch camera", err)
			if errors.Is(err, io.EOF) || errors.Is(err, camera.ErrClosed) {
				return
			}
			continue
		}
		if err := camera.ToRGB(&rgb, &f, &dec, w.rng); err != nil {
			warn("watch camera frame", err)
			continue
		}
		if rgb.Width != w.spec.Width || rgb.Height != w.spec.Height {
			warn("watch camera frame", fmt.Errorf("%dx%d, but the bundle's watch camera %q was recorded at %dx%d", rgb.Width, rgb.Height, w.spec.Name, w.spec.Width, w.spec.Height))
			continue
		}
		if since := w.rebase.Load(); since != 0 {
			// a frame of the old scene (a camera whose clock is not the
			// wall clock is taken after a second)
			if f.Time.UnixNano() <= since && time.Since(time.Unix(0, since)) < time.Second {
				continue
			}
			w.prevUnseen = 0
			w.unseen.Store(0)
			if w.view != nil {
				w.view.Rebase() // the new scene's first frame is every tile's reference
				w.moved.Store(0)
			}
			w.rebase.CompareAndSwap(since, 0)
		}
		if !bytes.Equal(w.prevPix, rgb.Pix) {
			w.prevPix = append(w.prevPix[:0], rgb.Pix...)
			w.changed.Store(f.Time.UnixNano())
		}
		if w.palette != nil {
			n := w.palette.Unseen(&rgb)
			w.unseen.Store(int64(min(n, w.prevUnseen)))
			w.prevUnseen = n
		}
		if w.view != nil {
			w.observeView(&rgb)
		}
		w.time.Store(f.Time.UnixNano())
	}
}

// observeView runs the watch camera's view check on a frame and logs when
// its view moves and when it comes back, naming the camera: the stop's own
// reason (camera_moved) does not say which of the two cameras it was.
func (w *watchCam) observeView(rgb *camera.RGB) {
	st := w.view.Observe(rgb)
	w.moved.Store(math.Float64bits(st.Fraction()))
	switch {
	case st.Moved && !w.wasMoved:
		w.log.Warn("watch camera's view moved: knocked or turned (camera_moved); put it back where it was",
			"camera", w.spec.Name, "tiles_differ", st.Differ, "of", st.Of)
	case !st.Moved && w.wasMoved:
		w.log.Info("watch camera's view is back", "camera", w.spec.Name)
	}
	w.wasMoved = st.Moved
}
