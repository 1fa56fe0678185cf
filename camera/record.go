package camera

import (
	"context"
	"fmt"
	"io"
)

// Recorder wraps a Source and appends every frame it delivers to w, in
// the formats Replay reads back: MJPEG frames concatenated (an .mjpeg
// file), YUYV frames raw and unpadded (a .yuyv file of that width and
// height). It records only frames of the first frame's format and size;
// a change makes Read return an error (the frame is still delivered in f).
// The Recorder does not close w.
type Recorder struct {
	Source
	w      io.Writer
	first  Frame // format and size of the recording
	n      int
	row    []byte
	failed error
}

// NewRecorder returns src with recording to w.
func NewRecorder(src Source, w io.Writer) *Recorder { return &Recorder{Source: src, w: w} }

// Frames is the number of frames recorded.
func (r *Recorder) Frames() int { return r.n }

// Read implements Source.
func (r *Recorder) Read(ctx context.Context, f *Frame) error {
	if err := r.Source.Read(ctx, f); err != nil {
		return err
	}
	if r.failed != nil {
		return r.failed
	}
	if r.n == 0 {
		r.first = Frame{Format: f.Format, Width: f.Width, Height: f.Height}
	}
	if f.Format != r.first.Format || f.Width != r.first.Width || f.Height != r.first.Height {
		return fmt.Errorf("camera: recorder: frame %v %dx%d differs from the recording's %v %dx%d; not recorded",
			f.Format, f.Width, f.Height, r.first.Format, r.first.Width, r.first.Height)
	}
	var err error
	switch f.Format {
	case FormatMJPEG, FormatJPEG:
		_, err = r.w.Write(f.Data)
	case FormatYUYV:
		stride := f.Stride
		if stride == 0 {
			stride = 2 * f.Width
		}
		for y := 0; y < f.Height && err == nil; y++ {
			if y*stride+2*f.Width > len(f.Data) {
				err = fmt.Errorf("%w: short YUYV frame", ErrBadFrame)
				break
			}
			_, err = r.w.Write(f.Data[y*stride : y*stride+2*f.Width])
		}
	default:
		err = fmt.Errorf("%w: recording %v frames", ErrUnsupported, f.Format)
	}
	if err != nil {
		r.failed = fmt.Errorf("camera: recorder: %w", err)
		return r.failed
	}
	r.n++
	return nil
}
