package camera

import (
	"errors"
	"fmt"
)

// Preprocess is the model's image preprocessing, mirroring the bundle
// manifest's image `preprocess` block (docs/bundle.md):
//
//	RGB bytes → resize (bilinear, half-pixel centres, align_corners=False,
//	no antialias, on float values 0..255) → center crop → x/255 →
//	(x - mean)/std per channel → CHW float32
//
// exactly as training/energyflow/preprocess.py does it with
// torch.nn.functional.interpolate. Sizes are [height, width] as in the
// manifest and torch. Mean and Std are per output channel, in ChannelOrder.
type Preprocess struct {
	// Resize is the [H, W] to resize to; zero means keep the input size.
	Resize [2]int `yaml:"resize" json:"resize"`
	// Crop is the [H, W] center crop taken from the resized image; zero
	// means no crop.
	Crop [2]int `yaml:"crop" json:"crop"`
	// ChannelOrder is "RGB" (default when empty) or "BGR".
	ChannelOrder string     `yaml:"channel_order" json:"channel_order"`
	Mean         [3]float32 `yaml:"mean" json:"mean"`
	Std          [3]float32 `yaml:"std" json:"std"`
}

// Validate reports every problem with the spec, each with its key.
func (p Preprocess) Validate() error {
	var errs []error
	for i, k := range [2]string{"height", "width"} {
		if p.Resize[i] < 0 {
			errs = append(errs, fmt.Errorf("preprocess.resize: %s %d must be ≥ 0", k, p.Resize[i]))
		}
		if p.Crop[i] < 0 {
			errs = append(errs, fmt.Errorf("preprocess.crop: %s %d must be ≥ 0", k, p.Crop[i]))
		}
		if p.Resize[i] > 0 && p.Crop[i] > p.Resize[i] {
			errs = append(errs, fmt.Errorf("preprocess.crop: %s %d is larger than the resize %s %d", k, p.Crop[i], k, p.Resize[i]))
		}
	}
	if (p.Resize[0] == 0) != (p.Resize[1] == 0) {
		errs = append(errs, errors.New("preprocess.resize: give both height and width, or neither"))
	}
	if (p.Crop[0] == 0) != (p.Crop[1] == 0) {
		errs = append(errs, errors.New("preprocess.crop: give both height and width, or neither"))
	}
	switch p.ChannelOrder {
	case "", "RGB", "BGR":
	default:
		errs = append(errs, fmt.Errorf("preprocess.channel_order: %q is not RGB or BGR", p.ChannelOrder))
	}
	for c, s := range p.Std {
		if !(s > 0) {
			errs = append(errs, fmt.Errorf("preprocess.std[%d]: %v must be > 0", c, s))
		}
	}
	return errors.Join(errs...)
}

// OutputSize returns the tensor's height and width for an input of w×h.
func (p Preprocess) OutputSize(inW, inH int) (h, w int) {
	h, w = inH, inW
	if p.Resize[0] > 0 {
		h, w = p.Resize[0], p.Resize[1]
	}
	if p.Crop[0] > 0 {
		h, w = p.Crop[0], p.Crop[1]
	}
	return h, w
}

// TensorLen returns 3·h·w for an input of w×h.
func (p Preprocess) TensorLen(inW, inH int) int {
	h, w := p.OutputSize(inW, inH)
	return 3 * h * w
}

// cropOffset is the first kept row/column of a center crop: floor((n-c)/2),
// as torchvision's center_crop and preprocess.py compute it for even
// differences (and preprocess.py for odd ones).
func cropOffset(n, c int) int { return (n - c) / 2 }

// tap is one output coordinate's two source samples and weights.
type tap struct {
	i0, i1 int // source indices (already multiplied by the element stride)
	w0, w1 float32
}

// Preprocessor applies a Preprocess spec. It caches its sampling tables
// for the last input size, so after the first frame of a size it
// allocates nothing. Not safe for concurrent use.
type Preprocessor struct {
	spec       Preprocess
	inW, inH   int
	outW, outH int
	xs, ys     []tap
	chanSrc    [3]int // output channel c reads RGB channel chanSrc[c]
}

// NewPreprocessor validates spec and returns a Preprocessor for it.
func NewPreprocessor(spec Preprocess) (*Preprocessor, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("camera: %w", err)
	}
	p := &Preprocessor{spec: spec, chanSrc: [3]int{0, 1, 2}}
	if spec.ChannelOrder == "BGR" {
		p.chanSrc = [3]int{2, 1, 0}
	}
	return p, nil
}

// Spec returns the spec p applies.
func (p *Preprocessor) Spec() Preprocess { return p.spec }

// linearTaps computes, for the outputs [off, off+n) of a resize from in to
// out, torch's bilinear source indices and weights (align_corners=False,
// scale = in/out in float32, negative source positions clamped to 0).
func linearTaps(dst []tap, in, out, off, n, stride int) []tap {
	dst = dst[:0]
	scale := float32(in) / float32(out)
	for i := off; i < off+n; i++ {
		// float32(…) rounds the product first: no fused multiply-subtract
		// on arm64, so the taps match torch's on every platform.
		src := float32(scale*(float32(i)+0.5)) - 0.5
		if src < 0 {
			src = 0
		}
		i0 := int(src) // floor, src ≥ 0
		if i0 > in-1 {
			i0 = in - 1
		}
		l1 := src - float32(i0)
		if l1 > 1 {
			l1 = 1
		}
		i1 := i0
		if i0 < in-1 {
			i1 = i0 + 1
		}
		dst = append(dst, tap{i0: i0 * stride, i1: i1 * stride, w0: 1 - l1, w1: l1})
	}
	return dst
}

func (p *Preprocessor) prepare(inW, inH int) {
	if inW == p.inW && inH == p.inH && p.xs != nil {
		return
	}
	rh, rw := inH, inW
	if p.spec.Resize[0] > 0 {
		rh, rw = p.spec.Resize[0], p.spec.Resize[1]
	}
	ch, cw := rh, rw
	if p.spec.Crop[0] > 0 {
		ch, cw = p.spec.Crop[0], p.spec.Crop[1]
	}
	p.ys = linearTaps(p.ys, inH, rh, cropOffset(rh, ch), ch, 1)
	p.xs = linearTaps(p.xs, inW, rw, cropOffset(rw, cw), cw, 3)
	p.inW, p.inH, p.outW, p.outH = inW, inH, cw, ch
}

// Apply writes the CHW float32 tensor for src into dst, which must have
// length TensorLen(src.Width, src.Height).
func (p *Preprocessor) Apply(dst []float32, src *RGB) error {
	if src.Width <= 0 || src.Height <= 0 || src.Stride < 3*src.Width || len(src.Pix) < (src.Height-1)*src.Stride+3*src.Width {
		return fmt.Errorf("%w: RGB image %dx%d, stride %d, %d bytes", ErrBadFrame, src.Width, src.Height, src.Stride, len(src.Pix))
	}
	if p.spec.Resize[0] == 0 && p.spec.Crop[0] > 0 && (p.spec.Crop[0] > src.Height || p.spec.Crop[1] > src.Width) {
		return fmt.Errorf("camera: crop %dx%d is larger than the %dx%d image", p.spec.Crop[1], p.spec.Crop[0], src.Width, src.Height)
	}
	p.prepare(src.Width, src.Height)
	plane := p.outW * p.outH
	if len(dst) != 3*plane {
		return fmt.Errorf("camera: tensor has %d floats, want 3×%d×%d = %d", len(dst), p.outH, p.outW, 3*plane)
	}
	var mean, std [3]float32
	for c := 0; c < 3; c++ {
		mean[c], std[c] = p.spec.Mean[c], p.spec.Std[c]
	}
	d0 := dst[0*plane : 1*plane]
	d1 := dst[1*plane : 2*plane]
	d2 := dst[2*plane : 3*plane]
	c0, c1, c2 := p.chanSrc[0], p.chanSrc[1], p.chanSrc[2]
	k := 0
	for _, ty := range p.ys {
		r0 := src.Pix[ty.i0*src.Stride:]
		r1 := src.Pix[ty.i1*src.Stride:]
		for _, tx := range p.xs {
			a := r0[tx.i0 : tx.i0+3 : tx.i0+3]
			b := r0[tx.i1 : tx.i1+3 : tx.i1+3]
			e := r1[tx.i0 : tx.i0+3 : tx.i0+3]
			f := r1[tx.i1 : tx.i1+3 : tx.i1+3]
			d0[k] = (lerp2(a[c0], b[c0], e[c0], f[c0], tx, ty)/255 - mean[0]) / std[0]
			d1[k] = (lerp2(a[c1], b[c1], e[c1], f[c1], tx, ty)/255 - mean[1]) / std[1]
			d2[k] = (lerp2(a[c2], b[c2], e[c2], f[c2], tx, ty)/255 - mean[2]) / std[2]
			k++
		}
	}
	return nil
}

// lerp2 is torch's bilinear sum order: rows first (over width), then the
// two rows weighted by height.
func lerp2(p00, p01, p10, p11 byte, tx, ty tap) float32 {
	t0 := float32(float32(p00)*tx.w0) + float32(float32(p01)*tx.w1)
	t1 := float32(float32(p10)*tx.w0) + float32(float32(p11)*tx.w1)
	return float32(t0*ty.w0) + float32(t1*ty.w1)
}

// PreprocessFromSlices builds a Preprocess from the manifest's JSON shapes
// (engines.Preprocess has slices): resize and crop as [H, W], three means
// and stds. It validates the result.
func PreprocessFromSlices(resize, crop []int, channelOrder string, mean, std []float32) (Preprocess, error) {
	var p Preprocess
	var errs []error
	if len(resize) != 2 {
		errs = append(errs, fmt.Errorf("preprocess.resize: %v is not [H, W]", resize))
	} else {
		p.Resize = [2]int{resize[0], resize[1]}
	}
	if len(crop) != 2 {
		errs = append(errs, fmt.Errorf("preprocess.crop: %v is not [H, W]", crop))
	} else {
		p.Crop = [2]int{crop[0], crop[1]}
	}
	if len(mean) != 3 || len(std) != 3 {
		errs = append(errs, fmt.Errorf("preprocess: mean/std have %d/%d values, want 3 each", len(mean), len(std)))
	} else {
		copy(p.Mean[:], mean)
		copy(p.Std[:], std)
	}
	p.ChannelOrder = channelOrder
	if len(errs) == 0 {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Preprocess{}, fmt.Errorf("camera: %w", err)
	}
	return p, nil
}
