// Package simarm is a simulated arm controller that serves a register map
// over Modbus TCP (github.com/simonvetter/modbus server) and, for RTU tests,
// over any serial byte stream.
//
// # Concepts
//
// The simulator behaves like the controller the map describes: it
// integrates the commanded joint velocities (clamped to the velocity limits)
// into positions (clamped to the joint limits) while enable is set and the
// e-stop is released, stops itself and raises fault bit 0x0001 when the
// heartbeat has not changed for the map's heartbeat_timeout, and exposes
// position, velocity, gripper, status, fault, e-stop and enabled state in the
// map's registers. It uses the map's own coding (actuators.Signal Encode and
// Decode), so tests through it exercise the same validation as the client.
//
// Time comes from an injected clock; physics advances lazily to the clock's
// "now" on every request and on every call of the Go API, so tests with a
// fake clock are deterministic.
//
// Faults are injected on request: DropConnections, SetDelay (replies late,
// the write is applied on arrival), SetException (every request answers a
// Modbus exception and changes nothing), Stall (requests get no answer and
// are discarded, as by a hung controller), Kill/Restart (the server goes
// away and comes back on the same address), SetFault, SetEStop and
// SetPositionOffset (a position sensor that reads off; the physics is
// unchanged).
package simarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"sync"
	"time"

	"github.com/energyflow/edge/actuators"
	smb "github.com/simonvetter/modbus"
)

// Status word bits the simulator reports (controller-specific, documented
// in docs/actuators.md).
const (
	StatusEnabled uint16 = 0x0001 // motion permitted
	StatusMoving  uint16 = 0x0002 // some joint velocity is non-zero
	StatusEStop   uint16 = 0x0004 // e-stop asserted
	StatusFault   uint16 = 0x0008 // fault word non-zero
)

// Config configures a simulated arm. Only Map is required.
type Config struct {
	Map  *actuators.Map
	Addr string // TCP listen address; default 127.0.0.1:0
	// Clock drives the physics; nil means the system clock.
	Clock actuators.Clock
	// Joint limits per axis (engineering units). Defaults: the position
	// signal's min/max, else ±π.
	PositionMin, PositionMax []float64
	// VelocityLimit per axis (absolute); default: the velocity_command
	// signal's max(|min|, |max|), else unlimited.
	VelocityLimit []float64
	// InitialPosition per axis; default zero (clamped into the limits).
	InitialPosition []float64
	// GripperRate is how fast the gripper state follows its command, in
	// units per second; 0 means instantly.
	GripperRate float64
	// MaxCommandLog bounds the command log (default 10000 entries).
	MaxCommandLog int
	Logger        *log.Logger // simonvetter server log; nil discards
}

// CommandRecord is one command write the controller applied.
type CommandRecord struct {
	Time      time.Time
	Heartbeat uint32
	Velocity  []float64
	Gripper   float64
	Enable    bool // the enable register after the write
}

// Snapshot is the simulator's state at one instant.
type Snapshot struct {
	Time            time.Time
	Position        []float64
	Velocity        []float64
	CommandVelocity []float64
	Gripper         float64 // gripper state
	GripperCommand  float64
	Enabled         bool
	EStop           bool
	Fault           uint16
	Status          uint16
	Heartbeat       uint32
	Commands        int // command writes applied so far
	Requests        int // requests answered or discarded so far
}

type tkey struct {
	unit byte
	fn   actuators.Function
}

// Arm is a simulated arm controller. Start it with New; stop it with Close.
type Arm struct {
	cfg   Config
	m     *actuators.Map
	clock actuators.Clock
	n     int // axes

	srvMu  sync.Mutex // guards srv and addr
	srv    *smb.ModbusServer
	addr   string
	closed bool

	mu         sync.Mutex
	tables     map[tkey][]uint16
	last       time.Time
	pos, vel   []float64
	pmin, pmax []float64
	vmax       []float64
	cmdVel     []float64
	grip, gcmd float64
	enabled    bool
	estop      bool
	faultLatch uint16    // injected bits
	posOffset  []float64 // added to the position reading (SetPositionOffset); nil: none
	hbLapsed   bool
	limitHit   bool
	hb         uint32
	hbSeen     bool
	hbChanged  time.Time
	log        []CommandRecord
	commands   int
	requests   int
	delay      time.Duration
	exception  byte
	stall      chan struct{} // non-nil while stalled; closed by Unstall
	done       chan struct{} // closed by Close
}

// New starts a simulated arm serving cfg.Map over Modbus TCP.
func New(cfg Config) (*Arm, error) {
	if cfg.Map == nil {
		return nil, errors.New("simarm: Config.Map is required")
	}
	if err := cfg.Map.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Clock == nil {
		cfg.Clock = sysClock{}
	}
	if cfg.MaxCommandLog == 0 {
		cfg.MaxCommandLog = 10000
	}
	m := cfg.Map
	n := m.Axes()
	a := &Arm{cfg: cfg, m: m, clock: cfg.Clock, n: n, tables: map[tkey][]uint16{}, done: make(chan struct{})}
	a.pos, a.vel, a.cmdVel = make([]float64, n), make([]float64, n), make([]float64, n)
	a.pmin, a.pmax, a.vmax = make([]float64, n), make([]float64, n), make([]float64, n)
	ps, vc := m.Signals.Position, m.Signals.VelocityCommand
	for i := 0; i < n; i++ {
		a.pmin[i], a.pmax[i] = -math.Pi, math.Pi
		if ps != nil && ps.Min != nil {
			a.pmin[i] = *ps.Min
		}
		if ps != nil && ps.Max != nil {
			a.pmax[i] = *ps.Max
		}
		if i < len(cfg.PositionMin) {
			a.pmin[i] = cfg.PositionMin[i]
		}
		if i < len(cfg.PositionMax) {
			a.pmax[i] = cfg.PositionMax[i]
		}
		a.vmax[i] = math.Inf(1)
		if vc.Min != nil || vc.Max != nil {
			a.vmax[i] = 0
			if vc.Min != nil {
				a.vmax[i] = math.Abs(*vc.Min)
			}
			if vc.Max != nil {
				a.vmax[i] = max(a.vmax[i], math.Abs(*vc.Max))
			}
		}
		if i < len(cfg.VelocityLimit) {
			a.vmax[i] = cfg.VelocityLimit[i]
		}
		if i < len(cfg.InitialPosition) {
			a.pos[i] = cfg.InitialPosition[i]
		}
		a.pos[i] = min(max(a.pos[i], a.pmin[i]), a.pmax[i])
	}
	for _, s := range m.Mapped() {
		k := tkey{s.Slave(), s.Function}
		if a.tables[k] == nil {
			a.tables[k] = make([]uint16, 65536)
		}
	}
	a.last = a.clock.Now()
	a.hbChanged = a.last
	if gc := m.Signals.GripperCommand; gc != nil {
		// Registers start at raw 0: read what that means.
		a.gcmd = gc.Decode(a.table(gc)[gc.Address:], 0)
		a.grip = a.gcmd
	}
	a.publishLocked()

	// Resolve the address first so that Restart can come back on it.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("simarm: listen %s: %w", cfg.Addr, err)
	}
	a.addr = ln.Addr().String()
	ln.Close()
	if err := a.Restart(); err != nil {
		return nil, err
	}
	return a, nil
}

// errDiscarded marks a request swallowed by a stall. simonvetter's server
// answers it as "server device failure" (to a client that gave up long ago).
const errDiscarded = smb.Error("request discarded by a stall")

type sysClock struct{}

func (sysClock) Now() time.Time { return time.Now() }

// Addr is the TCP address the arm serves on (host:port), stable across Restart.
func (a *Arm) Addr() string {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	return a.addr
}

// Restart serves again on the same address after Kill (no-op when serving).
func (a *Arm) Restart() error {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.closed {
		return errors.New("simarm: closed")
	}
	if a.srv != nil {
		return nil
	}
	srv, err := smb.NewServer(&smb.ServerConfiguration{URL: "tcp://" + a.addr, MaxClients: 64, Timeout: 10 * time.Minute, Logger: a.logger()}, a)
	if err != nil {
		return fmt.Errorf("simarm: %w", err)
	}
	var lastErr error
	for i := 0; i < 50; i++ { // the port may linger for a moment after Kill
		if lastErr = srv.Start(); lastErr == nil {
			a.srv = srv
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("simarm: serve on %s: %w", a.addr, lastErr)
}

func (a *Arm) logger() *log.Logger {
	if a.cfg.Logger != nil {
		return a.cfg.Logger
	}
	return log.New(io.Discard, "", 0)
}

// Kill stops serving: open connections are closed and new ones refused.
// The simulated controller keeps running (its heartbeat watchdog too).
func (a *Arm) Kill() error {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.srv == nil {
		return nil
	}
	err := a.srv.Stop()
	a.srv = nil
	return err
}

// DropConnections closes every client connection; the server keeps (or
// goes back to) listening on the same address.
func (a *Arm) DropConnections() error {
	if err := a.Kill(); err != nil {
		return err
	}
	return a.Restart()
}

// Close stops the server and releases stalled requests. Idempotent.
func (a *Arm) Close() error {
	err := a.Kill()
	a.srvMu.Lock()
	first := !a.closed
	a.closed = true
	a.srvMu.Unlock()
	if first {
		a.mu.Lock()
		close(a.done)
		a.mu.Unlock()
	}
	return err
}

// SetDelay delays every reply by d (0 turns it off). Writes are applied
// when they arrive; only the answer is late.
func (a *Arm) SetDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delay = d
}

// SetException makes every request answer Modbus exception code (1, 2, 3,
// 4 or 6; 0 turns it off) and change nothing.
func (a *Arm) SetException(code byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.exception = code
}

// Stall makes the controller stop answering. Requests that arrive while
// stalled are never answered and never applied. Unstall ends it.
func (a *Arm) Stall() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stall == nil {
		a.stall = make(chan struct{})
	}
}

// Unstall ends a Stall.
func (a *Arm) Unstall() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stall != nil {
		close(a.stall)
		a.stall = nil
	}
}

// SetFault latches fault bits (e.g. actuators.FaultInternal); ClearFault clears them.
func (a *Arm) SetFault(bits uint16) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advanceLocked()
	a.faultLatch |= bits
	a.dropEnableLocked()
	a.publishLocked()
}

// ClearFault clears injected fault bits.
func (a *Arm) ClearFault(bits uint16) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.faultLatch &^= bits
	a.publishLocked()
}

// SetEStop asserts or releases the hardware e-stop input. Asserting it
// drops enable.
func (a *Arm) SetEStop(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advanceLocked()
	a.estop = on
	if on {
		a.dropEnableLocked()
	}
	a.publishLocked()
}

// SetPositionOffset makes the position sensor read off: from now on the
// position registers (and the position part of the observation vector)
// read the true position plus offset, one entry per axis (missing ones
// zero; nil: read true again). The physics, Snapshot's Position included,
// is unchanged, as with an encoder that slipped or a reading corrupted on
// its way.
func (a *Arm) SetPositionOffset(offset []float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advanceLocked()
	if offset == nil {
		a.posOffset = nil
	} else {
		a.posOffset = make([]float64, a.n)
		copy(a.posOffset, offset)
	}
	a.publishLocked()
}

// Snapshot advances the simulation to now and returns its state.
func (a *Arm) Snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advanceLocked()
	a.publishLocked()
	return Snapshot{
		Time:            a.last,
		Position:        append([]float64(nil), a.pos...),
		Velocity:        append([]float64(nil), a.vel...),
		CommandVelocity: append([]float64(nil), a.cmdVel...),
		Gripper:         a.grip,
		GripperCommand:  a.gcmd,
		Enabled:         a.enabled,
		EStop:           a.estop,
		Fault:           a.faultLocked(),
		Status:          a.statusLocked(),
		Heartbeat:       a.hb,
		Commands:        a.commands,
		Requests:        a.requests,
	}
}

// Commands returns a copy of the command log (oldest first, bounded by
// Config.MaxCommandLog).
func (a *Arm) Commands() []CommandRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]CommandRecord, len(a.log))
	copy(out, a.log)
	return out
}

// LastCommand returns the last applied command write, ok=false if none.
func (a *Arm) LastCommand() (CommandRecord, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.log) == 0 {
		return CommandRecord{}, false
	}
	return a.log[len(a.log)-1], true
}

func (a *Arm) table(s *actuators.Signal) []uint16 { return a.tables[tkey{s.Slave(), s.Function}] }

func (a *Arm) regs(s *actuators.Signal) []uint16 {
	return a.table(s)[s.Address : s.Address+s.Span()]
}

func (a *Arm) faultLocked() uint16 {
	f := a.faultLatch
	if a.hbLapsed {
		f |= actuators.FaultHeartbeat
	}
	if a.limitHit {
		f |= actuators.FaultJointLimit
	}
	if a.estop {
		f |= actuators.FaultEStop
	}
	return f
}

func (a *Arm) statusLocked() uint16 {
	var st uint16
	if a.enabled {
		st |= StatusEnabled
	}
	for _, v := range a.vel {
		if v != 0 {
			st |= StatusMoving
			break
		}
	}
	if a.estop {
		st |= StatusEStop
	}
	if a.faultLocked() != 0 {
		st |= StatusFault
	}
	return st
}

// advanceLocked integrates the physics up to the clock's now, applying the
// heartbeat watchdog at the instant it fires.
func (a *Arm) advanceLocked() {
	now := a.clock.Now()
	if a.enabled && a.m.HeartbeatTimeout > 0 {
		if deadline := a.hbChanged.Add(a.m.HeartbeatTimeout); !now.Before(deadline) {
			a.integrate(deadline)
			a.hbLapsed = true
			a.dropEnableLocked()
		}
	}
	a.integrate(now)
}

func (a *Arm) integrate(to time.Time) {
	dt := to.Sub(a.last).Seconds()
	if dt <= 0 {
		return
	}
	a.last = to
	moving := a.enabled && !a.estop
	a.limitHit = false
	for i := range a.pos {
		v := 0.0
		if moving {
			v = min(max(a.cmdVel[i], -a.vmax[i]), a.vmax[i])
		}
		p := a.pos[i] + v*dt
		if p <= a.pmin[i] && v < 0 || p >= a.pmax[i] && v > 0 {
			p = min(max(p, a.pmin[i]), a.pmax[i])
			v = 0
			a.limitHit = true
		}
		a.pos[i], a.vel[i] = p, v
	}
	if a.cfg.GripperRate <= 0 {
		a.grip = a.gcmd
	} else {
		step := a.cfg.GripperRate * dt
		a.grip += min(max(a.gcmd-a.grip, -step), step)
	}
}

// dropEnableLocked stops the arm by itself: enable register to 0, command
// velocities to 0, as a real controller's watchdog does.
func (a *Arm) dropEnableLocked() {
	a.enabled = false
	for i := range a.cmdVel {
		a.cmdVel[i] = 0
		a.vel[i] = 0
	}
	ss := &a.m.Signals
	r := a.regs(ss.VelocityCommand)
	for i := 0; i < a.n; i++ {
		_ = ss.VelocityCommand.Encode(r, i, 0)
	}
	a.writeBool(ss.Enable, false)
}

func (a *Arm) writeBool(s *actuators.Signal, on bool) {
	if s == nil {
		return
	}
	r := a.regs(s)
	switch {
	case s.Function == actuators.Coil || s.Function == actuators.Discrete:
		r[0] = b2u(on)
	case s.Bit != nil:
		if on {
			r[0] |= 1 << uint(*s.Bit)
		} else {
			r[0] &^= 1 << uint(*s.Bit)
		}
	default:
		v := 0.0
		if on {
			v = 1
		}
		_ = s.Encode(r, 0, v)
	}
}

func (a *Arm) readBool(s *actuators.Signal) bool {
	r := a.regs(s)
	if s.Function == actuators.Coil || s.Function == actuators.Discrete {
		return r[0] != 0
	}
	return s.Decode(r, 0) != 0
}

func b2u(b bool) uint16 {
	if b {
		return 1
	}
	return 0
}

// publishLocked writes the simulated state into the read-only registers.
func (a *Arm) publishLocked() {
	ss := &a.m.Signals
	set := func(s *actuators.Signal, vals ...float64) {
		if s == nil {
			return
		}
		r := a.regs(s)
		for i, v := range vals {
			if i < s.Count {
				_ = s.Encode(r, i, v)
			}
		}
	}
	pos := a.pos
	if a.posOffset != nil {
		pos = make([]float64, a.n)
		for i := range pos {
			pos[i] = a.pos[i] + a.posOffset[i]
		}
	}
	set(ss.Position, pos...)
	set(ss.Velocity, a.vel...)
	set(ss.GripperState, a.grip)
	set(ss.Status, float64(a.statusLocked()))
	set(ss.Fault, float64(a.faultLocked()))
	if ss.EStop != nil {
		a.writeBool(ss.EStop, a.estop)
	}
	if ss.EnabledState != nil {
		a.writeBool(ss.EnabledState, a.enabled)
	}
	if ss.Observation != nil {
		// The Go simulator has no extra observation: position, velocity, gripper.
		obs := make([]float64, 0, ss.Observation.Count)
		obs = append(obs, pos...)
		obs = append(obs, a.vel...)
		obs = append(obs, a.grip)
		set(ss.Observation, obs...)
	}
}

// afterWriteLocked reacts to a write to the holding registers or coils.
func (a *Arm) afterWriteLocked(k tkey, addr, qty int) {
	ss := &a.m.Signals
	touches := func(s *actuators.Signal) bool {
		return s != nil && s.Slave() == k.unit && s.Function == k.fn && addr < s.Address+s.Span() && s.Address < addr+qty
	}
	cmd := false
	if touches(ss.Heartbeat) {
		hb := uint32(int64(ss.Heartbeat.Decode(a.regs(ss.Heartbeat), 0)))
		if !a.hbSeen || hb != a.hb {
			a.hb, a.hbSeen = hb, true
			a.hbChanged = a.last
			a.hbLapsed = false
		}
		cmd = true
	}
	if touches(ss.VelocityCommand) {
		r := a.regs(ss.VelocityCommand)
		for i := 0; i < a.n; i++ {
			a.cmdVel[i] = ss.VelocityCommand.Decode(r, i)
		}
		cmd = true
	}
	if touches(ss.GripperCommand) {
		a.gcmd = ss.GripperCommand.Decode(a.regs(ss.GripperCommand), 0)
		cmd = true
	}
	if touches(ss.Enable) {
		want := a.readBool(ss.Enable)
		switch {
		case want && !a.enabled && (a.faultLocked() != 0 || a.estop):
			a.writeBool(ss.Enable, false) // refused: read-back shows 0
		case want && !a.enabled:
			a.enabled = true
			a.hbChanged = a.last // the watchdog starts now
		case !want && a.enabled:
			a.dropEnableLocked()
		}
	}
	if !a.enabled {
		for i := range a.cmdVel {
			a.cmdVel[i] = 0
		}
	}
	if cmd {
		a.commands++
		rec := CommandRecord{Time: a.last, Heartbeat: a.hb, Velocity: make([]float64, a.n), Gripper: a.gcmd, Enable: a.readBool(ss.Enable)}
		r := a.regs(ss.VelocityCommand)
		for i := range rec.Velocity {
			rec.Velocity[i] = ss.VelocityCommand.Decode(r, i)
		}
		if len(a.log) >= a.cfg.MaxCommandLog {
			a.log = append(a.log[:0], a.log[1:]...)
		}
		a.log = append(a.log, rec)
	}
}

// serve is the common path of every request: fault injection, physics,
// then op under the lock; then the reply delay.
func (a *Arm) serve(unit byte, fn actuators.Function, op func(t []uint16) error) error {
	a.mu.Lock()
	a.requests++
	if st := a.stall; st != nil {
		a.mu.Unlock()
		select {
		case <-st:
		case <-a.done:
		}
		return errDiscarded // nothing applied; TCP answers "device failure" to a client that gave up, RTU answers nothing
	}
	if a.exception != 0 {
		code := a.exception
		a.mu.Unlock()
		return exceptionErr(code)
	}
	t := a.tables[tkey{unit, fn}]
	if t == nil {
		a.mu.Unlock()
		if a.hasUnit(unit) {
			return smb.ErrIllegalDataAddress
		}
		return smb.ErrGWTargetFailedToRespond
	}
	a.advanceLocked()
	a.publishLocked()
	err := op(t)
	a.publishLocked()
	delay := a.delay
	a.mu.Unlock()
	if delay > 0 {
		tm := time.NewTimer(delay)
		select {
		case <-tm.C:
		case <-a.done:
			tm.Stop()
		}
	}
	return err
}

func (a *Arm) hasUnit(u byte) bool {
	for k := range a.tables {
		if k.unit == u {
			return true
		}
	}
	return false
}

func exceptionErr(code byte) error {
	switch code {
	case 1:
		return smb.ErrIllegalFunction
	case 2:
		return smb.ErrIllegalDataAddress
	case 3:
		return smb.ErrIllegalDataValue
	case 6:
		return smb.ErrServerDeviceBusy
	}
	return smb.ErrServerDeviceFailure
}

func checkRange(addr, qty uint16) error {
	if int(addr)+int(qty) > 65536 {
		return smb.ErrIllegalDataAddress
	}
	return nil
}

// HandleCoils implements smb.RequestHandler.
func (a *Arm) HandleCoils(req *smb.CoilsRequest) (res []bool, err error) {
	if err := checkRange(req.Addr, req.Quantity); err != nil {
		return nil, err
	}
	err = a.serve(req.UnitId, actuators.Coil, func(t []uint16) error {
		if req.IsWrite {
			for i, b := range req.Args {
				t[int(req.Addr)+i] = b2u(b)
			}
			a.afterWriteLocked(tkey{req.UnitId, actuators.Coil}, int(req.Addr), int(req.Quantity))
			return nil
		}
		res = make([]bool, req.Quantity)
		for i := range res {
			res[i] = t[int(req.Addr)+i] != 0
		}
		return nil
	})
	return res, err
}

// HandleDiscreteInputs implements smb.RequestHandler.
func (a *Arm) HandleDiscreteInputs(req *smb.DiscreteInputsRequest) (res []bool, err error) {
	if err := checkRange(req.Addr, req.Quantity); err != nil {
		return nil, err
	}
	err = a.serve(req.UnitId, actuators.Discrete, func(t []uint16) error {
		res = make([]bool, req.Quantity)
		for i := range res {
			res[i] = t[int(req.Addr)+i] != 0
		}
		return nil
	})
	return res, err
}

// HandleHoldingRegisters implements smb.RequestHandler.
func (a *Arm) HandleHoldingRegisters(req *smb.HoldingRegistersRequest) (res []uint16, err error) {
	if err := checkRange(req.Addr, req.Quantity); err != nil {
		return nil, err
	}
	err = a.serve(req.UnitId, actuators.Holding, func(t []uint16) error {
		if req.IsWrite {
			copy(t[req.Addr:], req.Args)
			a.afterWriteLocked(tkey{req.UnitId, actuators.Holding}, int(req.Addr), int(req.Quantity))
			return nil
		}
		res = append([]uint16(nil), t[req.Addr:int(req.Addr)+int(req.Quantity)]...)
		return nil
	})
	return res, err
}

// HandleInputRegisters implements smb.RequestHandler.
func (a *Arm) HandleInputRegisters(req *smb.InputRegistersRequest) (res []uint16, err error) {
	if err := checkRange(req.Addr, req.Quantity); err != nil {
		return nil, err
	}
	err = a.serve(req.UnitId, actuators.Input, func(t []uint16) error {
		res = append([]uint16(nil), t[req.Addr:int(req.Addr)+int(req.Quantity)]...)
		return nil
	})
	return res, err
}

var _ smb.RequestHandler = (*Arm)(nil)

// Wait blocks until ctx ends or the arm is closed (for a robot-free loop
// run as a process).
func (a *Arm) Wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-a.done:
	}
}
