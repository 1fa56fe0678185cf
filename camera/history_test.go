package camera

import (
	"errors"
	"testing"
	"time"
)

func TestHistory(t *testing.T) {
	h := NewHistory(3, 2)
	var o Obs
	if err := h.Latest(&o); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("empty Latest: %v", err)
	}
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		if err := h.Push(t0.Add(time.Duration(i)*100*time.Millisecond), uint64(i+1), []float32{float32(i), float32(-i)}); err != nil {
			t.Fatal(err)
		}
	}
	if h.Len() != 3 {
		t.Fatalf("Len %d", h.Len())
	}
	win := make([]Obs, 2)
	if err := h.Window(win); err != nil {
		t.Fatal(err)
	}
	if win[0].Seq != 4 || win[1].Seq != 5 || win[1].Tensor[0] != 4 {
		t.Errorf("window = %+v, want seq 4 then 5 (oldest first)", win)
	}
	if err := h.AtOrBefore(t0.Add(350*time.Millisecond), &o); err != nil || o.Seq != 4 {
		t.Errorf("AtOrBefore(350ms) = seq %d, %v; want 4", o.Seq, err)
	}
	if err := h.AtOrBefore(t0.Add(100*time.Millisecond), &o); !errors.Is(err, ErrNoFrame) {
		t.Errorf("AtOrBefore before the oldest kept: %v", err)
	}
	if err := h.Window(make([]Obs, 4)); err == nil {
		t.Error("window deeper than history accepted")
	}
	if err := h.Push(t0, 9, []float32{1}); err == nil {
		t.Error("wrong tensor length accepted")
	}
	if got := h.NewestTime(); !got.Equal(t0.Add(400 * time.Millisecond)) {
		t.Errorf("NewestTime = %v", got)
	}
	// No allocations once the caller's buffers exist.
	allocs := testing.AllocsPerRun(100, func() {
		_ = h.Push(t0, 1, []float32{1, 2}[:])
		_ = h.Window(win)
		_ = h.Latest(&o)
	})
	if allocs != 0 {
		t.Errorf("history allocates %v per push+window", allocs)
	}
	h.Reset()
	if h.Len() != 0 {
		t.Error("Reset")
	}
}
