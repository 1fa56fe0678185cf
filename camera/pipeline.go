package camera

import "fmt"

// Pipeline turns frames into RGB (for the live view) and into the model
// tensor (for the vision engine). It owns its buffers and reuses them:
// after the first frame of a given size, the YUYV and RGB paths allocate
// nothing; the MJPEG path allocates only inside image/jpeg. Not safe for
// concurrent use: give each goroutine its own Pipeline.
type Pipeline struct {
	pre  *Preprocessor
	dec  JPEGDecoder
	rgb  RGB
	yuvR YUVRange
}

// PipelineOption configures a Pipeline.
type PipelineOption func(*Pipeline)

// WithYUVRange sets how YUYV frames are interpreted (default
// RangeLimited, BT.601 studio range as UVC cameras send it).
func WithYUVRange(r YUVRange) PipelineOption { return func(p *Pipeline) { p.yuvR = r } }

// NewPipeline returns a pipeline applying spec.
func NewPipeline(spec Preprocess, opts ...PipelineOption) (*Pipeline, error) {
	pre, err := NewPreprocessor(spec)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{pre: pre}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// Spec returns the preprocessing spec.
func (p *Pipeline) Spec() Preprocess { return p.pre.spec }

// ToRGB decodes f into RGB, reusing dst's buffer.
func ToRGB(dst *RGB, f *Frame, dec *JPEGDecoder, rng YUVRange) error {
	switch f.Format {
	case FormatYUYV:
		return YUYVToRGB(dst, f.Data, f.Width, f.Height, f.Stride, rng)
	case FormatMJPEG, FormatJPEG:
		return dec.Decode(dst, f.Data)
	case FormatRGB24:
		stride := f.Stride
		if stride == 0 {
			stride = 3 * f.Width
		}
		if f.Width <= 0 || f.Height <= 0 || stride < 3*f.Width || len(f.Data) < stride*(f.Height-1)+3*f.Width {
			return fmt.Errorf("%w: RGB24 %dx%d stride %d with %d bytes", ErrBadFrame, f.Width, f.Height, stride, len(f.Data))
		}
		dst.resize(f.Width, f.Height)
		for y := 0; y < f.Height; y++ {
			copy(dst.Pix[y*dst.Stride:y*dst.Stride+3*f.Width], f.Data[y*stride:])
		}
		return nil
	}
	return fmt.Errorf("%w: pixel format %v", ErrUnsupported, f.Format)
}

// RGB decodes f into the pipeline's RGB buffer and returns it. The result
// is valid until the next call on p; copy it (RGB.CopyTo) to keep it.
func (p *Pipeline) RGB(f *Frame) (*RGB, error) {
	if err := ToRGB(&p.rgb, f, &p.dec, p.yuvR); err != nil {
		return nil, err
	}
	return &p.rgb, nil
}

// Tensor writes the model tensor for img into dst (length
// TensorLen(img.Width, img.Height)).
func (p *Pipeline) Tensor(dst []float32, img *RGB) error { return p.pre.Apply(dst, img) }

// TensorLen is the tensor length for a w×h input: 3·outH·outW.
func (p *Pipeline) TensorLen(w, h int) int { return p.pre.spec.TensorLen(w, h) }

// Process decodes f and writes its tensor into dst. It returns the decoded
// RGB image, valid until the next call on p.
func (p *Pipeline) Process(dst []float32, f *Frame) (*RGB, error) {
	img, err := p.RGB(f)
	if err != nil {
		return nil, err
	}
	if err := p.pre.Apply(dst, img); err != nil {
		return nil, err
	}
	return img, nil
}
