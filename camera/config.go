package camera

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Source kinds for Config.Source.
const (
	KindV4L2   = "v4l2"
	KindHTTP   = "http"
	KindReplay = "replay"
)

// Config is the camera block of the runtime's configuration file. Zero
// values mean "default" (see DefaultConfig); Validate reports every
// problem with its key (prefixed "camera.").
type Config struct {
	// Source is "v4l2" (default), "http" (MJPEG over HTTP) or "replay".
	Source string `yaml:"source" json:"source"`

	// Name is the operator's name for the mounted camera (e.g. "topview").
	// A bundle trained on a named camera runs only on a camera of that name
	// and frame size: a policy reads another view as nonsense, silently.
	Name string `yaml:"name" json:"name"`

	// Device is a V4L2 device path, e.g. /dev/video0. Prefer ByID.
	Device string `yaml:"device" json:"device"`
	// ByID is a stable name under /dev/v4l/by-id (or a full path there),
	// which survives re-plugging into another port; it wins over Device.
	ByID string `yaml:"by_id" json:"by_id"`
	// Format is "yuyv" (default: decodes in ~1.4 ms at 640×480 with no
	// allocation) or "mjpeg" (~6 ms and ~630 KB of garbage per frame
	// through image/jpeg; use it for sizes USB 2.0 cannot carry raw).
	Format string `yaml:"format" json:"format"`
	// Width, Height are the requested capture size (default 640×480); the
	// driver may choose another size, which Info reports.
	Width  int `yaml:"width" json:"width"`
	Height int `yaml:"height" json:"height"`
	// FPS is the requested frame rate (default 30).
	FPS float64 `yaml:"fps" json:"fps"`
	// Buffers is the V4L2 buffer count (default 4; the library's default
	// of 256 would queue seconds of stale frames).
	Buffers int `yaml:"buffers" json:"buffers"`
	// YUVRange is "limited" (default, BT.601 studio range) or "full".
	YUVRange string `yaml:"yuv_range" json:"yuv_range"`
	// CaptureLatency is subtracted from V4L2 dequeue times to estimate the
	// exposure time (default 0; typically about one frame interval).
	CaptureLatency time.Duration `yaml:"capture_latency" json:"capture_latency"`

	// URL is the MJPEG stream for Source "http".
	URL string `yaml:"url" json:"url"`

	// ReadTimeout bounds the wait for one frame (default 2s; V4L2 rounds it
	// up to whole seconds).
	ReadTimeout time.Duration `yaml:"read_timeout" json:"read_timeout"`
	// ConnectTimeout bounds opening a device or connecting (default 5s).
	ConnectTimeout time.Duration `yaml:"connect_timeout" json:"connect_timeout"`
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// reopen attempts (defaults 250ms and 5s).
	ReconnectMin time.Duration `yaml:"reconnect_min" json:"reconnect_min"`
	ReconnectMax time.Duration `yaml:"reconnect_max" json:"reconnect_max"`
	// StaleAfter is the frame age beyond which Capture reports the camera
	// stale (default 500ms).
	StaleAfter time.Duration `yaml:"stale_after" json:"stale_after"`

	// Replay configures Source "replay".
	Replay ReplayConfig `yaml:"replay" json:"replay"`
}

// ReplayConfig says which recording to replay and how.
type ReplayConfig struct {
	// Dir is a directory of images (.jpg/.jpeg served as MJPEG frames,
	// .png as RGB frames), replayed in name order.
	Dir string `yaml:"dir" json:"dir"`
	// File is a recording: .mjpeg/.mjpg (concatenated JPEGs) or .yuyv/.yuv
	// (raw YUYV frames of Config.Width×Height, back to back).
	File string `yaml:"file" json:"file"`
	// Rate is frames per second; 0 means as fast as they are read.
	Rate float64 `yaml:"rate" json:"rate"`
	// Loop restarts from the first frame at the end; otherwise Read
	// returns io.EOF.
	Loop bool `yaml:"loop" json:"loop"`
}

// DefaultConfig returns the defaults every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{
		Source:         KindV4L2,
		Format:         "yuyv",
		Width:          640,
		Height:         480,
		FPS:            30,
		Buffers:        4,
		YUVRange:       "limited",
		ReadTimeout:    2 * time.Second,
		ConnectTimeout: 5 * time.Second,
		ReconnectMin:   250 * time.Millisecond,
		ReconnectMax:   5 * time.Second,
		StaleAfter:     500 * time.Millisecond,
	}
}

// WithDefaults returns c with every zero field set from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Source == "" {
		c.Source = d.Source
		if c.URL != "" {
			c.Source = KindHTTP
		} else if c.Replay.Dir != "" || c.Replay.File != "" {
			c.Source = KindReplay
		}
	}
	if c.Format == "" {
		c.Format = d.Format
	}
	if c.Width == 0 && c.Height == 0 {
		c.Width, c.Height = d.Width, d.Height
	}
	if c.FPS == 0 {
		c.FPS = d.FPS
	}
	if c.Buffers == 0 {
		c.Buffers = d.Buffers
	}
	if c.YUVRange == "" {
		c.YUVRange = d.YUVRange
	}
	for _, p := range []struct{ v, d *time.Duration }{
		{&c.ReadTimeout, &d.ReadTimeout}, {&c.ConnectTimeout, &d.ConnectTimeout},
		{&c.ReconnectMin, &d.ReconnectMin}, {&c.ReconnectMax, &d.ReconnectMax},
		{&c.StaleAfter, &d.StaleAfter},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	return c
}

// Validate reports every problem in c (after defaults), each prefixed by
// its key, joined with errors.Join.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("camera."+key+": "+format, args...))
	}
	switch c.Source {
	case KindV4L2:
		if c.Device == "" && c.ByID == "" {
			bad("device", "set device (e.g. /dev/video0) or by_id (a name under /dev/v4l/by-id); `energyflow camera list` shows them")
		}
		if c.Device != "" && !strings.HasPrefix(c.Device, "/") {
			bad("device", "%q must be an absolute path such as /dev/video0", c.Device)
		}
		if strings.Contains(c.ByID, "..") {
			bad("by_id", "%q must not contain ..", c.ByID)
		}
	case KindHTTP:
		u, err := url.Parse(c.URL)
		switch {
		case c.URL == "":
			bad("url", "required for source http (e.g. http://127.0.0.1:8081/stream.mjpg)")
		case err != nil:
			bad("url", "%v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("url", "%q: scheme must be http or https", c.URL)
		case u.Host == "":
			bad("url", "%q has no host", c.URL)
		}
	case KindReplay:
		r := c.Replay
		switch {
		case r.Dir == "" && r.File == "":
			bad("replay", "set replay.dir (a directory of images) or replay.file (an .mjpeg or .yuyv recording)")
		case r.Dir != "" && r.File != "":
			bad("replay", "set only one of replay.dir and replay.file")
		case r.File != "":
			switch strings.ToLower(filepath.Ext(r.File)) {
			case ".mjpeg", ".mjpg", ".jpg", ".jpeg":
			case ".yuyv", ".yuv":
				if c.Width%2 != 0 {
					bad("width", "%d must be even for a YUYV recording", c.Width)
				}
			default:
				bad("replay.file", "%q: want an .mjpeg/.mjpg or .yuyv/.yuv recording", r.File)
			}
		}
		if r.Rate < 0 {
			bad("replay.rate", "%v must be ≥ 0 frames per second (0 = as fast as read)", r.Rate)
		}
	default:
		bad("source", "%q is not one of v4l2, http, replay", c.Source)
	}
	if _, err := ParseFormat(c.Format); err != nil || c.Format == "rgb24" {
		bad("format", "%q is not mjpeg or yuyv", c.Format)
	}
	if c.Width <= 0 || c.Height <= 0 || c.Width > 8192 || c.Height > 8192 {
		bad("width", "size %dx%d must be positive and at most 8192×8192 (set width and height)", c.Width, c.Height)
	}
	if c.FPS < 0 || c.FPS > 1000 {
		bad("fps", "%v must be in (0, 1000]", c.FPS)
	}
	if c.Buffers < 1 || c.Buffers > 32 {
		bad("buffers", "%d must be in 1..32 (2–4 keeps latency low)", c.Buffers)
	}
	if c.YUVRange != "limited" && c.YUVRange != "full" {
		bad("yuv_range", "%q is not limited or full", c.YUVRange)
	}
	if c.CaptureLatency < 0 || c.CaptureLatency > time.Second {
		bad("capture_latency", "%v must be in [0, 1s]", c.CaptureLatency)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"read_timeout", c.ReadTimeout}, {"connect_timeout", c.ConnectTimeout},
		{"reconnect_min", c.ReconnectMin}, {"reconnect_max", c.ReconnectMax}, {"stale_after", c.StaleAfter}} {
		if d.v < 0 {
			bad(d.key, "%v must be positive", d.v)
		}
	}
	if c.ReconnectMax < c.ReconnectMin {
		bad("reconnect_max", "%v is less than reconnect_min %v", c.ReconnectMax, c.ReconnectMin)
	}
	return errors.Join(errs...)
}

// yuvRange maps the config string.
func (c Config) yuvRange() YUVRange {
	if c.YUVRange == "full" {
		return RangeFull
	}
	return RangeLimited
}

// Range is the YUV range a YUYV frame of this camera is converted with
// (yuv_range; limited when unset). JPEG frames are full range whatever it
// says.
func (c Config) Range() YUVRange { return c.WithDefaults().yuvRange() }

// PipelineOptions returns the pipeline options the config implies.
func (c Config) PipelineOptions() []PipelineOption {
	return []PipelineOption{WithYUVRange(c.WithDefaults().yuvRange())}
}

// Open validates cfg and opens the source it names. The caller owns the
// result and must Close it.
func Open(cfg Config, log *slog.Logger) (SourceCloser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Source {
	case KindHTTP:
		return NewHTTPSource(cfg, log), nil
	case KindReplay:
		return OpenReplay(cfg)
	default:
		return OpenV4L2(cfg, log)
	}
}

// backoff is an exponential reconnect delay.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur *= 2
		if b.cur > b.max {
			b.cur = b.max
		}
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
