package camera

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
)

// JPEG markers.
const (
	mSOI  = 0xd8
	mEOI  = 0xd9
	mSOS  = 0xda
	mDHT  = 0xc4
	mSOF0 = 0xc0
	mSOF1 = 0xc1
	mSOF2 = 0xc2
	mTEM  = 0x01
	mRST0 = 0xd0
	mRST7 = 0xd7
)

// jpegInfo is what a walk over a JPEG's header segments finds.
type jpegInfo struct {
	width, height int
	hasDHT        bool
	sos           int // offset of the SOS marker
}

var errNotJPEG = errors.New("not a JPEG (no SOI marker)")

// scanJPEGHeader walks the marker segments from SOI up to SOS.
func scanJPEGHeader(b []byte) (jpegInfo, error) {
	var info jpegInfo
	if len(b) < 4 || b[0] != 0xff || b[1] != mSOI {
		return info, errNotJPEG
	}
	i := 2
	for {
		if i < len(b) && b[i] != 0xff {
			return info, fmt.Errorf("garbage at offset %d where a marker should be", i)
		}
		// Skip fill bytes (0xff padding) before the marker code.
		for i < len(b) && b[i] == 0xff {
			i++
		}
		if i >= len(b) {
			return info, errors.New("truncated before SOS")
		}
		m := b[i]
		i++
		switch {
		case m == mSOS:
			info.sos = i - 2
			if info.width == 0 || info.height == 0 {
				return info, errors.New("no frame header (SOF) before SOS")
			}
			return info, nil
		case m == mEOI:
			return info, errors.New("EOI before SOS")
		case m == mTEM || (m >= mRST0 && m <= mRST7):
			continue // standalone markers
		}
		if i+2 > len(b) {
			return info, errors.New("truncated segment length")
		}
		n := int(b[i])<<8 | int(b[i+1])
		if n < 2 || i+n > len(b) {
			return info, fmt.Errorf("bad segment length %d for marker 0x%02x", n, m)
		}
		seg := b[i+2 : i+n]
		switch m {
		case mDHT:
			info.hasDHT = true
		case mSOF0, mSOF1, mSOF2:
			if len(seg) < 5 {
				return info, errors.New("short SOF segment")
			}
			info.height = int(seg[1])<<8 | int(seg[2])
			info.width = int(seg[3])<<8 | int(seg[4])
		}
		i += n
	}
}

// jpegEnd returns the length of the first complete JPEG in b (up to and
// including EOI), or an error when b holds no complete JPEG.
func jpegEnd(b []byte) (int, error) {
	info, err := scanJPEGHeader(b)
	if err != nil {
		return 0, err
	}
	i := info.sos + 2
	// Entropy-coded data follows SOS's segment; 0xff is byte-stuffed there,
	// so the next marker other than RSTn ends it.
	for i+1 < len(b) {
		if b[i] != 0xff {
			i++
			continue
		}
		m := b[i+1]
		switch {
		case m == 0x00 || m == 0xff || (m >= mRST0 && m <= mRST7):
			i += 2
			if m == 0xff {
				i-- // fill byte: look at the next one again
			}
		case m == mEOI:
			return i + 2, nil
		default:
			// Another segment (e.g. a later scan of a progressive JPEG):
			// skip it by its length.
			if i+4 > len(b) {
				return 0, errors.New("truncated JPEG")
			}
			n := int(b[i+2])<<8 | int(b[i+3])
			if n < 2 {
				return 0, errors.New("bad segment length")
			}
			i += 2 + n
		}
	}
	return 0, errors.New("no EOI marker (truncated JPEG)")
}

// JPEGSize returns a JPEG's width and height from its frame header without
// decoding it.
func JPEGSize(b []byte) (w, h int, err error) {
	info, err := scanJPEGHeader(b)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	return info.width, info.height, nil
}

// JPEGDecoder decodes MJPEG frames to RGB. It splices the standard Huffman
// tables (ITU-T T.81 K.3) into frames that omit them, as many UVC cameras
// do. Not safe for concurrent use.
//
// Decoding uses image/jpeg, which allocates its decoder state and the
// decoded planes on every call; everything else is reused.
type JPEGDecoder struct {
	buf []byte
	rd  bytes.Reader
}

// Decode decodes one JPEG into dst (reusing its buffer). Malformed input
// returns an error wrapping ErrBadFrame, never panics.
func (d *JPEGDecoder) Decode(dst *RGB, data []byte) error {
	info, err := scanJPEGHeader(data)
	if err != nil {
		return fmt.Errorf("%w: jpeg: %v", ErrBadFrame, err)
	}
	if info.width*info.height > maxPixels {
		return fmt.Errorf("%w: jpeg: %dx%d is too large", ErrBadFrame, info.width, info.height)
	}
	src := data
	if !info.hasDHT {
		d.buf = spliceDHT(d.buf[:0], data, info.sos)
		src = d.buf
	}
	d.rd.Reset(src)
	img, err := jpeg.Decode(&d.rd)
	if err != nil {
		return fmt.Errorf("%w: jpeg: %v", ErrBadFrame, err)
	}
	switch m := img.(type) {
	case *image.YCbCr:
		ycbcrToRGB(dst, m)
	default:
		FromImage(dst, img)
	}
	return nil
}

// maxPixels bounds the size of a decoded frame (a 64-megapixel guard
// against hostile headers).
const maxPixels = 1 << 26

// AddHuffmanTables returns data with the standard Huffman tables inserted
// before its first scan when it has none (appending to dst); otherwise it
// returns data appended to dst unchanged.
func AddHuffmanTables(dst, data []byte) ([]byte, error) {
	info, err := scanJPEGHeader(data)
	if err != nil {
		return dst, fmt.Errorf("%w: jpeg: %v", ErrBadFrame, err)
	}
	if info.hasDHT {
		return append(dst, data...), nil
	}
	return spliceDHT(dst, data, info.sos), nil
}

func spliceDHT(dst, data []byte, at int) []byte {
	dst = append(dst, data[:at]...)
	dst = appendStdDHT(dst)
	return append(dst, data[at:]...)
}

// appendStdDHT appends one DHT segment holding the four standard tables.
func appendStdDHT(b []byte) []byte {
	n := 2
	for i := range stdHuffman {
		n += 1 + 16 + len(stdHuffman[i].values)
	}
	b = append(b, 0xff, mDHT, byte(n>>8), byte(n))
	for i := range stdHuffman {
		t := &stdHuffman[i]
		b = append(b, t.class)
		b = append(b, t.counts[:]...)
		b = append(b, t.values...)
	}
	return b
}

type huffSpec struct {
	class  byte // Tc<<4 | Th
	counts [16]byte
	values []byte
}

// stdHuffman are the example tables of ITU-T T.81 Annex K.3 (the ones
// Motion-JPEG assumes when a frame has no DHT; see also the AVI1 MJPEG
// convention). Copied from Go's image/jpeg writer. Read-only.
var stdHuffman = [4]huffSpec{
	{0x00, [16]byte{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
		[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	{0x10, [16]byte{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
		[]byte{
			0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
			0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
			0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08,
			0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
			0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16,
			0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
			0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
			0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
			0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
			0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
			0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
			0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
			0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
			0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
			0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
			0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
			0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4,
			0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
			0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea,
			0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		}},
	{0x01, [16]byte{0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
		[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	{0x11, [16]byte{0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119},
		[]byte{
			0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21,
			0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
			0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
			0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
			0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34,
			0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
			0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38,
			0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
			0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
			0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
			0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
			0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
			0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96,
			0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
			0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
			0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
			0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2,
			0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
			0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9,
			0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		}},
}
