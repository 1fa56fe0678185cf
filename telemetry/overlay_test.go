package telemetry

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

func grayImage(w, h int, v byte) rgbImage {
	return rgbImage{pix: bytes.Repeat([]byte{v}, w*h*3), w: w, h: h}
}

func (im rgbImage) at(x, y int) rgb {
	i := (y*im.w + x) * 3
	return rgb{im.pix[i], im.pix[i+1], im.pix[i+2]}
}

// TestOverlayLayout pins the layout the browser test probes (browsertest
// e2e_test.go: bar at x 8…150, y 19…27 for 320×240).
func TestOverlayLayout(t *testing.T) {
	l := layoutFor(320, 240)
	if l.k != 1 || l.barX != 8 || l.barY != 19 || l.barW != 142 || l.barH != 8 {
		t.Fatalf("320×240 layout changed: %+v — update browsertest probes", l)
	}
	if l := layoutFor(640, 480); l.k != 2 {
		t.Fatalf("640×480 scale %d, want 2", l.k)
	}
}

func drawSample(t *testing.T, w, h int, s Sample) rgbImage {
	t.Helper()
	var o overlayState
	o.update(&s)
	var d overlayData
	o.snapshot(&d)
	im := grayImage(w, h, 128)
	drawOverlay(im, &d)
	return im
}

func TestOverlayPixels(t *testing.T) {
	im := drawSample(t, 320, 240, Sample{Energy: 0.3, Threshold: 1, State: StateRunning, LoopRateHz: 10,
		InferenceLatency: 12 * time.Millisecond, Planned: [][]float64{{0, 0}, {1, 2}, {2, 1}}})
	l := layoutFor(320, 240)
	if c := im.at(l.barX+2, l.barY+4); c != colRunning {
		t.Errorf("bar fill below threshold = %v, want green %v", c, colRunning)
	}
	if c := im.at(l.barX+l.barW-2, l.barY+4); c != colBarBG {
		t.Errorf("bar background = %v, want %v", c, colBarBG)
	}
	// Threshold mark at 1/1.5 of the bar.
	tx := l.barX + int(float64(l.barW)/1.5)
	if c := im.at(tx, l.barY-1); c != colThreshold {
		t.Errorf("threshold mark = %v, want %v", c, colThreshold)
	}
	// The panel is darkened, the rest of the frame untouched.
	if c := im.at(l.panelX+1, l.panelY+1); c.r >= 128 {
		t.Errorf("panel not shaded: %v", c)
	}
	if c := im.at(160, 200); c != (rgb{128, 128, 128}) {
		t.Errorf("pixel outside the overlay changed: %v", c)
	}
	// RUNNING is drawn in green somewhere on the state line.
	if !regionHas(im, l.barX, l.stateY, 60, 7, colRunning) {
		t.Error("state text not green")
	}
	// Planned motion box is drawn.
	if !regionHas(im, l.planX, l.planY, l.planW, l.planH, colPlan[0]) {
		t.Error("planned motion not drawn")
	}

	stopped := drawSample(t, 320, 240, Sample{Energy: 2, Threshold: 1, State: StateStopped, Reason: "energy"})
	if c := stopped.at(l.barX+2, l.barY+4); c != colStopped {
		t.Errorf("bar fill above threshold = %v, want red", c)
	}
	if !regionHas(stopped, l.barX, l.stateY, 140, 7, colStopped) {
		t.Error("STOPPED text not red")
	}
}

func regionHas(im rgbImage, x, y, w, h int, c rgb) bool {
	for yy := y; yy < y+h; yy++ {
		for xx := x; xx < x+w; xx++ {
			if im.at(xx, yy) == c {
				return true
			}
		}
	}
	return false
}

func TestOverlaySurvivesOddInput(t *testing.T) {
	for _, s := range []Sample{
		{Energy: math.NaN(), Threshold: math.Inf(1)},
		{Energy: -5, Threshold: -10, State: "WEIRD", Reason: string(make([]byte, 500))},
		{Planned: [][]float64{{math.NaN()}, {1, 2, 3, 4, 5, 6}, {}}},
	} {
		for _, sz := range [][2]int{{16, 16}, {64, 48}, {320, 240}, {1280, 720}} {
			drawSample(t, sz[0], sz[1], s) // must not panic
		}
	}
}

func TestScaleRGB(t *testing.T) {
	src := []byte{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4} // 2×2
	dst := make([]byte, 4*4*3)
	scaleRGB(dst, 4, 4, src, 2, 2)
	if dst[0] != 1 || dst[3*3] != 2 || dst[(3*4)*3] != 3 || dst[(3*4+3)*3] != 4 {
		t.Fatalf("scaled: %v", dst)
	}
}

func TestSampleJSON(t *testing.T) {
	s := Sample{Tick: 7, Time: time.Unix(1700000000, 0), Energy: 0.5, Threshold: math.NaN(), State: "STOPPED",
		Reason: "q\"uote\\ <tag>\x01 ünï\xff", Joints: []float64{1, 2}, Planned: [][]float64{{1}, {2, 3}},
		InferenceLatency: 1500 * time.Microsecond, PlanLateP90: 2.25, PlanLateLimit: math.NaN()}
	var got map[string]any
	b := appendSampleJSON(nil, &s)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	if got["type"] != "sample" || got["tick"].(float64) != 7 || got["threshold"] != nil || got["inference_ms"].(float64) != 1.5 ||
		got["plan_late"].(float64) != 2.25 || got["plan_late_limit"] != nil {
		t.Fatalf("decoded %v", got)
	}
	if got["reason"] != "q\"uote\\ <tag>\x01 ünï\ufffd" {
		t.Fatalf("reason %q", got["reason"])
	}
	e := Event{Kind: "trip", Reason: "energy", Trace: []float64{1, math.Inf(1)}}
	if err := json.Unmarshal(appendEventJSON(nil, &e, true), &got); err != nil {
		t.Fatal(err)
	}
}

// TestWireTimesKeepMilliseconds: samples and events carry exact Unix
// milliseconds; two events seconds apart never read the same time (they
// did: 7 significant digits made every "t" of a quarter hour 1795465000000).
func TestWireTimesKeepMilliseconds(t *testing.T) {
	t0 := time.UnixMilli(1795465123456)
	cases := []struct {
		name string
		json func(time.Time) []byte
	}{
		{"sample", func(at time.Time) []byte { return appendSampleJSON(nil, &Sample{Time: at}) }},
		{"event", func(at time.Time) []byte { return appendEventJSON(nil, &Event{Time: at, Kind: "trip"}, true) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a, b struct {
				T *int64 `json:"t"`
			}
			if err := json.Unmarshal(c.json(t0), &a); err != nil || a.T == nil || *a.T != 1795465123456 {
				t.Fatalf("t = %v (err %v), want 1795465123456", a.T, err)
			}
			if err := json.Unmarshal(c.json(t0.Add(3*time.Second)), &b); err != nil || b.T == nil || *b.T-*a.T != 3000 {
				t.Fatalf("3 s later: t = %v, want %d", b.T, *a.T+3000)
			}
			var z struct{ T *int64 }
			if err := json.Unmarshal(c.json(time.Time{}), &z); err != nil || z.T != nil {
				t.Fatalf("zero time: t = %v, want null", z.T)
			}
		})
	}
}

// TestPublishAllocs proves the control-loop side allocates nothing once
// warmed up.
func TestPublishAllocs(t *testing.T) {
	s := &Server{ring: make([]Sample, 16), wake: make(chan struct{}, 1), metrics: NewMetrics()}
	smp := Sample{Energy: 1, Threshold: 2, State: StateRunning, Reason: "", Joints: make([]float64, 7),
		EndEffector: make([]float64, 3), Planned: [][]float64{{1, 2, 3}, {4, 5, 6}}}
	for i := 0; i < 40; i++ {
		s.Publish(smp)
	}
	if n := testing.AllocsPerRun(200, func() { s.Publish(smp) }); n != 0 {
		t.Fatalf("Publish allocates %.1f times per call", n)
	}
}

func TestSubmitFrameNeverBlocks(t *testing.T) {
	m := NewMetrics()
	p, err := newVideoPipeline(VideoConfig{Width: 64, Height: 48, FPS: 10}, m, &overlayState{}, func() int { return 1 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No encoder goroutine: the pool drains and further frames are dropped.
	frame := make([]byte, 64*48*3)
	t0 := time.Now()
	accepted := 0
	for i := 0; i < 50; i++ {
		if p.submit(frame, 64, 48, t0.Add(time.Duration(i)*100*time.Millisecond)) {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("accepted %d frames with a stalled encoder, want 1 (one-slot queue)", accepted)
	}
	if p.submit(frame[:10], 64, 48, time.Time{}) {
		t.Fatal("short frame accepted")
	}
	// Frame-rate limit: 30 fps input at 10 fps keeps one in three.
	p2, _ := newVideoPipeline(VideoConfig{Width: 64, Height: 48, FPS: 10}, m, &overlayState{}, func() int { return 1 }, nil)
	kept := 0
	for i := 0; i < 30; i++ {
		if p2.submit(frame, 64, 48, t0.Add(time.Duration(i)*time.Second/30)) {
			kept++
			<-p2.work
			p2.free <- &frameBuf{}
		}
	}
	if kept < 9 || kept > 11 {
		t.Fatalf("kept %d of 30 frames at 30→10 fps", kept)
	}
	// After warm-up a submitted frame costs no allocation.
	p3, _ := newVideoPipeline(VideoConfig{Width: 64, Height: 48, FPS: 10}, m, &overlayState{}, func() int { return 1 }, nil)
	i := 0
	submitAndDrain := func() {
		i++
		if p3.submit(frame, 64, 48, t0.Add(time.Duration(i)*time.Second)) {
			p3.free <- <-p3.work
		}
	}
	for j := 0; j < 10; j++ {
		submitAndDrain()
	}
	if n := testing.AllocsPerRun(100, submitAndDrain); n != 0 {
		t.Fatalf("SubmitFrame allocates %.1f times per frame", n)
	}
}

func BenchmarkOverlay640x480(b *testing.B) {
	var o overlayState
	for i := 0; i < traceLen; i++ {
		o.update(&Sample{Energy: float64(i%10) / 10, Threshold: 1, State: StateRunning, LoopRateHz: 10,
			Planned: [][]float64{{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}}})
	}
	im := grayImage(640, 480, 100)
	var d overlayData
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o.snapshot(&d)
		drawOverlay(im, &d)
	}
}

// The overlay and the wire say which score the stop watches.
func TestWatchedScoreIsLabelled(t *testing.T) {
	for _, tc := range []struct{ watched, label, wire string }{
		{"", "E", "energy"}, {"energy", "E", "energy"}, {"centered_energy", "CE", "centered_energy"},
		{"state_energy", "SE", "state_energy"}, {"other", "?", "other"},
	} {
		if got := scoreLabel(tc.watched); got != tc.label {
			t.Errorf("scoreLabel(%q) = %q, want %q", tc.watched, got, tc.label)
		}
		var got map[string]any
		s := Sample{Energy: 1, Threshold: 2, Watched: tc.watched, StateEnergy: 0.25}
		if err := json.Unmarshal(appendSampleJSON(nil, &s), &got); err != nil {
			t.Fatal(err)
		}
		if got["watch"] != tc.wire || got["state_energy"] != 0.25 {
			t.Errorf("watched %q: sample %v", tc.watched, got)
		}
		e := Event{Kind: "trip", Score: tc.watched, Energy: 3}
		if err := json.Unmarshal(appendEventJSON(nil, &e, true), &got); err != nil {
			t.Fatal(err)
		}
		if got["score"] != tc.wire {
			t.Errorf("watched %q: event %v", tc.watched, got)
		}
	}
	// Without a state term the sample says null.
	var got map[string]any
	s := Sample{StateEnergy: math.NaN()}
	if err := json.Unmarshal(appendSampleJSON(nil, &s), &got); err != nil || got["state_energy"] != nil {
		t.Errorf("state_energy NaN: %v (%v)", got, err)
	}
	// The value line's label changes the pixels drawn; nothing else does.
	l := layoutFor(320, 240)
	a := drawSample(t, 320, 240, Sample{Energy: 0.3, Threshold: 1, State: StateRunning})
	b := drawSample(t, 320, 240, Sample{Energy: 0.3, Threshold: 1, State: StateRunning, Watched: "state_energy"})
	differ := false
	for y := 0; y < 240; y++ {
		for x := 0; x < 320; x++ {
			if a.at(x, y) != b.at(x, y) {
				if y < l.valueY || y >= l.valueY+7 {
					t.Fatalf("pixel (%d, %d) outside the value line differs", x, y)
				}
				differ = true
			}
		}
	}
	if !differ {
		t.Error("the watched score's label is not drawn")
	}
}

// The value line's numbers: decimals by size, and a policy energy of ~10⁵
// with its threshold fits the bar at the demo's view sizes (with three
// decimals the threshold used to be cut inside its digits: "THR 12604").
func TestOverlayValueLineFits(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{{math.NaN(), "-"}, {5.70381, "5.704"}, {-0.5, "-0.500"}, {73.79, "73.8"}, {126040.23, "126040"}, {-48422.4, "-48422"}} {
		if got := string(appendScore(nil, tc.x)); got != tc.want {
			t.Errorf("appendScore(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
	for _, size := range [][2]int{{320, 240}, {480, 480}} {
		l := layoutFor(size[0], size[1])
		k := l.k
		line := "SE " + string(appendScore(nil, 142248.3)) + "  THR " + string(appendScore(nil, 126040.2))
		if w := len(line)*(glyphW+1)*k - k; w > l.barW {
			t.Errorf("%dx%d: %q is %d px wide, the bar %d", size[0], size[1], line, w, l.barW)
		}
	}
}
