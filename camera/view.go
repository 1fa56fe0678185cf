package camera

import "fmt"

// ViewWatch tells when a fixed camera has been knocked or turned.
//
// A policy that acts from a fixed camera learned its view: knocked a few
// centimetres or degrees, the camera shows the same scene from elsewhere,
// every frame stays fresh and changing, and the policy acts on a picture it
// was never shown. What gives a knock away is that the whole background
// changes at once. The image is cut into tiles (of TileSize pixels, whole
// tiles only); each keeps a reference, the grey content it showed while
// steady. A tile matches its reference while the mean absolute difference of
// the two, each less its own mean (so that a change of exposure is not a
// change of view), stays within TileTolerance grey levels. The arm and the
// objects move through a few tiles from one frame to the next; a knock
// changes most of the tiles that matched. So:
//
//   - the view is moved when, in one frame, at least Trigger of the tiles
//     that matched in the frame before stop matching (and at least a
//     quarter of all tiles matched: fewer, and the check cannot tell);
//   - it stays moved while at least Trigger/2 of those tiles still differ
//     from their reference, and becomes fine once fewer do (the camera put
//     back where it was);
//   - a tile that has not matched for Rereference frames while its own
//     content held still (an object moved and left there, the light of
//     another hour) takes its present content as its reference; never while
//     the view is moved.
//
// The first frame, the first after a change of frame size and the first
// after Rebase are the reference of every tile. A camera that drifts
// slowly, a tile at a time, is not caught. ViewWatch is not safe for
// concurrent use.
type ViewWatch struct {
	cfg ViewWatchConfig

	w, h, tx, ty int
	grey, prev   []byte // this frame's and the previous frame's grey pixels
	ref          []byte // the reference, tile by tile in grey pixels
	matched      []bool // per tile: matched its reference in the previous frame
	now          []bool // per tile: matches it in this frame
	still        []int  // per tile: frames it has not matched while holding still
	moved        []bool // the tiles that stopped matching at the knock (nil: not moved)
	frames       int
}

// ViewWatchConfig sets a ViewWatch. Zero fields take the defaults.
type ViewWatchConfig struct {
	// Trigger is the fraction of the matching tiles that must stop matching
	// in one frame for the view to be moved, in (0, 1]; 0: 0.5.
	Trigger float64
	// TileSize is the side of a tile in pixels; 0: 16.
	TileSize int
	// TileTolerance is the mean absolute grey difference within which a tile
	// matches its reference; 0: 6 (of 255).
	TileTolerance float64
	// Rereference is how many frames a tile that does not match, but holds
	// still, keeps its old reference; 0: 100 (10 s at 10 frames a second).
	Rereference int
}

// ViewStatus is what a ViewWatch says of one frame.
type ViewStatus struct {
	// Moved: the view moved and has not come back.
	Moved bool
	// Differ is how many of the tiles that stopped matching at the knock
	// still differ from their reference (0 while not moved); Of is how many
	// stopped matching then. Tiles is the image's number of tiles.
	Differ, Of, Tiles int
}

// Fraction is Differ/Of (0 while not moved).
func (s ViewStatus) Fraction() float64 {
	if s.Of == 0 {
		return 0
	}
	return float64(s.Differ) / float64(s.Of)
}

// NewViewWatch returns a ViewWatch, or an error naming a field out of range.
func NewViewWatch(cfg ViewWatchConfig) (*ViewWatch, error) {
	switch {
	case cfg.Trigger == 0:
		cfg.Trigger = 0.5
	case !(cfg.Trigger > 0 && cfg.Trigger <= 1):
		return nil, fmt.Errorf("camera: view watch trigger %v: must be a fraction in (0, 1]", cfg.Trigger)
	}
	switch {
	case cfg.TileSize == 0:
		cfg.TileSize = 16
	case cfg.TileSize < 4:
		return nil, fmt.Errorf("camera: view watch tile size %d: must be at least 4 pixels", cfg.TileSize)
	}
	switch {
	case cfg.TileTolerance == 0:
		cfg.TileTolerance = 6
	case !(cfg.TileTolerance > 0 && cfg.TileTolerance < 255):
		return nil, fmt.Errorf("camera: view watch tile tolerance %v: must be a grey difference in (0, 255)", cfg.TileTolerance)
	}
	switch {
	case cfg.Rereference == 0:
		cfg.Rereference = 100
	case cfg.Rereference < 0:
		return nil, fmt.Errorf("camera: view watch rereference %d: must be a number of frames ≥ 1", cfg.Rereference)
	}
	return &ViewWatch{cfg: cfg}, nil
}

// Observe takes the next frame and says whether the view has moved. A frame
// with no whole tile is ignored (the zero ViewStatus).
func (v *ViewWatch) Observe(img *RGB) ViewStatus {
	s := v.cfg.TileSize
	tx, ty := img.Width/s, img.Height/s
	if tx == 0 || ty == 0 {
		return ViewStatus{}
	}
	if img.Width != v.w || img.Height != v.h || v.frames == 0 {
		v.start(img, tx, ty)
		return ViewStatus{Tiles: tx * ty}
	}
	v.toGrey(img)
	n := tx * ty
	matching, stopped := 0, 0
	for t := 0; t < n; t++ {
		v.now[t] = v.diff(t, v.ref) <= v.cfg.TileTolerance
		if v.matched[t] {
			matching++
			if !v.now[t] {
				stopped++
			}
		}
	}
	if v.moved == nil && 4*matching >= n && float64(stopped) >= v.cfg.Trigger*float64(matching) {
		v.moved = make([]bool, n)
		for t := range v.moved {
			v.moved[t] = v.matched[t] && !v.now[t]
		}
	}
	st := ViewStatus{Tiles: n}
	if v.moved != nil {
		for t, m := range v.moved {
			if m {
				st.Of++
				if !v.now[t] {
					st.Differ++
				}
			}
		}
		if float64(st.Differ) < v.cfg.Trigger/2*float64(st.Of) {
			v.moved, st = nil, ViewStatus{Tiles: n}
		} else {
			st.Moved = true
		}
	}
	for t := 0; t < n; t++ {
		switch {
		case v.now[t]:
			v.still[t] = 0
		case v.diff(t, v.prev) <= v.cfg.TileTolerance:
			if v.still[t]++; v.moved == nil && v.still[t] >= v.cfg.Rereference {
				v.copyRef(t)
				v.now[t], v.still[t] = true, 0
			}
		default:
			v.still[t] = 0
		}
	}
	v.matched, v.now = v.now, v.matched
	v.grey, v.prev = v.prev, v.grey
	v.frames++
	return st
}

// Rebase makes the next frame every tile's reference, as the first frame
// is: for a scene replaced on purpose (the simulator's reset), whose
// objects and arm start elsewhere and stay there.
func (v *ViewWatch) Rebase() { v.frames = 0 }

// start takes img as every tile's reference, reusing the buffers when the
// frame size is unchanged (a Rebase).
func (v *ViewWatch) start(img *RGB, tx, ty int) {
	if img.Width != v.w || img.Height != v.h {
		v.w, v.h, v.tx, v.ty = img.Width, img.Height, tx, ty
		n, px := tx*ty, img.Width*img.Height
		v.grey, v.prev, v.ref = make([]byte, px), make([]byte, px), make([]byte, px)
		v.matched, v.now, v.still = make([]bool, n), make([]bool, n), make([]int, n)
	}
	v.moved = nil
	v.toGrey(img)
	copy(v.ref, v.grey)
	for t := range v.matched {
		v.matched[t], v.still[t] = true, 0
	}
	v.grey, v.prev = v.prev, v.grey
	v.frames = 1
}

// toGrey writes img's grey levels, (R+G+B)/3, to v.grey.
func (v *ViewWatch) toGrey(img *RGB) {
	for y := 0; y < v.h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+3*v.w]
		g := v.grey[y*v.w : (y+1)*v.w]
		for x := range g {
			p := row[3*x : 3*x+3]
			g[x] = byte((uint16(p[0]) + uint16(p[1]) + uint16(p[2])) / 3)
		}
	}
}

// diff is the mean absolute difference between tile t of v.grey and of
// other, each less its own mean, in grey levels.
func (v *ViewWatch) diff(t int, other []byte) float64 {
	s := v.cfg.TileSize
	x0, y0 := (t%v.tx)*s, (t/v.tx)*s
	var sa, sb int
	for y := y0; y < y0+s; y++ {
		for x := x0; x < x0+s; x++ {
			sa += int(v.grey[y*v.w+x])
			sb += int(other[y*v.w+x])
		}
	}
	area := float64(s * s)
	off := float64(sa-sb) / area // the mean difference: exposure, not view
	var d float64
	for y := y0; y < y0+s; y++ {
		for x := x0; x < x0+s; x++ {
			e := float64(int(v.grey[y*v.w+x])-int(other[y*v.w+x])) - off
			if e < 0 {
				e = -e
			}
			d += e
		}
	}
	return d / area
}

// copyRef takes tile t of v.grey as its reference.
func (v *ViewWatch) copyRef(t int) {
	s := v.cfg.TileSize
	x0, y0 := (t%v.tx)*s, (t/v.tx)*s
	for y := y0; y < y0+s; y++ {
		copy(v.ref[y*v.w+x0:y*v.w+x0+s], v.grey[y*v.w+x0:])
	}
}
