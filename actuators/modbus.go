package actuators

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/goburrow/modbus"
)

// Conn is one open Modbus connection as the arm uses it: goburrow's client
// plus the per-request unit id and timeout, and Close. The arm serializes
// every call (one request on the wire at a time, also on RTU where the
// library has no lock) and discards a Conn after any error that is not a
// Modbus exception.
type Conn interface {
	modbus.Client
	SetUnit(id byte)
	SetTimeout(d time.Duration)
	Close() error
}

// DialFunc opens a Conn. timeout bounds the connect.
type DialFunc func(ctx context.Context, timeout time.Duration) (Conn, error)

// ConnState is the state of the link to the controller.
type ConnState int

// Link states reported by Event and Health.
const (
	StateDisconnected ConnState = iota // no connection (never connected, lost, or backing off)
	StateConnected                     // connected; the last request got a reply
)

func (s ConnState) String() string {
	if s == StateConnected {
		return "connected"
	}
	return "disconnected"
}

// Event is a change of the link to the controller.
type Event struct {
	Time  time.Time
	State ConnState
	Err   error // why the link was lost or the reconnect failed; nil on connect
}

// Health is a snapshot of the link.
type Health struct {
	State      ConnState
	Since      time.Time // when State was entered
	LastErr    error     // the last transport error (nil once reconnected)
	NextDial   time.Time // earliest reconnect attempt while disconnected
	Requests   uint64    // requests sent
	Failures   uint64    // requests that failed for transport reasons
	Exceptions uint64    // Modbus exceptions answered
	Connects   uint64    // successful (re)connects
	Losses     uint64    // connections lost
}

// ModbusArm drives an arm through a register map over Modbus TCP or RTU
// with github.com/goburrow/modbus.
//
// Every request has a timeout. After any error that is not a Modbus
// exception the connection is closed (goburrow otherwise stays one reply
// behind or broken) and re-opened on a later call, no sooner than the
// backoff allows; meanwhile calls fail at once with ErrDisconnected. A
// failed Command is reported and never retried. Halt ignores the backoff
// and tries to reach the controller once more.
//
// A ModbusArm is safe for concurrent use; requests are serialized.
type ModbusArm struct {
	m     *Map
	cfg   Config
	dial  DialFunc
	clock Clock
	log   *slog.Logger
	on    func(Event)

	mu           sync.Mutex
	conn         Conn
	closed       bool
	health       Health
	backoff      time.Duration
	pending      []Event
	heartbeat    uint32
	lastGripper  float64
	gripperKnown bool

	cmd, halt, haltNoGrip, enable, read *plan
	// hot-path slots
	cmdVel, cmdGrip, cmdHB                  slot
	haltVel, haltGrip, haltHB, haltEnable   slot
	hngVel, hngHB, hngEnable                slot
	enEnable                                slot
	rdPos, rdVel, rdGrip, rdStatus, rdFault slot
	rdEStop, rdEnabled, rdObs               slot
	gripRead                                *plan
	gripReadSlot                            slot
	scratch                                 State
}

var _ Arm = (*ModbusArm)(nil)

// NewModbusArm builds an arm on any transport. It does not connect: the
// first request (or Connect) does. m must be validated.
func NewModbusArm(m *Map, cfg Config, dial DialFunc, opts Options) (*ModbusArm, error) {
	if m == nil || !m.valid {
		return nil, errors.New("actuators: NewModbusArm needs a validated register map (ParseMap, LoadMap or Map.Validate)")
	}
	cfg = cfg.withDefaults()
	a := &ModbusArm{m: m, cfg: cfg, dial: dial, clock: opts.Clock, log: opts.Logger, on: opts.OnEvent}
	if a.clock == nil {
		a.clock = systemClock{}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.health.Since = a.clock.Now()
	ss := &m.Signals
	gap := m.maxReadGap()

	a.cmd = buildPlan([]*Signal{ss.VelocityCommand, ss.GripperCommand, ss.Heartbeat}, true, 0)
	a.cmd.moveLast(ss.Heartbeat)
	a.cmdVel, a.cmdGrip, a.cmdHB = a.cmd.slot(ss.VelocityCommand), a.cmd.slot(ss.GripperCommand), a.cmd.slot(ss.Heartbeat)

	a.halt = buildPlan([]*Signal{ss.VelocityCommand, ss.GripperCommand, ss.Heartbeat, ss.Enable}, true, 0)
	a.halt.moveFirst(ss.Enable)
	a.haltVel, a.haltGrip, a.haltHB, a.haltEnable = a.halt.slot(ss.VelocityCommand), a.halt.slot(ss.GripperCommand), a.halt.slot(ss.Heartbeat), a.halt.slot(ss.Enable)

	a.haltNoGrip = buildPlan([]*Signal{ss.VelocityCommand, ss.Heartbeat, ss.Enable}, true, 0)
	a.haltNoGrip.moveFirst(ss.Enable)
	a.hngVel, a.hngHB, a.hngEnable = a.haltNoGrip.slot(ss.VelocityCommand), a.haltNoGrip.slot(ss.Heartbeat), a.haltNoGrip.slot(ss.Enable)

	a.enable = buildPlan([]*Signal{ss.Enable}, true, 0)
	a.enEnable = a.enable.slot(ss.Enable)

	enabledSrc := ss.EnabledState
	if enabledSrc == nil {
		enabledSrc = ss.Enable
	}
	a.read = buildPlan([]*Signal{ss.Position, ss.Velocity, ss.GripperState, ss.Status, ss.Fault, ss.EStop, enabledSrc, ss.Observation}, false, gap)
	a.rdPos, a.rdVel, a.rdGrip = a.read.slot(ss.Position), a.read.slot(ss.Velocity), a.read.slot(ss.GripperState)
	a.rdStatus, a.rdFault, a.rdEStop = a.read.slot(ss.Status), a.read.slot(ss.Fault), a.read.slot(ss.EStop)
	a.rdEnabled, a.rdObs = a.read.slot(enabledSrc), a.read.slot(ss.Observation)
	if ss.GripperCommand != nil {
		a.gripRead = buildPlan([]*Signal{ss.GripperCommand}, false, 0)
		a.gripReadSlot = a.gripRead.slot(ss.GripperCommand)
	}
	if v, ok := m.GripperHoldValue(); ok {
		a.lastGripper, a.gripperKnown = v, true
	}
	return a, nil
}

// NewTCP builds an arm that talks Modbus TCP to cfg.Address.
func NewTCP(m *Map, cfg Config, opts Options) (*ModbusArm, error) {
	cfg.Transport = TransportTCP
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return NewModbusArm(m, cfg, TCPDialer(cfg.Address), opts)
}

// TCPDialer dials Modbus TCP with goburrow/modbus; the handler's idle
// timer is off (the arm owns the connection's life).
func TCPDialer(addr string) DialFunc {
	return func(ctx context.Context, timeout time.Duration) (Conn, error) {
		h := modbus.NewTCPClientHandler(addr)
		h.Timeout = timeout
		h.IdleTimeout = 0
		if err := h.Connect(); err != nil {
			return nil, err
		}
		return &tcpConn{Client: modbus.NewClient(h), h: h}, nil
	}
}

// NewRTU builds an arm that talks Modbus RTU on the serial device cfg.Device.
// The request timeout is fixed when the port opens (cfg.Timeout).
func NewRTU(m *Map, cfg Config, opts Options) (*ModbusArm, error) {
	cfg.Transport = TransportRTU
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return NewModbusArm(m, cfg, RTUDialer(cfg), opts)
}

// Open loads cfg.Map and builds a TCP or RTU arm as cfg.Transport says.
func Open(cfg Config, opts Options) (*ModbusArm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Map == "" {
		return nil, errors.New("actuators: invalid arm config: map: required (path to a register map)")
	}
	m, err := LoadMap(cfg.Map)
	if err != nil {
		return nil, err
	}
	if cfg.withDefaults().Transport == TransportRTU {
		return NewRTU(m, cfg, opts)
	}
	return NewTCP(m, cfg, opts)
}

type tcpConn struct {
	modbus.Client
	h *modbus.TCPClientHandler
}

func (c *tcpConn) SetUnit(id byte)            { c.h.SlaveId = id }
func (c *tcpConn) SetTimeout(d time.Duration) { c.h.Timeout = d }
func (c *tcpConn) Close() error               { return c.h.Close() }

// Map returns the arm's register map.
func (a *ModbusArm) Map() *Map { return a.m }

// Requests reports how many Modbus requests Command, State and Halt take
// with this map (the batching the map allows).
func (a *ModbusArm) Requests() (command, state, halt int) {
	return a.cmd.requests(), a.read.requests(), a.halt.requests()
}

// Health returns a snapshot of the link.
func (a *ModbusArm) Health() Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.health
}

// Connect opens the connection now (ignoring the backoff) and reports
// whether the controller is reachable. Requests connect by themselves.
func (a *ModbusArm) Connect(ctx context.Context) error {
	a.lock()
	defer a.unlock()
	if a.closed {
		return ErrClosed
	}
	return a.connectLocked(ctx, true)
}

// Close closes the connection; later calls return ErrClosed. Idempotent.
func (a *ModbusArm) Close() error {
	a.lock()
	defer a.unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.conn != nil {
		err := a.conn.Close()
		a.conn = nil
		a.setState(StateDisconnected, ErrClosed)
		return err
	}
	return nil
}

func (a *ModbusArm) lock() { a.mu.Lock() }

// unlock releases the lock and then delivers queued events.
func (a *ModbusArm) unlock() {
	ev := a.pending
	a.pending = nil
	a.mu.Unlock()
	if a.on != nil {
		for _, e := range ev {
			a.on(e)
		}
	}
}

func (a *ModbusArm) setState(s ConnState, err error) {
	now := a.clock.Now()
	changed := a.health.State != s
	a.health.State = s
	a.health.LastErr = err
	if changed {
		a.health.Since = now
	}
	if changed || err != nil {
		a.pending = append(a.pending, Event{Time: now, State: s, Err: err})
	}
}

func (a *ModbusArm) connectLocked(ctx context.Context, force bool) error {
	if a.conn != nil {
		return nil
	}
	now := a.clock.Now()
	if !force && now.Before(a.health.NextDial) {
		return fmt.Errorf("%w: reconnect in %v (last error: %v)", ErrDisconnected, a.health.NextDial.Sub(now).Round(time.Millisecond), a.health.LastErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := a.dial(ctx, a.cfg.ConnectTimeout)
	if err != nil {
		a.bumpBackoff()
		a.setState(StateDisconnected, err)
		a.log.Warn("arm connect failed", "err", err, "retry_in", a.backoff)
		return fmt.Errorf("%w: connect: %w", ErrDisconnected, err)
	}
	a.conn = c
	a.health.Connects++
	a.setState(StateConnected, nil)
	a.log.Info("arm connected")
	return nil
}

func (a *ModbusArm) bumpBackoff() {
	switch {
	case a.backoff == 0:
		a.backoff = a.cfg.BackoffMin
	default:
		a.backoff = min(2*a.backoff, a.cfg.BackoffMax)
	}
	a.health.NextDial = a.clock.Now().Add(a.backoff)
}

// dropLocked closes the connection after a transport error.
func (a *ModbusArm) dropLocked(err error) {
	if a.conn != nil {
		_ = a.conn.Close()
		a.conn = nil
		a.health.Losses++
	}
	a.bumpBackoff()
	a.setState(StateDisconnected, err)
	a.log.Warn("arm connection lost", "err", err)
}

// do runs one request. force lets Halt reconnect regardless of backoff.
func (a *ModbusArm) do(ctx context.Context, force bool, sp *span, req func(Conn) ([]byte, error)) ([]byte, error) {
	if a.closed {
		return nil, ErrClosed
	}
	if err := a.connectLocked(ctx, force); err != nil {
		return nil, err
	}
	timeout := a.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(a.clock.Now())
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		timeout = min(timeout, left)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.conn.SetUnit(sp.unit)
	a.conn.SetTimeout(timeout)
	a.health.Requests++
	res, err := req(a.conn)
	if err == nil {
		a.backoff = 0
		return res, nil
	}
	var me *modbus.ModbusError
	if errors.As(err, &me) {
		a.health.Exceptions++
		return nil, &ExceptionError{Function: me.FunctionCode &^ 0x80, Exception: me.ExceptionCode}
	}
	a.health.Failures++
	a.dropLocked(err)
	return nil, fmt.Errorf("%w: %s %d+%d on unit %d: %w", ErrDisconnected, sp.fn, sp.addr, sp.qty, sp.unit, err)
}

func (a *ModbusArm) write(ctx context.Context, force bool, sp *span) error {
	data := sp.packWire()
	_, err := a.do(ctx, force, sp, func(c Conn) ([]byte, error) {
		switch {
		case sp.fn == Coil && sp.qty == 1:
			v := uint16(0)
			if sp.regs[0] != 0 {
				v = 0xFF00
			}
			return c.WriteSingleCoil(uint16(sp.addr), v)
		case sp.fn == Coil:
			return c.WriteMultipleCoils(uint16(sp.addr), uint16(sp.qty), data)
		default:
			return c.WriteMultipleRegisters(uint16(sp.addr), uint16(sp.qty), data)
		}
	})
	return err
}

func (a *ModbusArm) readSpan(ctx context.Context, force bool, sp *span) error {
	res, err := a.do(ctx, force, sp, func(c Conn) ([]byte, error) {
		addr, qty := uint16(sp.addr), uint16(sp.qty)
		switch sp.fn {
		case Holding:
			return c.ReadHoldingRegisters(addr, qty)
		case Input:
			return c.ReadInputRegisters(addr, qty)
		case Coil:
			return c.ReadCoils(addr, qty)
		default:
			return c.ReadDiscreteInputs(addr, qty)
		}
	})
	if err != nil {
		return err
	}
	if !sp.unpack(res) {
		// A malformed reply means the stream is out of step: start over.
		err := fmt.Errorf("reply of %d bytes to %s %d+%d", len(res), sp.fn, sp.addr, sp.qty)
		a.health.Failures++
		a.dropLocked(err)
		return fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	return nil
}

func (a *ModbusArm) nextHeartbeat() float64 {
	a.heartbeat++
	hb := a.m.Signals.Heartbeat
	switch hb.Type {
	case Int16:
		return float64(int16(uint16(a.heartbeat)))
	case Uint16:
		return float64(uint16(a.heartbeat))
	case Int32:
		return float64(int32(a.heartbeat))
	}
	return float64(a.heartbeat)
}

// Command writes velocity, gripper and a fresh heartbeat, in as few
// requests as the map allows (heartbeat last). Nothing is written when a
// value does not fit (ErrOutOfRange, ErrBadCommand). A failed write is
// returned, not retried: the next tick writes a fresh command.
func (a *ModbusArm) Command(ctx context.Context, c Command) error {
	if len(c.Velocity) != a.m.Axes() {
		return fmt.Errorf("%w: %d velocities, the map has %d axes", ErrBadCommand, len(c.Velocity), a.m.Axes())
	}
	a.lock()
	defer a.unlock()
	for i, v := range c.Velocity {
		if err := a.cmdVel.set(i, v); err != nil {
			return err
		}
	}
	if a.cmdGrip.mapped() {
		if err := a.cmdGrip.set(0, c.Gripper); err != nil {
			return err
		}
	}
	if err := a.cmdHB.set(0, a.nextHeartbeat()); err != nil {
		return err
	}
	for i := range a.cmd.spans {
		if err := a.write(ctx, false, &a.cmd.spans[i]); err != nil {
			return err
		}
	}
	if a.cmdGrip.mapped() {
		a.lastGripper, a.gripperKnown = c.Gripper, true
	}
	return nil
}

// State reads the arm's state into s in as few requests as the map allows,
// reusing s's slices.
func (a *ModbusArm) State(ctx context.Context, s *State) error {
	a.lock()
	defer a.unlock()
	return a.stateLocked(ctx, false, s)
}

func (a *ModbusArm) stateLocked(ctx context.Context, force bool, s *State) error {
	for i := range a.read.spans {
		if err := a.readSpan(ctx, force, &a.read.spans[i]); err != nil {
			return err
		}
	}
	s.Time = a.clock.Now()
	s.Position = fill(s.Position, a.rdPos)
	s.Velocity = fill(s.Velocity, a.rdVel)
	s.Observation = fill(s.Observation, a.rdObs)
	s.Gripper = 0
	if a.rdGrip.mapped() {
		s.Gripper = a.rdGrip.get(0)
	}
	s.Status = uint16(int64(a.rdStatus.get(0)))
	s.Fault = uint16(int64(a.rdFault.get(0)))
	s.EStop = a.rdEStop.mapped() && a.rdEStop.bool()
	s.Enabled = a.rdEnabled.bool()
	return nil
}

func fill(dst []float64, sl slot) []float64 {
	if !sl.mapped() {
		return dst[:0]
	}
	n := sl.sig.Count
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = sl.get(i)
	}
	return dst
}

// Halt stops motion: enable dropped, zero velocity, gripper hold and a fresh
// heartbeat, in the fewest requests the map allows (one when they are
// adjacent holding registers). It ignores ctx's cancellation and the
// reconnect backoff, tries every request even when one fails, and returns
// all failures joined. Safe to call at any time, repeatedly.
func (a *ModbusArm) Halt(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	a.lock()
	defer a.unlock()
	if a.closed {
		return ErrClosed
	}
	return a.haltLocked(ctx)
}

func (a *ModbusArm) haltLocked(ctx context.Context) error {
	// One dial attempt per Halt, ignoring the backoff.
	dialed := false
	force := func() bool { f := !dialed; dialed = true; return f }
	p, vel, grip, hb, en := a.halt, a.haltVel, a.haltGrip, a.haltHB, a.haltEnable
	if grip.mapped() && !a.gripperKnown {
		// "last" before any command: learn the gripper's current command.
		if err := a.readSpan(ctx, force(), &a.gripRead.spans[0]); err == nil {
			a.lastGripper, a.gripperKnown = a.gripReadSlot.get(0), true
		} else {
			p, vel, grip, hb, en = a.haltNoGrip, a.hngVel, slot{}, a.hngHB, a.hngEnable
		}
	}
	for i := 0; i < a.m.Axes(); i++ {
		_ = vel.set(i, 0) // Validate guarantees zero fits
	}
	if grip.mapped() {
		if err := grip.set(0, a.lastGripper); err != nil {
			return err
		}
	}
	_ = hb.set(0, a.nextHeartbeat())
	a.setEnable(en, false)
	var errs []error
	for i := range p.spans {
		if err := a.write(ctx, force(), &p.spans[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("actuators: halt: %w", errors.Join(errs...))
	}
	return nil
}

func (a *ModbusArm) setEnable(sl slot, on bool) {
	if sl.sig.Function.isBit() {
		sl.setBool(on)
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	_ = sl.set(0, v)
}

// Enable permits motion. It first writes the halt block (zero velocity,
// gripper hold, fresh heartbeat, enable 0), then reads the state and refuses
// with ErrEStop or ErrFault, then writes enable=1 and reads back that the
// controller reports motion permitted (ErrNotEnabled otherwise).
func (a *ModbusArm) Enable(ctx context.Context) error {
	a.lock()
	defer a.unlock()
	if a.closed {
		return ErrClosed
	}
	if err := a.haltLocked(ctx); err != nil {
		return fmt.Errorf("actuators: enable: %w", err)
	}
	s := &a.scratch
	if err := a.stateLocked(ctx, false, s); err != nil {
		return fmt.Errorf("actuators: enable: %w", err)
	}
	if s.EStop {
		return fmt.Errorf("actuators: enable refused: %w", ErrEStop)
	}
	if s.Fault != 0 {
		return fmt.Errorf("actuators: enable refused: %w: fault word 0x%04x", ErrFault, s.Fault)
	}
	a.setEnable(a.enEnable, true)
	if err := a.write(ctx, false, &a.enable.spans[0]); err != nil {
		return fmt.Errorf("actuators: enable: %w", err)
	}
	if err := a.stateLocked(ctx, false, s); err != nil {
		return fmt.Errorf("actuators: enable: %w", err)
	}
	if !s.Enabled {
		return fmt.Errorf("actuators: enable: %w (status 0x%04x, fault 0x%04x)", ErrNotEnabled, s.Status, s.Fault)
	}
	return nil
}
