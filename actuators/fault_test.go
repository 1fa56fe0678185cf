package actuators_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/actuators/modbustest"
	"github.com/energyflow/edge/actuators/simarm"
)

// driver plays the runtime: one fresh command per tick, each carrying its
// sequence number in velocity[0] (seq × 1e-4 rad/s), so that the
// controller's log shows which command it applied and in which order.
type driver struct {
	t      *testing.T
	arm    actuators.Arm
	seq    int
	failed map[int]error
	good   []int
}

func newDriver(t *testing.T, arm actuators.Arm) *driver {
	return &driver{t: t, arm: arm, failed: map[int]error{}}
}

const seqStep = 1e-4

func (d *driver) tick() error {
	d.seq++
	err := d.arm.Command(context.Background(), actuators.Command{Velocity: vel(7, float64(d.seq)*seqStep)})
	if err != nil {
		d.failed[d.seq] = err
	} else {
		d.good = append(d.good, d.seq)
	}
	return err
}

func seqOf(v float64) int { return int(math.Round(v / seqStep)) }

// mustFail ticks until a command fails (the fault may need a request to
// notice) and returns the error.
func (d *driver) mustFail(within time.Duration) error {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := d.tick(); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.t.Fatalf("no command failed within %v", within)
	return nil
}

// recover ticks until a command succeeds again.
func (d *driver) recover(within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		if err = d.tick(); err == nil {
			return
		}
		if !errors.Is(err, actuators.ErrDisconnected) && !errors.Is(err, actuators.ErrException) {
			d.t.Fatalf("unexpected error while recovering: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.t.Fatalf("did not recover within %v: %v", within, err)
}

// checkLog asserts the controller applied commands in order, each at most
// once, that it applied none of the failed ones unless appliedOK (a late
// reply: the write landed, only the answer was lost), and that the last
// command it applied is the driver's last good one.
func (d *driver) checkLog(log []simarm.CommandRecord, appliedOK bool) {
	d.t.Helper()
	prev := 0
	var seqs []int
	for _, r := range log {
		s := seqOf(r.Velocity[0])
		if s == 0 {
			continue // Enable/Halt blocks
		}
		seqs = append(seqs, s)
		if s <= prev {
			d.t.Errorf("command %d applied after %d: stale or repeated write (log %v)", s, prev, seqs)
		}
		prev = s
		if err, ok := d.failed[s]; ok && !appliedOK {
			d.t.Errorf("failed command %d (%v) was applied", s, err)
		}
	}
	if len(d.good) == 0 || prev != d.good[len(d.good)-1] {
		d.t.Errorf("last applied %d, last good command %v", prev, d.good[max(0, len(d.good)-1):])
	}
}

func faultConfig(addr string) actuators.Config {
	return testConfig(addr) // 1s request timeout: no spurious timeouts under load
}

func assertDisconnected(t *testing.T, err error, arm *actuators.ModbusArm, ev *events) {
	t.Helper()
	if !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("got %v, want ErrDisconnected", err)
	}
	// Reported upward at once: the event came during the failing call.
	if ev.count(actuators.StateDisconnected) == 0 {
		t.Error("no disconnect event")
	}
	if h := arm.Health(); h.State != actuators.StateConnected && h.LastErr == nil {
		t.Errorf("health %+v", h)
	}
}

func TestFaultServerKilledMidRun(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var ev events
	arm := newArm(t, m, faultConfig(sim.Addr()), &ev)
	if err := arm.Enable(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, arm)
	for i := 0; i < 5; i++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.Kill(); err != nil {
		t.Fatal(err)
	}
	err := d.mustFail(5 * time.Second)
	assertDisconnected(t, err, arm, &ev)
	if h := arm.Health(); h.State != actuators.StateDisconnected || h.Losses != 1 {
		t.Errorf("health %+v", h)
	}
	// While the server is away every call fails fast with ErrDisconnected.
	for i := 0; i < 3; i++ {
		if err := d.tick(); !errors.Is(err, actuators.ErrDisconnected) {
			t.Fatalf("tick while down: %v", err)
		}
	}
	// The controller's watchdog stops the arm by itself.
	time.Sleep(m.HeartbeatTimeout + 100*time.Millisecond)
	if s := sim.Snapshot(); s.Enabled || s.Fault&actuators.FaultHeartbeat == 0 {
		t.Errorf("controller did not stop on heartbeat lapse: %+v", s)
	}
	if err := sim.Restart(); err != nil {
		t.Fatal(err)
	}
	d.recover(10 * time.Second)
	if ev.count(actuators.StateConnected) < 2 {
		t.Errorf("no reconnect event: %v", ev.ev)
	}
	// Motion needs an explicit Enable after the controller stopped itself.
	if s := sim.Snapshot(); s.Enabled {
		t.Error("re-enabled without Enable")
	}
	if err := arm.Enable(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	d.checkLog(sim.Commands(), false)
}

func TestFaultRepliesDelayedPastTimeout(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var ev events
	arm := newArm(t, m, faultConfig(sim.Addr()), &ev)
	d := newDriver(t, arm)
	for i := 0; i < 3; i++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	sim.SetDelay(5 * time.Second)
	err := d.mustFail(10 * time.Second)
	assertDisconnected(t, err, arm, &ev)
	sim.SetDelay(0)
	d.recover(15 * time.Second)
	// Not one reply behind: a read right after gets its own reply.
	var st actuators.State
	for i := 0; i < 3; i++ {
		if err := arm.State(context.Background(), &st); err != nil {
			t.Fatal(err)
		}
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if st.Status != sim.Snapshot().Status || len(st.Position) != 7 {
		t.Errorf("state %+v", st)
	}
	d.checkLog(sim.Commands(), true)
}

func TestFaultExceptionCodes(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var ev events
	arm := newArm(t, m, faultConfig(sim.Addr()), &ev)
	d := newDriver(t, arm)
	if err := d.tick(); err != nil {
		t.Fatal(err)
	}
	for _, code := range []byte{2, 4, 6} {
		sim.SetException(code)
		err := d.tick()
		var ex *actuators.ExceptionError
		if !errors.As(err, &ex) || ex.Exception != code || ex.Function != 16 || !errors.Is(err, actuators.ErrException) {
			t.Fatalf("code %d: got %v", code, err)
		}
		var st actuators.State
		if err := arm.State(context.Background(), &st); !errors.Is(err, actuators.ErrException) {
			t.Fatalf("state, code %d: %v", code, err)
		}
	}
	// An exception is an answer: the connection is kept.
	if h := arm.Health(); h.State != actuators.StateConnected || h.Connects != 1 || h.Exceptions != 6 {
		t.Errorf("health %+v", h)
	}
	if n := ev.count(actuators.StateDisconnected); n != 0 {
		t.Errorf("%d disconnect events", n)
	}
	sim.SetException(0)
	d.recover(5 * time.Second)
	d.checkLog(sim.Commands(), false)
}

func TestFaultConnectionRefusedAtStart(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	addr := fmt.Sprintf("127.0.0.1:%d", modbustest.FreePort(t))
	var ev events
	arm := newArm(t, m, faultConfig(addr), &ev)
	err := arm.Connect(context.Background())
	if !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("Connect: %v", err)
	}
	if ev.count(actuators.StateDisconnected) == 0 {
		t.Error("no event for the failed connect")
	}
	d := newDriver(t, arm)
	if err := d.tick(); !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("tick: %v", err)
	}
	h := arm.Health()
	if h.State != actuators.StateDisconnected || h.NextDial.IsZero() {
		t.Errorf("health %+v", h)
	}
	sim := startSim(t, m, simarm.Config{Addr: addr})
	d.recover(10 * time.Second)
	d.checkLog(sim.Commands(), false)
	if len(sim.Commands()) != 1 {
		t.Errorf("%d commands applied, want only the fresh one", len(sim.Commands()))
	}
}

func TestFaultStalledController(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var ev events
	arm := newArm(t, m, faultConfig(sim.Addr()), &ev)
	d := newDriver(t, arm)
	if err := d.tick(); err != nil {
		t.Fatal(err)
	}
	sim.Stall()
	err := d.mustFail(10 * time.Second)
	assertDisconnected(t, err, arm, &ev)
	// More ticks while stalled: each fails (timeout or backoff), none lands.
	for i := 0; i < 3; i++ {
		_ = d.tick()
		time.Sleep(50 * time.Millisecond)
	}
	sim.Unstall()
	d.recover(15 * time.Second)
	d.checkLog(sim.Commands(), false)
}

func TestFaultConnectionsDropped(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	var ev events
	arm := newArm(t, m, faultConfig(sim.Addr()), &ev)
	d := newDriver(t, arm)
	for round := 0; round < 3; round++ {
		if err := d.tick(); err != nil {
			t.Fatal(err)
		}
		if err := sim.DropConnections(); err != nil {
			t.Fatal(err)
		}
		err := d.mustFail(5 * time.Second)
		assertDisconnected(t, err, arm, &ev)
		d.recover(10 * time.Second)
	}
	if h := arm.Health(); h.Losses != 3 || h.Connects != 4 {
		t.Errorf("health %+v", h)
	}
	d.checkLog(sim.Commands(), false)
}

// Halt reaches the controller even during the reconnect backoff.
func TestHaltIgnoresBackoff(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	cfg := faultConfig(sim.Addr())
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	var ev events
	arm := newArm(t, m, cfg, &ev)
	if err := arm.Enable(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = sim.DropConnections()
	d := newDriver(t, arm)
	_ = d.mustFail(5 * time.Second)
	if err := d.tick(); !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("tick in backoff: %v", err)
	}
	if err := arm.Halt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sim.Snapshot().Enabled {
		t.Error("halt did not land")
	}
}

// The context's deadline bounds a request when it is sooner than the
// configured timeout; OnEvent may call the arm (it runs outside the lock).
func TestContextDeadlineBoundsRequest(t *testing.T) {
	m := loadMap(t, "simarm.yaml")
	sim := startSim(t, m, simarm.Config{})
	cfg := testConfig(sim.Addr())
	cfg.Timeout = time.Minute
	var arm *actuators.ModbusArm
	lost := make(chan actuators.Health, 1)
	arm, err := actuators.NewTCP(m, cfg, actuators.Options{OnEvent: func(e actuators.Event) {
		if e.State == actuators.StateDisconnected {
			select {
			case lost <- arm.Health():
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	if err := arm.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	sim.SetDelay(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err = arm.Command(ctx, actuators.Command{Velocity: vel(7, 0.1)})
	if !errors.Is(err, actuators.ErrDisconnected) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("request took %v with a 300ms context deadline", d)
	}
	select {
	case h := <-lost:
		if h.State != actuators.StateDisconnected {
			t.Errorf("health from OnEvent %+v", h)
		}
	default:
		t.Error("no disconnect event")
	}
}
