package actuators_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/modbustest"
	"github.com/energyflow/edge/actuators/simarm"
)

// reportLatency adds the median, p99 and max of lat (per op) to the
// benchmark's output.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds())/1e3, "max-µs")
}

// benchRoundTrip measures one control tick: Command (write velocity,
// gripper and heartbeat) then State (read the whole state).
func benchRoundTrip(b *testing.B, m *actuators.Map, addr string) {
	arm, err := actuators.NewTCP(m, actuators.Config{Address: addr, Timeout: time.Second}, actuators.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer arm.Close()
	benchArm(b, m, arm)
}

func benchArm(b *testing.B, m *actuators.Map, arm *actuators.ModbusArm) {
	ctx := context.Background()
	cmd := actuators.Command{Velocity: make([]float64, m.Axes()), Gripper: 0.5}
	var st actuators.State
	for i := 0; i < 100; i++ { // warm-up: connect, grow buffers
		if err := arm.Command(ctx, cmd); err != nil {
			b.Fatal(err)
		}
		if err := arm.State(ctx, &st); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd.Velocity[0] = float64(i%100) * 0.01
		t0 := time.Now()
		if err := arm.Command(ctx, cmd); err != nil {
			b.Fatal(err)
		}
		if err := arm.State(ctx, &st); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func BenchmarkRoundTrip(b *testing.B) {
	m := loadMap(b, "simarm.yaml")
	b.Run("simarm", func(b *testing.B) {
		sim := startSim(b, m, simarm.Config{})
		benchRoundTrip(b, m, sim.Addr())
	})
	b.Run("pymodbus", func(b *testing.B) {
		py := modbustest.StartPymodbus(b, 1, pymodbusInputs(b, m))
		benchRoundTrip(b, m, py.Addr)
	})
	b.Run("simarm-rtu-pty", func(b *testing.B) {
		master, slave, err := modbustest.OpenPTY()
		if err != nil {
			b.Fatal(err)
		}
		sim := startSim(b, m, simarm.Config{})
		done := make(chan struct{})
		go func() { defer close(done); _ = sim.ServeRTU(master) }()
		defer func() { sim.Close(); master.Close(); <-done }()
		arm, err := actuators.NewRTU(m, actuators.Config{Device: slave, BaudRate: 115200, Parity: "N", Timeout: time.Second}, actuators.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer arm.Close()
		benchArm(b, m, arm)
	})
}

// BenchmarkHalt measures the stop path: enable dropped, zero velocity,
// gripper hold, heartbeat, in one request with the simulated arm's map.
func BenchmarkHalt(b *testing.B) {
	ctx := context.Background()
	m := loadMap(b, "simarm.yaml")
	sim := startSim(b, m, simarm.Config{})
	arm, err := actuators.NewTCP(m, actuators.Config{Address: sim.Addr(), Timeout: time.Second}, actuators.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer arm.Close()
	for i := 0; i < 100; i++ {
		if err := arm.Halt(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before := arm.Health().Requests
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := arm.Halt(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(arm.Health().Requests-before)/float64(b.N), "requests/op")
	reportLatency(b, lat)
}
