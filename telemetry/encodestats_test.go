package telemetry

import (
	"math"
	"testing"
	"time"
)

// TestEncodeStatsMeasuresTheRateFramesWereEncodedAt: the page states the
// measured rate, not the configured limit (it said 15 fps while about 10 were
// decoded: the simulated camera delivers a frame per control step).
func TestEncodeStatsMeasuresTheRateFramesWereEncodedAt(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name   string
		period time.Duration // between frames, ending at now
		n      int
		want   float64
	}{
		{"10 fps camera under a 15 fps limit", 100 * time.Millisecond, 40, 10},
		{"15 fps", time.Second / 15, 60, 15},
		{"only the last 5 s count", 100 * time.Millisecond, 200, 10},
		{"one frame: no rate", time.Second, 1, 0},
		{"nothing recent", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e encodeStats
			for i := c.n - 1; i >= 0; i-- {
				e.add(time.Millisecond, time.Millisecond, now.Add(-time.Duration(i)*c.period))
			}
			if got := e.snapshot(now).FPS; math.Abs(got-c.want) > 0.05 {
				t.Fatalf("FPS = %.2f, want %.2f", got, c.want)
			}
		})
	}
	var e encodeStats
	e.add(time.Millisecond, time.Millisecond, now.Add(-time.Minute))
	e.add(time.Millisecond, time.Millisecond, now.Add(-time.Minute+time.Second))
	if got := e.snapshot(now).FPS; got != 0 {
		t.Fatalf("frames a minute old: FPS = %.2f, want 0 (the stream stopped)", got)
	}
}
