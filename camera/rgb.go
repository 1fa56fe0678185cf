package camera

import (
	"image"
	"image/color"
)

// RGB is a packed 8-bit RGB image: pixel (x, y) is Pix[y*Stride+3*x : +3].
// It implements image.Image so it can be encoded with image/png.
type RGB struct {
	Pix    []byte
	Stride int
	Width  int
	Height int
}

// NewRGB allocates a w×h image.
func NewRGB(w, h int) *RGB {
	r := &RGB{}
	r.resize(w, h)
	return r
}

// resize makes r w×h, reusing Pix when it is large enough.
func (r *RGB) resize(w, h int) {
	n := w * h * 3
	if cap(r.Pix) < n {
		r.Pix = make([]byte, n)
	}
	r.Pix = r.Pix[:n]
	r.Width, r.Height, r.Stride = w, h, 3*w
}

// CopyTo copies r into dst, reusing dst's buffer.
func (r *RGB) CopyTo(dst *RGB) {
	dst.resize(r.Width, r.Height)
	for y := 0; y < r.Height; y++ {
		copy(dst.Pix[y*dst.Stride:y*dst.Stride+3*r.Width], r.Pix[y*r.Stride:])
	}
}

// ColorModel implements image.Image.
func (r *RGB) ColorModel() color.Model { return color.RGBAModel }

// Bounds implements image.Image.
func (r *RGB) Bounds() image.Rectangle { return image.Rect(0, 0, r.Width, r.Height) }

// At implements image.Image.
func (r *RGB) At(x, y int) color.Color {
	if x < 0 || y < 0 || x >= r.Width || y >= r.Height {
		return color.RGBA{}
	}
	i := y*r.Stride + 3*x
	return color.RGBA{r.Pix[i], r.Pix[i+1], r.Pix[i+2], 0xff}
}

// RGBA returns a copy of r as *image.RGBA (for image/draw users).
func (r *RGB) RGBA() *image.RGBA {
	out := image.NewRGBA(r.Bounds())
	for y := 0; y < r.Height; y++ {
		src := r.Pix[y*r.Stride:]
		dst := out.Pix[y*out.Stride:]
		for x := 0; x < r.Width; x++ {
			dst[4*x], dst[4*x+1], dst[4*x+2], dst[4*x+3] = src[3*x], src[3*x+1], src[3*x+2], 0xff
		}
	}
	return out
}

// FromImage converts any image to RGB into dst (reusing its buffer).
func FromImage(dst *RGB, img image.Image) {
	b := img.Bounds()
	dst.resize(b.Dx(), b.Dy())
	switch m := img.(type) {
	case *RGB:
		m.CopyTo(dst)
		return
	case *image.YCbCr:
		ycbcrToRGB(dst, m)
		return
	case *image.Gray:
		for y := 0; y < dst.Height; y++ {
			row := dst.Pix[y*dst.Stride:]
			src := m.Pix[y*m.Stride:]
			for x := 0; x < dst.Width; x++ {
				v := src[x]
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
		return
	case *image.NRGBA:
		if m.Opaque() {
			for y := 0; y < dst.Height; y++ {
				row := dst.Pix[y*dst.Stride:]
				src := m.Pix[y*m.Stride:]
				for x := 0; x < dst.Width; x++ {
					row[3*x], row[3*x+1], row[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
				}
			}
			return
		}
	case *image.RGBA:
		if m.Opaque() {
			for y := 0; y < dst.Height; y++ {
				row := dst.Pix[y*dst.Stride:]
				src := m.Pix[y*m.Stride:]
				for x := 0; x < dst.Width; x++ {
					row[3*x], row[3*x+1], row[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
				}
			}
			return
		}
	}
	for y := 0; y < dst.Height; y++ {
		row := dst.Pix[y*dst.Stride:]
		for x := 0; x < dst.Width; x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			row[3*x], row[3*x+1], row[3*x+2] = c.R, c.G, c.B
		}
	}
}
