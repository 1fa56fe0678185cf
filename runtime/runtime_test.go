package runtime

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when the loop sleeps; SleepUntil jumps to the
// deadline plus a configurable lateness.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	late time.Duration // added to every wake-up
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	c.now = c.now.Add(c.late)
	return ctx.Err()
}

func TestSchedulerNoDrift(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0), late: 300 * time.Microsecond}
	s := NewScheduler(clk, 100*time.Millisecond)
	start := clk.Now()
	for i := int64(1); i <= 1000; i++ {
		tk, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tk.N != i {
			t.Fatalf("tick %d has index %d", i, tk.N)
		}
		if want := start.Add(time.Duration(i) * 100 * time.Millisecond); !tk.Deadline.Equal(want) {
			t.Fatalf("tick %d deadline %v, want %v (drift)", i, tk.Deadline.Sub(start), want.Sub(start))
		}
		if tk.Jitter != 300*time.Microsecond {
			t.Fatalf("jitter %v", tk.Jitter)
		}
	}
	if s.Missed() != 0 {
		t.Fatalf("missed %d", s.Missed())
	}
}

func TestSchedulerSkipsAndCountsMissedDeadlines(t *testing.T) {
	tests := []struct {
		name       string
		work       time.Duration
		wantMissed int64
		wantN      int64
	}{
		{"on time", 10 * time.Millisecond, 0, 2},
		{"late but within a period", 150 * time.Millisecond, 0, 2},
		{"two periods late", 250 * time.Millisecond, 1, 3},
		{"ten periods late", 1050 * time.Millisecond, 9, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(0, 0)}
			s := NewScheduler(clk, 100*time.Millisecond)
			if _, err := s.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.work)
			tk, err := s.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if wantDue := time.Unix(0, 0).Add(200 * time.Millisecond); !tk.Due.Equal(wantDue) {
				t.Fatalf("Due = %v, want the first deadline skipped %v", tk.Due, wantDue)
			}
			if s.Missed() != tt.wantMissed || tk.N != tt.wantN {
				t.Fatalf("missed %d n %d, want missed %d n %d", s.Missed(), tk.N, tt.wantMissed, tt.wantN)
			}
		})
	}
}

func TestChunkLatencyCompensation(t *testing.T) {
	period := 100 * time.Millisecond
	obs := time.Unix(50, 0)
	pred := make([]float32, 16*2)
	for i := range 16 {
		pred[2*i], pred[2*i+1] = float32(i), float32(-i)
	}
	tests := []struct {
		name        string
		now         time.Time
		wantFirst   float64
		wantDropped int
	}{
		{"on time executes the aligned action", obs, 1, 0},
		{"one period of inference latency drops one", obs.Add(period), 2, 1},
		{"late by 3.4 periods drops three", obs.Add(340 * time.Millisecond), 4, 3},
		{"over budget executes the last action", obs.Add(5 * time.Second), 8, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChunk(8, 2)
			c.Fill(pred, 1, 8, 0, obs, period, 1)
			a, dropped, ok := c.Take(tt.now, period)
			if !ok || a[0] != tt.wantFirst || a[1] != -tt.wantFirst || dropped != tt.wantDropped {
				t.Fatalf("got %v dropped %d ok %v; want first %v dropped %d", a, dropped, ok, tt.wantFirst, tt.wantDropped)
			}
		})
	}
}

func TestChunkExhaustsAndDoesNotRunAhead(t *testing.T) {
	period := 100 * time.Millisecond
	obs := time.Unix(50, 0)
	pred := make([]float32, 16)
	for i := range pred {
		pred[i] = float32(i)
	}
	c := NewChunk(8, 1)
	c.Fill(pred, 1, 8, 0, obs, period, 1)
	if _, _, ok := c.Take(obs.Add(-time.Second), period); ok {
		t.Fatal("executed an action that is not due yet")
	}
	for i := 0; i < 8; i++ {
		a, _, ok := c.Take(obs.Add(time.Duration(i)*period), period)
		if !ok || a[0] != float64(i+1) {
			t.Fatalf("step %d: %v %v", i, a, ok)
		}
	}
	if _, _, ok := c.Take(obs.Add(time.Second), period); ok || c.Len() != 0 {
		t.Fatal("chunk not exhausted")
	}
}

// The tail past the executed window bridges a late plan: Len counts the
// window only (the loop replans on it), Take goes on into the tail, on
// schedule, counting it, and the arm holds only when the tail ends too.
func TestChunkTailBridgesALatePlan(t *testing.T) {
	period := 100 * time.Millisecond
	obs := time.Unix(50, 0)
	pred := make([]float32, 16)
	for i := range pred {
		pred[i] = float32(i)
	}
	c := NewChunk(15, 1)
	c.Fill(pred, 1, 8, 7, obs, period, 1)
	for i := 0; i < 8; i++ {
		if c.Len() != 8-i {
			t.Fatalf("step %d: Len %d, want %d window actions left", i, c.Len(), 8-i)
		}
		c.Take(obs.Add(time.Duration(i)*period), period)
	}
	if c.Len() != 0 || c.Bridged() != 0 {
		t.Fatalf("window done: Len %d, bridged %d; want 0, 0", c.Len(), c.Bridged())
	}
	for i := 8; i < 15; i++ {
		a, _, ok := c.Take(obs.Add(time.Duration(i)*period), period)
		if !ok || a[0] != float64(i+1) {
			t.Fatalf("bridge step %d: %v %v, want prediction %d", i, a, ok, i+1)
		}
	}
	if c.Bridged() != 7 {
		t.Errorf("bridged %d, want 7", c.Bridged())
	}
	if _, _, ok := c.Take(obs.Add(15*period), period); ok {
		t.Error("executed past the prediction's end")
	}
	// A tail longer than the prediction is cut at its end; Fill resets the count.
	c.Fill(pred, 1, 8, 100, obs, period, 2)
	if c.n != 15 || c.Bridged() != 0 || c.Len() != 8 {
		t.Errorf("refill: %d actions, bridged %d, Len %d; want 15, 0, 8", c.n, c.Bridged(), c.Len())
	}
}

func TestChunkFillAllocatesNothing(t *testing.T) {
	pred := make([]float32, 32)
	c := NewChunk(8, 2)
	now := time.Unix(0, 0)
	allocs := testing.AllocsPerRun(100, func() {
		c.Fill(pred, 1, 8, 0, now, time.Millisecond, 1)
		c.Take(now, time.Millisecond)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs", allocs)
	}
}

func TestMachineTransitions(t *testing.T) {
	var got []Transition
	m := NewMachine(time.Now, func(tr Transition) { got = append(got, tr) })
	steps := []struct {
		to      State
		wantErr bool
	}{
		{StateRunning, true}, // INIT cannot run
		{StateReady, false},
		{StateRunning, false},
		{StateReady, true}, // must stop first
		{StateStopped, false},
		{StateRunning, true}, // latched: reset first
		{StateReady, false},
		{StateShutdown, false},
	}
	for i, s := range steps {
		err := m.To(s.to, "test")
		if (err != nil) != s.wantErr {
			t.Fatalf("step %d to %s: err %v", i, s.to, err)
		}
	}
	if len(got) != 5 {
		t.Fatalf("%d transitions published, want 5", len(got))
	}
}
