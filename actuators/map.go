package actuators

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// MapFormat is the register-map format version this package reads.
const MapFormat = 1

// Function is the Modbus table a signal lives in.
type Function string

// The four Modbus tables.
const (
	Holding  Function = "holding"  // holding registers: read/write 16-bit words
	Input    Function = "input"    // input registers: read-only 16-bit words
	Coil     Function = "coil"     // coils: read/write bits
	Discrete Function = "discrete" // discrete inputs: read-only bits
)

func (f Function) isBit() bool      { return f == Coil || f == Discrete }
func (f Function) isWritable() bool { return f == Holding || f == Coil }
func (f Function) valid() bool      { return f == Holding || f == Input || f == Coil || f == Discrete }

// Type is how a signal's value is stored in its registers.
type Type string

// Register types. Bool (alias "bit") is the only type of coils and discrete inputs.
const (
	Int16   Type = "int16"
	Uint16  Type = "uint16"
	Int32   Type = "int32"
	Uint32  Type = "uint32"
	Float32 Type = "float32"
	Bool    Type = "bool"
)

// Words is the number of 16-bit registers one value of the type takes (0 for Bool).
func (t Type) Words() int {
	switch t {
	case Int16, Uint16:
		return 1
	case Int32, Uint32, Float32:
		return 2
	}
	return 0
}

// rawRange is the range of raw values the type can hold.
func (t Type) rawRange() (lo, hi float64) {
	switch t {
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Uint16:
		return 0, math.MaxUint16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Uint32:
		return 0, math.MaxUint32
	case Float32:
		return -math.MaxFloat32, math.MaxFloat32
	case Bool:
		return 0, 1
	}
	return 0, 0
}

// WordOrder is the order of the two registers of a 32-bit value.
type WordOrder string

// Word orders. Bytes inside a register are always big-endian (Modbus).
const (
	HighFirst WordOrder = "high_first" // AB CD: the register at the lower address holds the high word
	LowFirst  WordOrder = "low_first"  // CD AB
)

// Signal names, as written under `signals:` in a map.
const (
	SigVelocityCommand = "velocity_command"
	SigGripperCommand  = "gripper_command"
	SigEnable          = "enable"
	SigHeartbeat       = "heartbeat"
	SigPosition        = "position"
	SigVelocity        = "velocity"
	SigGripperState    = "gripper_state"
	SigStatus          = "status"
	SigFault           = "fault"
	SigEStop           = "estop"
	SigEnabledState    = "enabled_state"
	SigObservation     = "observation"
)

// Fault word bits every controller following the register-map contract uses.
const (
	FaultHeartbeat  uint16 = 0x0001 // heartbeat lapsed: controller stopped the arm itself
	FaultJointLimit uint16 = 0x0002 // a joint reached its limit
	FaultEStop      uint16 = 0x0004 // hardware e-stop asserted
	FaultInternal   uint16 = 0x0008 // controller internal fault
)

// Signal is where one signal lives in the controller and how its value is
// coded: engineering value = raw × Scale + Offset.
type Signal struct {
	Function  Function  `yaml:"function"`
	Address   int       `yaml:"address"`
	Type      Type      `yaml:"type,omitempty"`       // default uint16 (registers) or bool (bits)
	Count     int       `yaml:"count,omitempty"`      // values at consecutive addresses, default 1
	Scale     *float64  `yaml:"scale,omitempty"`      // default 1; never 0
	Offset    float64   `yaml:"offset,omitempty"`     // default 0
	Unit      string    `yaml:"unit,omitempty"`       // documentation only (rad, rad/s, ...)
	Min       *float64  `yaml:"min,omitempty"`        // engineering limits (optional)
	Max       *float64  `yaml:"max,omitempty"`        //
	WordOrder WordOrder `yaml:"word_order,omitempty"` // per-signal override of the map's word order
	UnitID    *int      `yaml:"unit_id,omitempty"`    // per-signal override of the map's unit id
	Bit       *int      `yaml:"bit,omitempty"`        // boolean signals kept in one bit (0-15) of a 16-bit register

	name string
	unit byte
}

// Name is the signal's key in the map.
func (s *Signal) Name() string { return s.name }

// Slave returns the Modbus unit id the signal is addressed with (its own
// unit_id, else the map's).
func (s *Signal) Slave() byte { return s.unit }

// Width is the number of registers (or bits) one value takes.
func (s *Signal) Width() int {
	if s.Function.isBit() {
		return 1
	}
	return s.Type.Words()
}

// Span is the number of registers (or bits) the whole signal takes.
func (s *Signal) Span() int { return s.Width() * s.Count }

func (s *Signal) scale() float64 {
	if s.Scale == nil {
		return 1
	}
	return *s.Scale
}

// Decode returns value i of the signal from its registers regs
// (regs[0] is the register at s.Address). Bit-in-register signals decode to 0 or 1.
func (s *Signal) Decode(regs []uint16, i int) float64 {
	w := s.Type.Words()
	r := regs[i*w:]
	var raw float64
	switch s.Type {
	case Int16:
		raw = float64(int16(r[0]))
	case Uint16:
		raw = float64(r[0])
		if s.Bit != nil {
			raw = float64(r[0] >> uint(*s.Bit) & 1)
		}
	case Int32:
		raw = float64(int32(s.join(r)))
	case Uint32:
		raw = float64(s.join(r))
	case Float32:
		raw = float64(math.Float32frombits(s.join(r)))
	}
	return raw*s.scale() + s.Offset
}

// Encode writes value i of the signal into regs (regs[0] is the register at
// s.Address). It refuses NaN, infinities, values outside [Min, Max] and raw
// values the type cannot hold, leaving regs untouched.
func (s *Signal) Encode(regs []uint16, i int, v float64) error {
	raw, err := s.raw(v)
	if err != nil {
		return err
	}
	w := s.Type.Words()
	r := regs[i*w:]
	switch s.Type {
	case Int16:
		r[0] = uint16(int16(raw))
	case Uint16:
		r[0] = uint16(raw)
	case Int32:
		s.split(r, uint32(int32(raw)))
	case Uint32:
		s.split(r, uint32(raw))
	case Float32:
		s.split(r, math.Float32bits(float32(raw)))
	}
	return nil
}

// raw converts an engineering value to the raw value (rounded for integer types).
func (s *Signal) raw(v float64) (float64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %s = %v", ErrOutOfRange, s.name, v)
	}
	if (s.Min != nil && v < *s.Min) || (s.Max != nil && v > *s.Max) {
		return 0, fmt.Errorf("%w: %s = %g outside [%s, %s]", ErrOutOfRange, s.name, v, fmtLimit(s.Min, "-inf"), fmtLimit(s.Max, "+inf"))
	}
	raw := (v - s.Offset) / s.scale()
	if s.Type != Float32 {
		raw = math.Round(raw)
	}
	lo, hi := s.Type.rawRange()
	if raw < lo || raw > hi {
		return 0, fmt.Errorf("%w: %s = %g is raw %g, outside %s [%g, %g]", ErrOutOfRange, s.name, v, raw, s.Type, lo, hi)
	}
	return raw, nil
}

func fmtLimit(p *float64, none string) string {
	if p == nil {
		return none
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func (s *Signal) join(r []uint16) uint32 {
	if s.WordOrder == LowFirst {
		return uint32(r[1])<<16 | uint32(r[0])
	}
	return uint32(r[0])<<16 | uint32(r[1])
}

func (s *Signal) split(r []uint16, v uint32) {
	if s.WordOrder == LowFirst {
		r[0], r[1] = uint16(v), uint16(v>>16)
		return
	}
	r[0], r[1] = uint16(v>>16), uint16(v)
}

// Signals lists every signal a map may name. Nil means not mapped.
type Signals struct {
	VelocityCommand *Signal `yaml:"velocity_command"`        // required, writable; Count = number of axes
	GripperCommand  *Signal `yaml:"gripper_command"`         // optional, writable
	Enable          *Signal `yaml:"enable"`                  // required, writable: 1 = motion permitted
	Heartbeat       *Signal `yaml:"heartbeat"`               // required, writable integer register
	Position        *Signal `yaml:"position,omitempty"`      // optional, Count = axes
	Velocity        *Signal `yaml:"velocity,omitempty"`      // optional, Count = axes
	GripperState    *Signal `yaml:"gripper_state,omitempty"` // optional
	Status          *Signal `yaml:"status"`                  // required, 16-bit
	Fault           *Signal `yaml:"fault"`                   // required, 16-bit; non-zero = fault
	EStop           *Signal `yaml:"estop,omitempty"`         // optional bit: 1 = e-stop asserted
	EnabledState    *Signal `yaml:"enabled_state,omitempty"` // optional read-only mirror of enable (saves a read)
	Observation     *Signal `yaml:"observation,omitempty"`   // optional extra observation vector
}

// all returns every signal slot with its name, in a fixed order.
func (ss *Signals) all() []struct {
	name string
	sig  **Signal
} {
	return []struct {
		name string
		sig  **Signal
	}{
		{SigVelocityCommand, &ss.VelocityCommand}, {SigGripperCommand, &ss.GripperCommand},
		{SigEnable, &ss.Enable}, {SigHeartbeat, &ss.Heartbeat},
		{SigPosition, &ss.Position}, {SigVelocity, &ss.Velocity}, {SigGripperState, &ss.GripperState},
		{SigStatus, &ss.Status}, {SigFault, &ss.Fault}, {SigEStop, &ss.EStop},
		{SigEnabledState, &ss.EnabledState}, {SigObservation, &ss.Observation},
	}
}

// Map is a register map (docs/register-map.md). Build it with ParseMap or
// LoadMap, or fill it in Go and call Validate, which fills the defaults.
// A validated Map is read-only: share it freely.
type Map struct {
	Format           int           `yaml:"format"`
	UnitID           int           `yaml:"unit_id"`
	WordOrder        WordOrder     `yaml:"word_order"`
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`
	// GripperHold is what Halt writes to the gripper: "last" (the last
	// commanded value, the default) or a number in engineering units.
	GripperHold string `yaml:"gripper_hold,omitempty"`
	// MaxReadGap is how many unmapped registers a batched read may span to
	// join two signals into one request (default 16; 0 = only adjacent ones).
	// Set 0 for controllers that answer "illegal data address" on holes.
	MaxReadGap *int    `yaml:"max_read_gap,omitempty"`
	Signals    Signals `yaml:"signals"`
	// Extra is ignored by the Go code: room for other tools' settings.
	Extra map[string]any `yaml:"extra,omitempty"`

	gripperHold    float64
	gripperHoldSet bool
	valid          bool // Validate succeeded: the map is frozen
}

// Axes is the number of axes commanded (velocity_command's count).
func (m *Map) Axes() int {
	if m.Signals.VelocityCommand == nil {
		return 0
	}
	return m.Signals.VelocityCommand.Count
}

// Signal returns the named signal, or nil when it is not mapped.
func (m *Map) Signal(name string) *Signal {
	for _, e := range m.Signals.all() {
		if e.name == name {
			return *e.sig
		}
	}
	return nil
}

// Mapped returns the mapped signals in a fixed order.
func (m *Map) Mapped() []*Signal {
	var out []*Signal
	for _, e := range m.Signals.all() {
		if *e.sig != nil {
			out = append(out, *e.sig)
		}
	}
	return out
}

// GripperHoldValue reports the fixed gripper value Halt writes, or ok=false
// for "last".
func (m *Map) GripperHoldValue() (v float64, ok bool) { return m.gripperHold, m.gripperHoldSet }

// LoadMap reads and validates a register map file.
func LoadMap(path string) (*Map, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("actuators: register map: %w", err)
	}
	m, err := ParseMap(b)
	if err != nil {
		return nil, fmt.Errorf("actuators: register map %s: %w", path, err)
	}
	return m, nil
}

// ParseMap decodes and validates a register map. Unknown keys are errors
// (they are usually typos); put other tools' settings under `extra:`.
func ParseMap(b []byte) (*Map, error) {
	var m Map
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("actuators: register map: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate fills defaults and checks the map, reporting every problem at
// once. Once it has succeeded the map must not change; later calls return
// nil without touching it, so a validated map may be shared by goroutines.
func (m *Map) Validate() error {
	if m.valid {
		return nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if m.Format != MapFormat {
		bad("format: %d, want %d", m.Format, MapFormat)
	}
	if m.UnitID < 0 || m.UnitID > 255 {
		bad("unit_id: %d outside 0..255", m.UnitID)
	}
	switch m.WordOrder {
	case "":
		m.WordOrder = HighFirst
	case HighFirst, LowFirst:
	default:
		bad("word_order: %q, want high_first or low_first", m.WordOrder)
	}
	if m.HeartbeatTimeout <= 0 {
		bad("heartbeat_timeout: %v, want a positive duration such as 500ms", m.HeartbeatTimeout)
	}
	if m.MaxReadGap != nil && (*m.MaxReadGap < 0 || *m.MaxReadGap > 100) {
		bad("max_read_gap: %d outside 0..100", *m.MaxReadGap)
	}

	ss := &m.Signals
	for _, e := range ss.all() {
		s := *e.sig
		if s == nil {
			continue
		}
		s.name = e.name
		for _, err := range m.checkSignal(s) {
			errs = append(errs, fmt.Errorf("signals.%s: %w", e.name, err))
		}
	}
	for _, req := range []struct {
		name string
		s    *Signal
	}{{SigVelocityCommand, ss.VelocityCommand}, {SigEnable, ss.Enable}, {SigHeartbeat, ss.Heartbeat}, {SigStatus, ss.Status}, {SigFault, ss.Fault}} {
		if req.s == nil {
			bad("signals.%s: required", req.name)
		}
	}
	// Roles.
	writable := func(name string, s *Signal) {
		if s != nil && s.Function.valid() && !s.Function.isWritable() {
			bad("signals.%s: function %s is read-only; the client writes this signal (use holding or coil)", name, s.Function)
		}
	}
	writable(SigVelocityCommand, ss.VelocityCommand)
	writable(SigGripperCommand, ss.GripperCommand)
	writable(SigEnable, ss.Enable)
	writable(SigHeartbeat, ss.Heartbeat)
	if s := ss.Heartbeat; s != nil && s.Function.isBit() {
		bad("signals.heartbeat: must be a register (holding), not a %s", s.Function)
	}
	if s := ss.Heartbeat; s != nil && (s.Type == Float32 || s.scale() != 1 || s.Offset != 0 || s.Count != 1) {
		bad("signals.heartbeat: must be one integer register with scale 1 and offset 0")
	}
	for _, b := range []struct {
		name string
		s    *Signal
	}{{SigEnable, ss.Enable}, {SigEStop, ss.EStop}, {SigEnabledState, ss.EnabledState}} {
		if b.s != nil && b.s.Count != 1 {
			bad("signals.%s: count must be 1", b.name)
		}
	}
	for _, b := range []struct {
		name string
		s    *Signal
	}{{SigEnable, ss.Enable}, {SigHeartbeat, ss.Heartbeat}} {
		if b.s != nil && (b.s.Scale != nil || b.s.Offset != 0 || b.s.Min != nil || b.s.Max != nil) {
			bad("signals.%s: scale, offset, min and max are not allowed (the client writes raw 0/1 or a counter)", b.name)
		}
	}
	if s := ss.Enable; s != nil && s.Bit != nil {
		bad("signals.enable: bit is not allowed on a written signal (it would need a read-modify-write); use a whole register or a coil")
	}
	for _, w := range []struct {
		name string
		s    *Signal
	}{{SigStatus, ss.Status}, {SigFault, ss.Fault}} {
		if w.s != nil && (w.s.Function.isBit() || w.s.Type.Words() != 1 || w.s.Count != 1 || w.s.Bit != nil) {
			bad("signals.%s: must be one 16-bit register (int16 or uint16)", w.name)
		}
	}
	if ss.VelocityCommand != nil {
		n := ss.VelocityCommand.Count
		for _, a := range []struct {
			name string
			s    *Signal
		}{{SigPosition, ss.Position}, {SigVelocity, ss.Velocity}} {
			if a.s != nil && a.s.Count != n {
				bad("signals.%s: count %d, want %d like velocity_command", a.name, a.s.Count, n)
			}
		}
		if ss.VelocityCommand.Function.isBit() {
			bad("signals.velocity_command: must be registers, not a %s", ss.VelocityCommand.Function)
		}
	}
	if s := ss.VelocityCommand; s != nil && s.Function.valid() && !s.Function.isBit() && s.Type.Words() > 0 {
		if _, err := s.raw(0); err != nil {
			bad("signals.velocity_command: zero must be writable (Halt writes it): %v", err)
		}
	}
	if ss.GripperCommand != nil && ss.GripperCommand.Count != 1 {
		bad("signals.gripper_command: count must be 1")
	}
	if ss.GripperState != nil && ss.GripperState.Count != 1 {
		bad("signals.gripper_state: count must be 1")
	}
	// Gripper hold.
	m.gripperHoldSet = false
	switch m.GripperHold {
	case "", "last":
		m.GripperHold = "last"
	default:
		v, err := strconv.ParseFloat(m.GripperHold, 64)
		switch {
		case err != nil:
			bad("gripper_hold: %q, want \"last\" or a number", m.GripperHold)
		case ss.GripperCommand == nil:
			bad("gripper_hold: %q given but gripper_command is not mapped", m.GripperHold)
		default:
			if _, err := ss.GripperCommand.raw(v); err != nil {
				bad("gripper_hold: %v", err)
			}
			m.gripperHold, m.gripperHoldSet = v, true
		}
	}
	errs = append(errs, m.checkOverlaps()...)
	if len(errs) > 0 {
		return fmt.Errorf("actuators: invalid register map: %w", errors.Join(errs...))
	}
	m.valid = true
	return nil
}

func (m *Map) checkSignal(s *Signal) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !s.Function.valid() {
		bad("function: %q, want holding, input, coil or discrete", s.Function)
		return errs
	}
	if s.Count == 0 {
		s.Count = 1
	}
	if s.Count < 0 {
		bad("count: %d, want ≥ 1", s.Count)
		s.Count = 1
	}
	if s.Type == "bit" {
		s.Type = Bool // the Python bridge's spelling
	}
	if s.Type == "" {
		if s.Function.isBit() {
			s.Type = Bool
		} else {
			s.Type = Uint16
		}
	}
	switch {
	case s.Function.isBit() && s.Type != Bool:
		bad("type: %s on a %s; bits are type bool", s.Type, s.Function)
	case !s.Function.isBit() && s.Type.Words() == 0:
		bad("type: %q, want int16, uint16, int32, uint32 or float32", s.Type)
	}
	if s.WordOrder == "" {
		s.WordOrder = m.WordOrder
	} else if s.WordOrder != HighFirst && s.WordOrder != LowFirst {
		bad("word_order: %q, want high_first or low_first", s.WordOrder)
	}
	uid := m.UnitID
	if s.UnitID != nil {
		uid = *s.UnitID
	}
	if uid < 0 || uid > 255 {
		bad("unit_id: %d outside 0..255", uid)
	} else {
		s.unit = byte(uid)
	}
	if s.Address < 0 || s.Address+s.Span() > 65536 {
		bad("address: %d..%d outside 0..65535", s.Address, s.Address+s.Span()-1)
	}
	if s.Scale != nil && (*s.Scale == 0 || math.IsNaN(*s.Scale) || math.IsInf(*s.Scale, 0)) {
		bad("scale: %v, want a finite non-zero number", *s.Scale)
		s.Scale = nil
	}
	if s.Bit != nil {
		if s.Function.isBit() || s.Type != Uint16 {
			bad("bit: only on a uint16 register")
		} else if *s.Bit < 0 || *s.Bit > 15 {
			bad("bit: %d outside 0..15", *s.Bit)
		}
	}
	if s.Function.isBit() || s.Bit != nil {
		if s.Scale != nil || s.Offset != 0 {
			bad("scale/offset: not allowed on a boolean signal")
		}
	}
	if s.Min != nil && s.Max != nil && *s.Min > *s.Max {
		bad("min %g > max %g", *s.Min, *s.Max)
	}
	// Limits must be representable in the type at the given scale.
	if !s.Function.isBit() && s.Bit == nil && s.Type.Words() > 0 {
		lo, hi := s.Type.rawRange()
		for _, l := range []struct {
			key string
			v   *float64
		}{{"min", s.Min}, {"max", s.Max}} {
			if l.v == nil {
				continue
			}
			raw := (*l.v - s.Offset) / s.scale()
			if s.Type != Float32 {
				raw = math.Round(raw)
			}
			if raw < lo || raw > hi || math.IsNaN(raw) {
				bad("%s: %g is raw %g at scale %g offset %g, outside %s's range [%g, %g]", l.key, *l.v, raw, s.scale(), s.Offset, s.Type, lo, hi)
			}
		}
	}
	return errs
}

type tableKey struct {
	unit byte
	fn   Function
}

// checkOverlaps refuses two signals sharing a register or bit in the same table.
func (m *Map) checkOverlaps() []error {
	byTable := map[tableKey][]*Signal{}
	for _, s := range m.Mapped() {
		if !s.Function.valid() || s.name == "" {
			continue
		}
		k := tableKey{s.unit, s.Function}
		byTable[k] = append(byTable[k], s)
	}
	keys := make([]tableKey, 0, len(byTable))
	for k := range byTable {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].unit != keys[j].unit {
			return keys[i].unit < keys[j].unit
		}
		return keys[i].fn < keys[j].fn
	})
	var errs []error
	for _, k := range keys {
		ss := byTable[k]
		for i := 0; i < len(ss); i++ {
			for j := i + 1; j < len(ss); j++ {
				a, b := ss[i], ss[j]
				if a.Address < b.Address+b.Span() && b.Address < a.Address+a.Span() {
					// A bit of a status word may be mapped besides the word
					// itself, or besides other bits, when the client only reads them.
					if !a.written() && !b.written() && (a.Bit != nil || b.Bit != nil) && !(a.Bit != nil && b.Bit != nil && *a.Bit == *b.Bit) {
						continue
					}
					errs = append(errs, fmt.Errorf("signals.%s (%s %d..%d) overlaps signals.%s (%s %d..%d) on unit %d",
						a.name, a.Function, a.Address, a.Address+a.Span()-1, b.name, b.Function, b.Address, b.Address+b.Span()-1, k.unit))
				}
			}
		}
	}
	return errs
}

// written reports whether the client writes the signal.
func (s *Signal) written() bool {
	switch s.name {
	case SigVelocityCommand, SigGripperCommand, SigEnable, SigHeartbeat:
		return true
	}
	return false
}

func (m *Map) maxReadGap() int {
	if m.MaxReadGap == nil {
		return 16
	}
	return *m.MaxReadGap
}
