package camera

import (
	"encoding/base64"
	"fmt"
	"math/bits"
)

// Palette is the set of colours a camera's demonstrations showed, and
// counts the pixels of a frame outside it: the unseen-colour check, for
// something new in view (an object, a hand, a tool left on the table).
//
// A policy that acts from a fixed camera was shown a scene of few colours:
// the table, the robot, the objects of its task. Each channel of a pixel
// is cut into Levels equal steps, so the RGB cube holds Levels³ cells; the
// palette marks the cells any pixel of any demonstration frame fell in. A
// frame's unseen pixels are those in an unmarked cell. On ButtonPress's
// 96×96 top view the demonstrations fill 697 of 4,096 cells; a held-out
// demonstration frame has at most one unseen pixel, and a 5 cm blue box
// put beside the hand shows 8–22 (docs/camera-policy.md, "Unseen
// colours"). The check is blind to a new thing of colours the scene
// already had, and to what the arm hides. Palette is read-only after
// NewPalette and safe for concurrent use.
type Palette struct {
	levels int
	shift  uint   // a channel's value >> shift is its step
	seen   []byte // bit c of the Levels³ cells, cell = (r·L + g)·L + b
}

// NewPalette returns the palette of levels steps per channel (a power of
// two from 2 to 64) whose marked cells are the bits of seen, cell
// (r·levels + g)·levels + b at bit c%8 of byte c/8; seen holds exactly
// levels³/8 bytes (at least one).
func NewPalette(levels int, seen []byte) (*Palette, error) {
	if levels < 2 || levels > 64 || levels&(levels-1) != 0 {
		return nil, fmt.Errorf("camera: palette levels %d: want a power of two from 2 to 64", levels)
	}
	shift := 9 - bits.Len(uint(levels)) // 2 steps: 7 bits dropped … 64 steps: 2
	n := max(1, levels*levels*levels/8)
	if len(seen) != n {
		return nil, fmt.Errorf("camera: palette of %d levels: got %d bytes of marked cells, want %d", levels, len(seen), n)
	}
	return &Palette{levels: levels, shift: uint(shift), seen: append([]byte(nil), seen...)}, nil
}

// DecodePalette is NewPalette on seen written in standard base64, as a
// bundle manifest carries it.
func DecodePalette(levels int, seen string) (*Palette, error) {
	b, err := base64.StdEncoding.DecodeString(seen)
	if err != nil {
		return nil, fmt.Errorf("camera: palette cells: %w", err)
	}
	return NewPalette(levels, b)
}

// Levels is the number of steps per channel.
func (p *Palette) Levels() int { return p.levels }

// Cells is how many of the Levels³ cells are marked.
func (p *Palette) Cells() int {
	n := 0
	for _, b := range p.seen {
		for ; b != 0; b &= b - 1 {
			n++
		}
	}
	return n
}

// Unseen returns how many pixels of img fall in a cell the palette does
// not mark. It allocates nothing.
func (p *Palette) Unseen(img *RGB) int {
	n := 0
	l, s := p.levels, p.shift
	for y := 0; y < img.Height; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+3*img.Width]
		for i := 0; i+2 < len(row); i += 3 {
			c := (int(row[i]>>s)*l+int(row[i+1]>>s))*l + int(row[i+2]>>s)
			if p.seen[c>>3]&(1<<(c&7)) == 0 {
				n++
			}
		}
	}
	return n
}
