package actuators_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Reconnect attempts follow the backoff on the injected clock: no dial
// before it expires, doubling up to the maximum.
func TestReconnectBackoff(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	clk := &clock{t: time.Unix(0, 0)}
	var dials int
	dial := func(ctx context.Context, timeout time.Duration) (actuators.Conn, error) {
		dials++
		return nil, syscall.ECONNREFUSED
	}
	cfg := actuators.Config{BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond}
	arm, err := actuators.NewModbusArm(m, cfg, dial, actuators.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cmd := actuators.Command{Velocity: make([]float64, 7)}
	ctx := context.Background()
	want := []time.Duration{10, 20, 40, 40}
	for i, w := range want {
		if err := arm.Command(ctx, cmd); !errors.Is(err, actuators.ErrDisconnected) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if dials != i+1 {
			t.Fatalf("attempt %d: %d dials", i, dials)
		}
		// Within the backoff: fails at once, no dial.
		clk.Advance(w*time.Millisecond - time.Millisecond)
		if err := arm.Command(ctx, cmd); !errors.Is(err, actuators.ErrDisconnected) || dials != i+1 {
			t.Fatalf("attempt %d in backoff: %v, %d dials", i, err, dials)
		}
		clk.Advance(time.Millisecond)
	}
	// Halt dials regardless of the backoff.
	clk.Advance(-time.Millisecond)
	if err := arm.Halt(ctx); !errors.Is(err, actuators.ErrDisconnected) || dials != len(want)+1 {
		t.Fatalf("halt: %v, %d dials", err, dials)
	}
}
