package camera

import (
	"encoding/base64"
	"strings"
	"testing"
)

// paletteOf marks the cells of the given colours in a palette of levels.
func paletteOf(t *testing.T, levels int, colours ...[3]byte) *Palette {
	t.Helper()
	seen := make([]byte, max(1, levels*levels*levels/8))
	sh := 0
	for 256>>sh != levels {
		sh++
	}
	for _, c := range colours {
		i := (int(c[0]>>sh)*levels+int(c[1]>>sh))*levels + int(c[2]>>sh)
		seen[i/8] |= 1 << (i % 8)
	}
	p, err := NewPalette(levels, seen)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fill paints the w×h image with c, then the listed pixels with other.
func fill(w, h int, c [3]byte, other [3]byte, at ...[2]int) *RGB {
	img := NewRGB(w, h)
	for i := 0; i < len(img.Pix); i += 3 {
		copy(img.Pix[i:i+3], c[:])
	}
	for _, xy := range at {
		copy(img.Pix[xy[1]*img.Stride+3*xy[0]:], other[:])
	}
	return img
}

func TestPaletteUnseen(t *testing.T) {
	table := [3]byte{120, 80, 40}
	red := [3]byte{200, 20, 20}
	blue := [3]byte{40, 70, 220}
	for _, tc := range []struct {
		name   string
		levels int
		seen   [][3]byte
		img    *RGB
		want   int
	}{
		{"all seen", 16, [][3]byte{table}, fill(8, 6, table, table), 0},
		{"a blue box", 16, [][3]byte{table, red}, fill(8, 6, table, blue, [2]int{1, 1}, [2]int{2, 1}, [2]int{1, 2}), 3},
		{"seen red", 16, [][3]byte{table, red}, fill(8, 6, table, red, [2]int{3, 3}), 0},
		// 120 and 127 share a step of 16 levels (the 8th), 128 starts the next
		{"same step", 16, [][3]byte{{120, 80, 40}}, fill(4, 4, [3]byte{127, 95, 47}, table), 0},
		{"next step", 16, [][3]byte{{120, 80, 40}}, fill(4, 4, [3]byte{128, 80, 40}, table), 16},
		{"coarse", 2, [][3]byte{{0, 0, 0}}, fill(4, 4, [3]byte{127, 127, 127}, [3]byte{128, 0, 0}, [2]int{0, 0}), 1},
		{"nothing seen", 64, nil, fill(3, 3, table, table), 9},
		{"no pixels", 16, nil, NewRGB(0, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paletteOf(t, tc.levels, tc.seen...)
			if got := p.Unseen(tc.img); got != tc.want {
				t.Errorf("Unseen = %d, want %d", got, tc.want)
			}
			if got := p.Cells(); got != len(tc.seen) {
				t.Errorf("Cells = %d, want %d", got, len(tc.seen))
			}
		})
	}
}

// A padded row (Stride beyond 3·Width) is read up to Width only.
func TestPaletteStride(t *testing.T) {
	p := paletteOf(t, 16, [3]byte{0, 0, 0})
	img := &RGB{Width: 2, Height: 2, Stride: 9, Pix: make([]byte, 18)}
	for i := 6; i < 9; i++ {
		img.Pix[i], img.Pix[9+i] = 255, 255 // the padding: not pixels
	}
	if got := p.Unseen(img); got != 0 {
		t.Errorf("Unseen = %d, want 0 (padding counted)", got)
	}
}

func TestNewPaletteRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		levels int
		seen   string // base64
		want   string
	}{
		{"levels 12", 12, base64.StdEncoding.EncodeToString(make([]byte, 216)), "power of two"},
		{"levels 128", 128, "", "power of two"},
		{"levels 1", 1, "AA==", "power of two"},
		{"short", 16, base64.StdEncoding.EncodeToString(make([]byte, 511)), "got 511 bytes"},
		{"not base64", 16, "***", "palette cells"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodePalette(tc.levels, tc.seen)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
	if p, err := DecodePalette(16, base64.StdEncoding.EncodeToString(make([]byte, 512))); err != nil || p.Levels() != 16 {
		t.Fatalf("a valid palette: %v", err)
	}
}

func BenchmarkPaletteUnseen(b *testing.B) {
	seen := make([]byte, 512)
	for i := range seen {
		seen[i] = 0x55
	}
	p, err := NewPalette(16, seen)
	if err != nil {
		b.Fatal(err)
	}
	img := NewRGB(96, 96)
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Unseen(img)
	}
}

// The manifest's layout, as energyflow.palette writes it (its test checks
// the same cell): at 16 levels the colour (128, 80, 40) is cell
// (8·16 + 5)·16 + 2 = 2130, bit 2 of byte 266.
func TestPaletteLayout(t *testing.T) {
	seen := make([]byte, 512)
	seen[266] = 1 << 2
	p, err := DecodePalette(16, base64.StdEncoding.EncodeToString(seen))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    [3]byte
		want int
	}{{[3]byte{128, 80, 40}, 0}, {[3]byte{143, 95, 47}, 0}, {[3]byte{127, 80, 40}, 1}, {[3]byte{128, 96, 40}, 1}} {
		if got := p.Unseen(fill(1, 1, tc.c, tc.c)); got != tc.want {
			t.Errorf("%v: %d unseen, want %d", tc.c, got, tc.want)
		}
	}
}
