package camera

import (
	"fmt"
	"image"
)

// YUVRange says how a YUYV camera encodes luma and chroma.
type YUVRange uint8

const (
	// RangeLimited is BT.601 "studio" range: Y in 16..235, Cb/Cr in
	// 16..240. What UVC cameras send in YUYV; the default.
	RangeLimited YUVRange = iota
	// RangeFull is the full 0..255 range (JFIF, some CSI sensors).
	RangeFull
)

// Fixed-point (16.16) BT.601 coefficients.
//
// Limited range: R = 255/219 (Y-16) + 1.402·255/224 (Cr-128), etc.
// Full range:    R = Y + 1.402 (Cr-128), etc.
const (
	limY   = 76309  // 255/219
	limRV  = 104597 // 1.402   * 255/224
	limGU  = 25675  // 0.344136 * 255/224
	limGV  = 53279  // 0.714136 * 255/224
	limBU  = 132201 // 1.772   * 255/224
	fullRV = 91881  // 1.402
	fullGU = 22554  // 0.344136
	fullGV = 46802  // 0.714136
	fullBU = 116130 // 1.772
	half   = 1 << 15
)

// clamp8 saturates v to 0..255.
func clamp8(v int32) byte {
	if uint32(v) <= 255 {
		return byte(v)
	}
	return byte(^(v >> 31)) // v < 0: 0; v > 255: 0xff
}

// YUYVToRGB converts a packed YUYV 4:2:2 frame (Y0 U Y1 V, each pixel pair
// sharing its chroma sample) of w×h with the given stride into dst,
// reusing dst's buffer. It allocates only when dst is too small.
func YUYVToRGB(dst *RGB, src []byte, w, h, stride int, rng YUVRange) error {
	if w <= 0 || h <= 0 || w%2 != 0 {
		return fmt.Errorf("%w: YUYV size %dx%d (width must be even and positive)", ErrBadFrame, w, h)
	}
	if stride == 0 {
		stride = 2 * w
	}
	if stride < 2*w {
		return fmt.Errorf("%w: YUYV stride %d < 2×width %d", ErrBadFrame, stride, 2*w)
	}
	if need := stride*(h-1) + 2*w; len(src) < need || need <= 0 {
		return fmt.Errorf("%w: YUYV %dx%d needs %d bytes, got %d", ErrBadFrame, w, h, need, len(src))
	}
	dst.resize(w, h)
	ky, krv, kgu, kgv, kbu, yoff := int32(limY), int32(limRV), int32(limGU), int32(limGV), int32(limBU), int32(16)
	if rng == RangeFull {
		ky, krv, kgu, kgv, kbu, yoff = 1<<16, fullRV, fullGU, fullGV, fullBU, 0
	}
	for y := 0; y < h; y++ {
		s := src[y*stride : y*stride+2*w]
		d := dst.Pix[y*dst.Stride : y*dst.Stride+3*w]
		for len(s) >= 4 && len(d) >= 6 {
			u := int32(s[1]) - 128
			v := int32(s[3]) - 128
			rc := krv*v + half
			gc := half - kgu*u - kgv*v
			bc := kbu*u + half
			y0 := ky * (int32(s[0]) - yoff)
			y1 := ky * (int32(s[2]) - yoff)
			d[0] = clamp8((y0 + rc) >> 16)
			d[1] = clamp8((y0 + gc) >> 16)
			d[2] = clamp8((y0 + bc) >> 16)
			d[3] = clamp8((y1 + rc) >> 16)
			d[4] = clamp8((y1 + gc) >> 16)
			d[5] = clamp8((y1 + bc) >> 16)
			s, d = s[4:], d[6:]
		}
	}
	return nil
}

// ycbcrToRGB converts a decoded JPEG (JFIF: full-range BT.601) to RGB.
// Chroma is taken from the co-sited sample (nearest), as image/color does.
func ycbcrToRGB(dst *RGB, m *image.YCbCr) {
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	dst.resize(w, h)
	var sx, sy uint
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		sx = 1
	case image.YCbCrSubsampleRatio420:
		sx, sy = 1, 1
	case image.YCbCrSubsampleRatio440:
		sy = 1
	case image.YCbCrSubsampleRatio411:
		sx = 2
	case image.YCbCrSubsampleRatio410:
		sx, sy = 2, 1
	}
	x0c, y0c := b.Min.X>>sx, b.Min.Y>>sy
	for y := 0; y < h; y++ {
		yrow := m.Y[y*m.YStride : y*m.YStride+w]
		crow := ((b.Min.Y+y)>>sy - y0c) * m.CStride
		cb := m.Cb[crow:]
		cr := m.Cr[crow:]
		d := dst.Pix[y*dst.Stride : y*dst.Stride+3*w]
		for x, yv := range yrow {
			ci := (b.Min.X+x)>>sx - x0c
			u := int32(cb[ci]) - 128
			v := int32(cr[ci]) - 128
			yy := int32(yv)<<16 + half
			d[3*x] = clamp8((yy + fullRV*v) >> 16)
			d[3*x+1] = clamp8((yy - fullGU*u - fullGV*v) >> 16)
			d[3*x+2] = clamp8((yy + fullBU*u) >> 16)
		}
	}
}
