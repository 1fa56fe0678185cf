package telemetry

import (
	"math"
	"strconv"
	"sync"
)

// rgb is a colour.
type rgb struct{ r, g, b uint8 }

// Overlay colours.
var (
	colRunning   = rgb{60, 220, 90}
	colStopped   = rgb{240, 60, 50}
	colText      = rgb{255, 255, 255}
	colBarBG     = rgb{70, 70, 70}
	colThreshold = rgb{255, 220, 0}
	colTrace     = rgb{80, 200, 255}
	colPlan      = [4]rgb{{255, 120, 80}, {120, 255, 120}, {120, 160, 255}, {255, 255, 120}}
)

// rgbImage is a packed 8-bit RGB image.
type rgbImage struct {
	pix  []byte
	w, h int
}

func (im rgbImage) set(x, y int, c rgb) {
	if x < 0 || y < 0 || x >= im.w || y >= im.h {
		return
	}
	i := (y*im.w + x) * 3
	im.pix[i], im.pix[i+1], im.pix[i+2] = c.r, c.g, c.b
}

// clip intersects a rectangle with the image.
func (im rgbImage) clip(x, y, w, h int) (x0, y0, x1, y1 int) {
	x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x+w, im.w), min(y+h, im.h)
	return
}

func (im rgbImage) fill(x, y, w, h int, c rgb) {
	x0, y0, x1, y1 := im.clip(x, y, w, h)
	for yy := y0; yy < y1; yy++ {
		row := im.pix[(yy*im.w+x0)*3 : (yy*im.w+x1)*3]
		for i := 0; i < len(row); i += 3 {
			row[i], row[i+1], row[i+2] = c.r, c.g, c.b
		}
	}
}

// shade darkens a rectangle to num/256 of its brightness.
func (im rgbImage) shade(x, y, w, h int, num int) {
	x0, y0, x1, y1 := im.clip(x, y, w, h)
	for yy := y0; yy < y1; yy++ {
		row := im.pix[(yy*im.w+x0)*3 : (yy*im.w+x1)*3]
		for i := range row {
			row[i] = uint8(int(row[i]) * num >> 8)
		}
	}
}

// appendScore appends x for the overlay's value line with as many decimals
// as its size leaves room for — 3 below 10, 1 below 1000, none above — so
// that a policy energy of ~10⁵ and its threshold both fit the bar's width
// (with 3 decimals the line was clipped inside the threshold's digits); "-"
// for no score (NaN).
func appendScore(b []byte, x float64) []byte {
	switch a := math.Abs(x); {
	case math.IsNaN(x):
		return append(b, '-')
	case a >= 1000:
		return strconv.AppendFloat(b, x, 'f', 0, 64)
	case a >= 10:
		return strconv.AppendFloat(b, x, 'f', 1, 64)
	default:
		return strconv.AppendFloat(b, x, 'f', 3, 64)
	}
}

// text draws s at (x, y) with glyphs scaled by scale, clipped to maxW pixels
// (≤ 0: no limit). It returns the width drawn.
func (im rgbImage) text(x, y, scale int, c rgb, s []byte, maxW int) int {
	adv := (glyphW + 1) * scale
	cx := x
	for _, r := range string(s) {
		if maxW > 0 && cx+glyphW*scale > x+maxW {
			break
		}
		g := glyph(r)
		for row := 0; row < glyphH; row++ {
			bits := g[row]
			if bits == 0 {
				continue
			}
			for col := 0; col < glyphW; col++ {
				if bits&(1<<(glyphW-1-col)) != 0 {
					im.fill(cx+col*scale, y+row*scale, scale, scale, c)
				}
			}
		}
		cx += adv
	}
	return cx - x
}

// line draws a line of the given thickness (Bresenham).
func (im rgbImage) line(x0, y0, x1, y1, thick int, c rgb) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		im.fill(x0-thick/2, y0-thick/2, thick, thick, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// traceLen is the number of samples in the overlay's energy trace.
const traceLen = 120

// overlayData is what the overlay shows; a fixed-size copy of the latest
// Sample plus the energy trace. Its buffers are reused.
type overlayData struct {
	have        bool
	energy      float64
	threshold   float64
	label       string // the watched score's short label (scoreLabel)
	state       []byte
	reason      []byte
	loopHz      float64
	inference   float64 // ms
	planned     []float64
	planSteps   int
	planDim     int
	trace       [traceLen]float64
	traceN      int // valid entries
	tracePos    int // next write
	scratchText []byte
}

// overlayState is shared between Publish (writer) and the encoder (reader).
type overlayState struct {
	mu sync.Mutex
	d  overlayData
}

// update copies s in; it allocates only when a buffer must grow.
func (o *overlayState) update(s *Sample) {
	o.mu.Lock()
	d := &o.d
	d.have = true
	d.energy, d.threshold = s.Energy, s.Threshold
	d.label = scoreLabel(s.Watched)
	d.state = append(d.state[:0], s.State...)
	d.reason = append(d.reason[:0], s.Reason...)
	d.loopHz = s.LoopRateHz
	d.inference = float64(s.InferenceLatency.Microseconds()) / 1000
	d.planned = d.planned[:0]
	d.planSteps, d.planDim = 0, 0
	for i, step := range s.Planned {
		if i >= MaxPlanSteps {
			break
		}
		if i == 0 {
			d.planDim = min(len(step), len(colPlan))
		}
		for j := 0; j < d.planDim; j++ {
			v := 0.0
			if j < len(step) {
				v = step[j]
			}
			d.planned = append(d.planned, v)
		}
		d.planSteps++
	}
	d.trace[d.tracePos] = s.Energy
	d.tracePos = (d.tracePos + 1) % traceLen
	d.traceN = min(d.traceN+1, traceLen)
	o.mu.Unlock()
}

// snapshot copies the state into dst, reusing dst's buffers.
func (o *overlayState) snapshot(dst *overlayData) {
	o.mu.Lock()
	d := &o.d
	state, reason, planned, scratch := dst.state, dst.reason, dst.planned, dst.scratchText
	*dst = *d
	dst.state = append(state[:0], d.state...)
	dst.reason = append(reason[:0], d.reason...)
	dst.planned = append(planned[:0], d.planned...)
	dst.scratchText = scratch
	o.mu.Unlock()
}

// scoreLabel is the overlay's short name of the watched score (Sample.Watched):
// "E" for the energy, "CE" for the centered energy, "SE" for the state
// energy. A constant string: no allocation per sample.
func scoreLabel(watched string) string {
	switch watched {
	case "centered_energy":
		return "CE"
	case "state_energy":
		return "SE"
	case "", "energy":
		return "E"
	}
	return "?"
}

// traceAt returns the i-th trace value, oldest first.
func (d *overlayData) traceAt(i int) float64 {
	start := (d.tracePos - d.traceN + traceLen) % traceLen
	return d.trace[(start+i)%traceLen]
}

// overlayLayout is where the overlay's parts are for a frame size.
type overlayLayout struct {
	k                            int // pixel scale of the font and strokes
	panelX, panelY, panelW, panH int
	stateY                       int
	barX, barY, barW, barH       int
	valueY                       int
	traceY, traceH               int
	rateY                        int
	planX, planY, planW, planH   int
}

func layoutFor(w, h int) overlayLayout {
	k := 1
	if w >= 480 && h >= 320 {
		k = 2
	}
	l := overlayLayout{k: k, panelX: 4 * k, panelY: 4 * k}
	l.panelW = min(w-8*k, 150*k)
	l.panH = 70 * k
	l.stateY = l.panelY + 4*k
	l.barX, l.barY = l.panelX+4*k, l.panelY+15*k
	l.barW, l.barH = l.panelW-8*k, 8*k
	l.valueY = l.barY + l.barH + 4*k
	l.traceY, l.traceH = l.valueY+10*k, 18*k
	l.rateY = l.traceY + l.traceH + 4*k
	l.planW, l.planH = 64*k, 44*k
	l.planX, l.planY = w-4*k-l.planW, 4*k
	return l
}

// energyRange picks the bar's full scale: from min(0, lowest trace value) to
// 1.5× the threshold or the highest trace value, whichever is larger.
func energyRange(d *overlayData) (lo, hi float64) {
	lo, hi = 0, 0
	for i := 0; i < d.traceN; i++ {
		v := d.traceAt(i)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if t := d.threshold; !math.IsNaN(t) && !math.IsInf(t, 0) {
		lo = math.Min(lo, t)
		hi = math.Max(hi, t+0.5*(t-lo))
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi * 1.0001
}

func frac(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Max(0, math.Min(1, (v-lo)/(hi-lo)))
}

// drawOverlay draws d onto im.
func drawOverlay(im rgbImage, d *overlayData) {
	l := layoutFor(im.w, im.h)
	k := l.k
	if l.panelW < 40*k {
		return
	}
	im.shade(l.panelX, l.panelY, l.panelW, l.panH, 90)
	txt := d.scratchText[:0]
	defer func() { d.scratchText = txt }()

	// State line.
	running := string(d.state) == StateRunning
	col := colStopped
	switch {
	case !d.have:
		col = colText
		txt = append(txt, "NO DATA"...)
	case running:
		col = colRunning
		txt = append(txt, d.state...)
	default:
		txt = append(txt, d.state...)
		if len(d.reason) > 0 {
			txt = append(txt, ": "...)
			txt = append(txt, d.reason...)
		}
	}
	im.text(l.barX, l.stateY, k, col, txt, l.barW)

	// Energy bar with the threshold mark.
	lo, hi := energyRange(d)
	im.fill(l.barX, l.barY, l.barW, l.barH, colBarBG)
	fill := colRunning
	if d.energy >= d.threshold {
		fill = colStopped
	}
	if d.have {
		fw := int(frac(d.energy, lo, hi) * float64(l.barW))
		im.fill(l.barX, l.barY, fw, l.barH, fill)
		tx := l.barX + int(frac(d.threshold, lo, hi)*float64(l.barW))
		im.fill(tx-k, l.barY-2*k, 2*k, l.barH+4*k, colThreshold)
	}

	// Values, labelled with the score the stop watches.
	label := d.label
	if label == "" {
		label = "E"
	}
	txt = append(txt[:0], label...)
	txt = append(txt, ' ')
	txt = appendScore(txt, d.energy)
	txt = append(txt, "  THR "...)
	txt = appendScore(txt, d.threshold)
	im.text(l.barX, l.valueY, k, colText, txt, l.barW)

	// Energy trace with the threshold line.
	im.fill(l.barX, l.traceY, l.barW, l.traceH, rgb{30, 30, 30})
	ty := func(v float64) int { return l.traceY + l.traceH - 1 - int(frac(v, lo, hi)*float64(l.traceH-1)) }
	if d.have {
		thy := ty(d.threshold)
		for x := 0; x < l.barW; x += 4 * k {
			im.fill(l.barX+x, thy, 2*k, max(1, k/2), colThreshold)
		}
	}
	if d.traceN > 1 {
		px, py := 0, 0
		for i := 0; i < d.traceN; i++ {
			x := l.barX + i*(l.barW-1)/(traceLen-1)
			y := ty(d.traceAt(i))
			if i > 0 {
				im.line(px, py, x, y, k, colTrace)
			}
			px, py = x, y
		}
	}

	// Loop rate and inference latency.
	txt = strconv.AppendFloat(txt[:0], d.loopHz, 'f', 1, 64)
	txt = append(txt, "HZ  INF "...)
	txt = strconv.AppendFloat(txt, d.inference, 'f', 1, 64)
	txt = append(txt, "MS"...)
	im.text(l.barX, l.rateY, k, colText, txt, l.barW)

	// Planned motion: one polyline per dimension over the planned steps.
	if d.planSteps > 1 && d.planDim > 0 && l.planX > l.panelX+l.panelW+4*k {
		im.shade(l.planX, l.planY, l.planW, l.planH, 90)
		im.text(l.planX+2*k, l.planY+2*k, k, colText, append(txt[:0], "PLAN"...), l.planW)
		gy, gh := l.planY+11*k, l.planH-13*k
		plo, phi := math.Inf(1), math.Inf(-1)
		for _, v := range d.planned {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				plo, phi = math.Min(plo, v), math.Max(phi, v)
			}
		}
		if phi <= plo {
			phi = plo + 1
		}
		for j := 0; j < d.planDim; j++ {
			px, py := 0, 0
			for i := 0; i < d.planSteps; i++ {
				x := l.planX + 2*k + i*(l.planW-4*k)/(d.planSteps-1)
				y := gy + gh - 1 - int(frac(d.planned[i*d.planDim+j], plo, phi)*float64(gh-1))
				if i > 0 {
					im.line(px, py, x, y, k, colPlan[j])
				}
				px, py = x, y
			}
		}
	}
}
