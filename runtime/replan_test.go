package runtime

import (
	"testing"
	"time"
)

func TestReplanMarginCoversInferenceLatency(t *testing.T) {
	const period = 50 * time.Millisecond
	cases := []struct {
		name    string
		margin  int
		ta      int
		latency time.Duration // smoothed inference latency; 0: none measured yet
		want    int
	}{
		{"before the first chunk: the configured margin", 2, 8, 0, 2},
		{"fast inference keeps the configured margin", 2, 8, 20 * time.Millisecond, 2},
		{"exactly two periods", 2, 8, 2 * period, 2},
		{"just over two periods needs three actions left", 2, 8, 2*period + time.Millisecond, 3},
		{"slow inference under load", 2, 8, 230 * time.Millisecond, 5},
		{"a configured margin above the latency stays", 4, 8, 60 * time.Millisecond, 4},
		{"the raise stops at T_a-1", 2, 8, 2 * time.Second, 7},
		{"a configured margin above T_a-1 is kept", 9, 8, 2 * time.Second, 9},
		{"zero margin follows the latency", 0, 8, 30 * time.Millisecond, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &Loop{period: period, margin: c.margin, ta: c.ta, latEWMA: c.latency}
			if got := l.replanMargin(); got != c.want {
				t.Errorf("replanMargin() = %d, want %d", got, c.want)
			}
		})
	}
}

func TestObserveLatencySmooths(t *testing.T) {
	l := &Loop{period: 50 * time.Millisecond}
	l.observeLatency(80 * time.Millisecond)
	if l.latEWMA != 80*time.Millisecond {
		t.Fatalf("first sample: latEWMA = %v, want it taken as is", l.latEWMA)
	}
	l.observeLatency(480 * time.Millisecond) // one slow sample moves it a quarter of the way
	if l.latEWMA != 180*time.Millisecond {
		t.Fatalf("after a slow sample: latEWMA = %v, want 180ms", l.latEWMA)
	}
	for range 30 {
		l.observeLatency(40 * time.Millisecond)
	}
	if l.latEWMA > 41*time.Millisecond {
		t.Fatalf("after 30 fast samples: latEWMA = %v, want back near 40ms", l.latEWMA)
	}
}
