package camera

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// PixelFormat is the layout of a frame's bytes. The values are the V4L2
// fourcc codes (little-endian), so a V4L2 format maps to itself.
type PixelFormat uint32

// Pixel formats the package understands.
const (
	FormatYUYV  PixelFormat = 0x56595559 // 'YUYV': packed 4:2:2, Y0 U Y1 V
	FormatMJPEG PixelFormat = 0x47504A4D // 'MJPG': one JPEG per frame
	FormatJPEG  PixelFormat = 0x4745504A // 'JPEG': treated like MJPEG
	FormatRGB24 PixelFormat = 0x33424752 // 'RGB3': packed R G B bytes
)

// String returns the fourcc, e.g. "YUYV".
func (p PixelFormat) String() string {
	b := [4]byte{byte(p), byte(p >> 8), byte(p >> 16), byte(p >> 24)}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("0x%08x", uint32(p))
		}
	}
	return string(b[:])
}

// ParseFormat maps a config name ("mjpeg", "yuyv", "rgb24") to a format.
func ParseFormat(s string) (PixelFormat, error) {
	switch s {
	case "mjpeg", "MJPG", "mjpg", "MJPEG", "jpeg":
		return FormatMJPEG, nil
	case "yuyv", "YUYV", "yuyv422", "YUY2":
		return FormatYUYV, nil
	case "rgb24", "RGB3", "rgb":
		return FormatRGB24, nil
	}
	return 0, fmt.Errorf("camera: unknown pixel format %q (want mjpeg or yuyv)", s)
}

// Frame is one captured image. The bytes in Data belong to whoever owns the
// Frame; sources copy into it and grow Data only when it is too small, so a
// Frame reused for every Read costs no allocation after the first.
type Frame struct {
	Format PixelFormat
	Width  int
	Height int
	// Stride is the number of bytes per row for raw formats (YUYV, RGB24);
	// zero for compressed ones.
	Stride int
	Data   []byte
	// Time is when the frame was captured, on the local monotonic clock
	// (a time.Time from time.Now, adjusted back by any known latency).
	Time time.Time
	// Seq counts frames delivered by the source, from 1.
	Seq uint64
}

// setData copies b into f.Data, reusing its capacity.
func (f *Frame) setData(b []byte) {
	if cap(f.Data) < len(b) {
		f.Data = make([]byte, len(b), len(b)+len(b)/4)
	}
	f.Data = f.Data[:len(b)]
	copy(f.Data, b)
}

// CopyTo copies f into dst, reusing dst's buffer.
func (f *Frame) CopyTo(dst *Frame) {
	d := dst.Data
	*dst = *f
	dst.Data = d
	dst.setData(f.Data)
}

// Info describes what a source delivers, as negotiated with the device.
type Info struct {
	Name   string      // human-readable device or stream name
	Format PixelFormat // what frames carry
	Width  int         // 0 when not known before the first frame
	Height int
	FPS    float64 // what the driver chose; 0 when unknown
}

// Source yields frames. It is used by one goroutine at a time, except that
// Halt and Close may be called from another goroutine to stop a blocked
// Read.
type Source interface {
	// Read blocks until the next frame, copies it into f and returns nil.
	// It returns ctx.Err() when ctx ends, ErrTimeout when no frame came
	// within the configured read timeout, an error wrapping
	// ErrDisconnected when the device or stream went away (the next Read
	// reconnects, with backoff), io.EOF at the end of a finite replay,
	// ErrHalted when Halt interrupted it and ErrClosed after Close.
	Read(ctx context.Context, f *Frame) error
	// Info reports the negotiated format, size and rate.
	Info() Info
	// Halt makes the source inert: streaming off, connection dropped,
	// buffers released. The next Read starts it again. It works with a
	// cancelled ctx and is safe to call more than once.
	Halt(ctx context.Context) error
}

// SourceCloser is what the application holds: a Source it must Close.
// Close is idempotent; Reads after it return ErrClosed.
type SourceCloser interface {
	Source
	io.Closer
}

// trimPkg is err's message without a leading "camera: ".
func trimPkg(err error) string {
	s := err.Error()
	if len(s) > 8 && s[:8] == "camera: " {
		return s[8:]
	}
	return s
}

// Sentinel errors. Test with errors.Is.
var (
	// ErrClosed is returned by Read after Close.
	ErrClosed = errors.New("camera: source closed")
	// ErrHalted is returned by a Read that was in progress when Halt was
	// called; the next Read starts the source again.
	ErrHalted = errors.New("camera: halted")
	// ErrTimeout means no frame arrived within the read timeout.
	ErrTimeout = errors.New("camera: no frame within the read timeout")
	// ErrDisconnected means the device or stream went away; the next Read
	// reconnects.
	ErrDisconnected = errors.New("camera: disconnected")
	// ErrNoDevice means the configured V4L2 device does not exist.
	ErrNoDevice = errors.New("camera: no such device")
	// ErrUnsupported means the platform or format is not supported.
	ErrUnsupported = errors.New("camera: not supported")
	// ErrBadFrame means a frame's bytes do not match its format or size.
	ErrBadFrame = errors.New("camera: bad frame")
	// ErrNoFrame means the history holds no matching frame yet.
	ErrNoFrame = errors.New("camera: no frame yet")
)
