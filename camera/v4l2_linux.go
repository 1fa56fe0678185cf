//go:build linux

package camera

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/blackjack/webcam"
	"golang.org/x/sys/unix"
)

// timeoutsBeforeReopen is how many consecutive read timeouts make V4L2
// close and reopen the device (some unplugs show up only as silence).
const timeoutsBeforeReopen = 3

// V4L2 captures from a Video4Linux2 device through
// github.com/blackjack/webcam (v0.6.1).
//
// It negotiates the configured format (MJPEG or YUYV), size and rate and
// reports what the driver chose in Info; it requests a small buffer count
// (the library's default is 256); it copies every frame out of the driver
// buffer and gives the buffer back at once (GetFrame, copy, ReleaseFrame).
// When the device disappears (unplug: ENODEV) or stays silent for three
// read timeouts it is closed, and later Reads reopen it — by its by-id
// name when configured, so a re-plug into another port is found — with
// exponential backoff; meanwhile Read returns errors wrapping
// ErrDisconnected and Capture reports the camera stale.
//
// The library's poll timeout is in whole seconds, so read_timeout is
// rounded up to seconds and Halt, Close or a cancelled ctx take effect
// within one second. Frame.Time is the dequeue time minus
// capture_latency: webcam v0.6.1 does not expose the driver's timestamp.
type V4L2 struct {
	cfg    Config
	log    *slog.Logger
	format PixelFormat

	mu     sync.Mutex // serialises device access (Read vs Halt/Close)
	cam    *webcam.Webcam
	info   Info
	stride int

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
	bo        backoff
	nextTry   time.Time
	timeouts  int
	seq       uint64
	reopens   atomic.Int64
	gen       atomic.Uint64 // bumped by Halt: a Read in progress returns ErrHalted
}

var _ SourceCloser = (*V4L2)(nil)

// OpenV4L2 opens and configures the device cfg names and starts streaming.
// A missing device fails at once with an error wrapping ErrNoDevice.
func OpenV4L2(cfg Config, log *slog.Logger) (*V4L2, error) {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pf, err := ParseFormat(cfg.Format)
	if err != nil {
		return nil, err
	}
	if DevicePath(cfg) == "" {
		return nil, fmt.Errorf("%w: none configured (set camera.device or camera.by_id; `energyflow camera list` shows them)", ErrNoDevice)
	}
	v := &V4L2{cfg: cfg, log: log, format: pf, done: make(chan struct{}),
		bo: backoff{min: cfg.ReconnectMin, max: cfg.ReconnectMax}}
	if err := v.start(); err != nil {
		return nil, err
	}
	return v, nil
}

// deviceError turns an open/ioctl error into one a person can act on.
func deviceError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: open %s — is the camera plugged in? `energyflow camera list` shows attached cameras", ErrNoDevice, path)
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("%w: open %s: %v — the camera was unplugged", ErrNoDevice, path, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("camera: open %s: permission denied — is the service user in group 'video'?", path)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("camera: open %s: device busy — another process is capturing from it", path)
	}
	return fmt.Errorf("camera: open %s: %w", path, err)
}

// start opens, negotiates and starts streaming. Caller holds mu (or is
// the constructor).
func (v *V4L2) start() error {
	path := DevicePath(v.cfg)
	cam, err := webcam.Open(path)
	if err != nil {
		return deviceError(path, err)
	}
	ok := false
	defer func() {
		if !ok {
			cam.Close()
		}
	}()
	formats := cam.GetSupportedFormats()
	if _, has := formats[webcam.PixelFormat(v.format)]; !has {
		var have []string
		for f, d := range formats {
			have = append(have, fmt.Sprintf("%v (%s)", PixelFormat(f), d))
		}
		sort.Strings(have)
		return fmt.Errorf("camera: %s does not offer %v; it offers %s — set camera.format", path, v.format, strings.Join(have, ", "))
	}
	code, _, _, err := cam.SetImageFormat(webcam.PixelFormat(v.format), uint32(v.cfg.Width), uint32(v.cfg.Height))
	if err != nil {
		return fmt.Errorf("camera: %s: set format %v %dx%d: %w", path, v.format, v.cfg.Width, v.cfg.Height, err)
	}
	if PixelFormat(code) != v.format {
		return fmt.Errorf("camera: %s: asked for %v, driver chose %v", path, v.format, PixelFormat(code))
	}
	// webcam v0.6.1's SetImageFormat returns the requested size, not the
	// driver's; ask the driver (VIDIOC_G_FMT) what it chose.
	pix, err := getFormat(path)
	if err != nil {
		return fmt.Errorf("camera: %s: query format: %w", path, err)
	}
	if v.cfg.FPS > 0 {
		if err := cam.SetFramerate(float32(v.cfg.FPS)); err != nil {
			v.log.Warn("camera: driver refused the frame rate", "device", path, "fps", v.cfg.FPS, "err", err)
		}
	}
	fps, _ := cam.GetFramerate()
	if err := cam.SetBufferCount(uint32(v.cfg.Buffers)); err != nil {
		return fmt.Errorf("camera: %s: buffer count: %w", path, err)
	}
	if err := cam.StartStreaming(); err != nil {
		return fmt.Errorf("camera: %s: start streaming: %w", path, err)
	}
	name, _ := cam.GetName()
	ok = true
	v.cam = cam
	v.stride = int(pix.bytesPerLine)
	if v.format != FormatYUYV {
		v.stride = 0
	}
	v.info = Info{Name: name, Format: v.format, Width: int(pix.width), Height: int(pix.height), FPS: float64(fps)}
	if int(pix.width) != v.cfg.Width || int(pix.height) != v.cfg.Height {
		v.log.Warn("camera: driver chose another size", "device", path,
			"asked", fmt.Sprintf("%dx%d", v.cfg.Width, v.cfg.Height), "got", fmt.Sprintf("%dx%d", pix.width, pix.height))
	}
	v.log.Info("camera: streaming", "device", path, "name", name, "format", v.format.String(),
		"width", pix.width, "height", pix.height, "fps", fps, "buffers", v.cfg.Buffers)
	return nil
}

// stop closes the device. Caller holds mu.
func (v *V4L2) stop() {
	if v.cam != nil {
		_ = v.cam.Close() // stops streaming, unmaps buffers, closes the fd
		v.cam = nil
	}
}

// Info implements Source: what the driver chose at the last (re)open.
func (v *V4L2) Info() Info {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.info
}

// Reopens counts successful reopens after a disconnect.
func (v *V4L2) Reopens() int64 { return v.reopens.Load() }

// Read implements Source.
func (v *V4L2) Read(ctx context.Context, f *Frame) error {
	timeoutS := int((v.cfg.ReadTimeout + time.Second - 1) / time.Second)
	gen := v.gen.Load()
	for waited := 0; ; {
		if v.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if v.gen.Load() != gen {
			return ErrHalted
		}
		v.mu.Lock()
		if v.cam == nil {
			wait := time.Until(v.nextTry)
			v.mu.Unlock()
			if err := sleepCtx(ctx, wait, v.done); err != nil {
				return err
			}
			v.mu.Lock()
			if v.closed.Load() {
				v.mu.Unlock()
				return ErrClosed
			}
			if v.cam == nil {
				if err := v.start(); err != nil {
					d := v.bo.next()
					v.nextTry = time.Now().Add(d)
					v.mu.Unlock()
					return fmt.Errorf("%w: reopen failed: %s (next try in %v)", ErrDisconnected, trimPkg(err), d)
				}
				v.bo.reset()
				v.reopens.Add(1)
			}
		}
		err := v.readOnce(f)
		if err == errSlice {
			waited++
			if waited < timeoutS {
				v.mu.Unlock() // let Halt/Close in between one-second slices
				continue
			}
			err = v.timedOut()
		}
		v.mu.Unlock()
		if err == errAgain {
			continue
		}
		return err
	}
}

var (
	errAgain = errors.New("again")           // spurious wake-up: read again
	errSlice = errors.New("one second gone") // no frame in this poll slice
)

// timedOut counts a read timeout and closes the device after
// timeoutsBeforeReopen in a row. Caller holds mu.
func (v *V4L2) timedOut() error {
	path := DevicePath(v.cfg)
	v.timeouts++
	if v.timeouts >= timeoutsBeforeReopen {
		v.timeouts = 0
		v.stop()
		v.nextTry = time.Now()
		return fmt.Errorf("%w: %s (%d in a row; reopening the device)", ErrTimeout, path, timeoutsBeforeReopen)
	}
	return fmt.Errorf("%w: %s (%v)", ErrTimeout, path, v.cfg.ReadTimeout)
}

// readOnce waits up to one second for a frame and copies it out. Caller
// holds mu.
func (v *V4L2) readOnce(f *Frame) error {
	path := DevicePath(v.cfg)
	err := v.cam.WaitForFrame(1)
	var to *webcam.Timeout
	if errors.As(err, &to) {
		return errSlice
	}
	if err != nil {
		return v.lost(path, err)
	}
	buf, idx, err := v.cam.GetFrame()
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return errAgain
	}
	if err != nil {
		return v.lost(path, err)
	}
	now := time.Now()
	if len(buf) == 0 {
		_ = v.cam.ReleaseFrame(idx)
		return errAgain
	}
	f.setData(buf) // copy out before the driver reuses the buffer
	if err := v.cam.ReleaseFrame(idx); err != nil {
		return v.lost(path, err)
	}
	v.timeouts = 0
	v.seq++
	f.Format, f.Width, f.Height, f.Stride, f.Seq = v.format, v.info.Width, v.info.Height, v.stride, v.seq
	f.Time = now.Add(-v.cfg.CaptureLatency)
	return nil
}

// lost closes the device after an I/O error and schedules a reopen.
func (v *V4L2) lost(path string, err error) error {
	v.stop()
	d := v.bo.next()
	v.nextTry = time.Now().Add(d)
	v.log.Warn("camera: device lost; will reopen", "device", path, "err", err, "retry_in", d)
	return fmt.Errorf("%w: %s: %v (reopening in %v)", ErrDisconnected, path, err, d)
}

// Halt implements Source: streaming stops and the device is closed (the
// camera's LED goes off); a Read in progress returns ErrHalted (within
// about one second) and the next Read reopens the device.
func (v *V4L2) Halt(context.Context) error {
	v.gen.Add(1)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stop()
	v.nextTry = time.Time{}
	return nil
}

// Close implements io.Closer; idempotent.
func (v *V4L2) Close() error {
	v.closed.Store(true)
	v.closeOnce.Do(func() { close(v.done) })
	return v.Halt(context.Background())
}

// v4l2PixFormat mirrors struct v4l2_pix_format.
type v4l2PixFormat struct {
	width, height, pixelformat, field, bytesPerLine, sizeImage, colorspace, priv, flags, ycbcrEnc, quantization, xferFunc uint32
}

// v4l2Format mirrors struct v4l2_format: a u32 type and a 200-byte union
// aligned like a pointer (it contains struct v4l2_window).
type v4l2Format struct {
	typ uint32
	fmt struct {
		_   [0]uintptr
		raw [200]byte
	}
}

const (
	v4l2BufTypeVideoCapture = 1
	iocRead                 = 2
	iocWrite                = 1
)

// vidiocGFmt is _IOWR('V', 4, struct v4l2_format).
var vidiocGFmt = uintptr((iocRead|iocWrite)<<30 | uint32(unsafe.Sizeof(v4l2Format{}))<<16 | 'V'<<8 | 4)

// getFormat asks the driver for the current capture format on a second
// file descriptor (V4L2 allows several opens; G_FMT does not disturb
// streaming).
func getFormat(path string) (v4l2PixFormat, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return v4l2PixFormat{}, err
	}
	defer unix.Close(fd)
	var f v4l2Format
	f.typ = v4l2BufTypeVideoCapture
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), vidiocGFmt, uintptr(unsafe.Pointer(&f))); e != 0 {
		return v4l2PixFormat{}, e
	}
	return *(*v4l2PixFormat)(unsafe.Pointer(&f.fmt.raw[0])), nil
}

// List enumerates /dev/video* with their by-id names, formats and sizes.
// Nodes that cannot be opened are listed with the error; metadata-only
// nodes (no capture capability) are listed with that reason.
func List() ([]Device, error) {
	nodes, _ := filepath.Glob("/dev/video*")
	sort.Strings(nodes)
	byID := map[string][]string{}
	if ents, err := os.ReadDir(ByIDDir); err == nil {
		for _, e := range ents {
			link := filepath.Join(ByIDDir, e.Name())
			if t, err := filepath.EvalSymlinks(link); err == nil {
				byID[t] = append(byID[t], e.Name())
			}
		}
	}
	devs := make([]Device, 0, len(nodes))
	for _, n := range nodes {
		d := Device{Path: n, ByID: byID[n]}
		cam, err := webcam.Open(n)
		if err != nil {
			d.Err = err.Error()
			devs = append(devs, d)
			continue
		}
		d.Name, _ = cam.GetName()
		d.Bus, _ = cam.GetBusInfo()
		fm := cam.GetSupportedFormats()
		codes := make([]webcam.PixelFormat, 0, len(fm))
		for c := range fm {
			codes = append(codes, c)
		}
		sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
		for _, c := range codes {
			fd := FormatDesc{Format: PixelFormat(c).String(), Description: fm[c]}
			for _, s := range cam.GetSupportedFrameSizes(c) {
				size := s.GetString()
				if s.StepWidth == 0 && s.StepHeight == 0 {
					var rates []string
					for _, r := range cam.GetSupportedFramerates(c, s.MaxWidth, s.MaxHeight) {
						if r.StepNumerator == 0 && r.StepDenominator == 0 && r.MinNumerator > 0 {
							rates = append(rates, fmt.Sprintf("%g", float64(r.MinDenominator)/float64(r.MinNumerator)))
						}
					}
					if len(rates) > 0 {
						size += " @ " + strings.Join(rates, "/") + " fps"
					}
				}
				fd.Sizes = append(fd.Sizes, size)
			}
			d.Formats = append(d.Formats, fd)
		}
		cam.Close()
		devs = append(devs, d)
	}
	return devs, nil
}
