package actuators

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestExampleMapsLoad(t *testing.T) {
	for _, tc := range []struct {
		file                string
		cmd, state, halt    int
		axes                int
		gripperHoldFixedSet bool
	}{
		{"simarm.yaml", 1, 1, 1, 7, false},
		{"generic.yaml", 1, 2, 2, 7, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := LoadMap(filepath.Join("..", "examples", "maps", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Axes() != tc.axes {
				t.Errorf("axes %d, want %d", m.Axes(), tc.axes)
			}
			a, err := NewModbusArm(m, Config{}, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c, s, h := a.Requests()
			if c != tc.cmd || s != tc.state || h != tc.halt {
				t.Errorf("requests command/state/halt = %d/%d/%d, want %d/%d/%d", c, s, h, tc.cmd, tc.state, tc.halt)
			}
			if _, ok := m.GripperHoldValue(); ok != tc.gripperHoldFixedSet {
				t.Errorf("gripper hold fixed = %v", ok)
			}
		})
	}
}

// The YAML example in docs/register-map.md is the contract other parts
// (the Meta-World bridge) copy: it must parse.
func TestRegisterMapDocExampleParses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "register-map.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(b, -1)
	if len(blocks) == 0 {
		t.Fatal("no yaml block in docs/register-map.md")
	}
	if _, err := ParseMap(blocks[0][1]); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	const bad = `
format: 1
unit_id: 1
word_order: middle_first
heartbeat_timeout: 0s
gripper_hold: tight
signals:
  velocity_command: {function: input, address: 0, type: int16, count: 7, scale: 0.001, min: -40, max: 40}
  gripper_command:  {function: holding, address: 200, type: float32, scale: 0}
  enable:           {function: holding, address: 3}
  position:         {function: input, address: 10, type: float32, count: 6}
  status:           {function: input, address: 40, type: int32}
  fault:            {function: input, address: 41, type: uint16}
  estop:            {function: discrete, address: 0, type: uint16}
`
	_, err := ParseMap([]byte(bad))
	if err == nil {
		t.Fatal("bad map accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`word_order: "middle_first"`,
		"heartbeat_timeout",
		"gripper_hold",
		"signals.heartbeat: required",
		"signals.velocity_command: function input is read-only",
		"min: -40 is raw -40000 at scale 0.001",
		"max: 40 is raw 40000",
		"signals.gripper_command: scale: 0",
		"signals.position: count 6, want 7",
		"signals.status: must be one 16-bit register",
		"signals.estop: type: uint16 on a discrete",
		"signals.status (input 40..41) overlaps signals.fault (input 41..41) on unit 1",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestOverlapReported(t *testing.T) {
	const m = `
format: 1
heartbeat_timeout: 500ms
signals:
  velocity_command: {function: holding, address: 0, type: float32, count: 7}
  heartbeat:        {function: holding, address: 13}
  enable:           {function: holding, address: 14}
  status:           {function: input, address: 0}
  fault:            {function: input, address: 1}
  estop:            {function: input, address: 1, bit: 3}
  enabled_state:    {function: input, address: 0, bit: 0}
`
	_, err := ParseMap([]byte(m))
	if err == nil || !strings.Contains(err.Error(), "signals.velocity_command (holding 0..13) overlaps signals.heartbeat (holding 13..13) on unit 0") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "estop") || strings.Contains(err.Error(), "enabled_state") {
		t.Errorf("status bits must be allowed to share a read-only word: %v", err)
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	const m = `
format: 1
heartbeat_timeout: 500ms
signals:
  velocity_command: {function: holding, address: 0, type: float32, count: 7, sacle: 2}
`
	_, err := ParseMap([]byte(m))
	if err == nil || !strings.Contains(err.Error(), "sacle") {
		t.Fatalf("got %v", err)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	sc := func(f float64) *float64 { return &f }
	for _, s := range []*Signal{
		{Type: Int16, Scale: sc(0.001), Offset: 0.5},
		{Type: Uint16, Scale: sc(0.01)},
		{Type: Int32, Scale: sc(1e-6), WordOrder: LowFirst},
		{Type: Int32, Scale: sc(1e-6), WordOrder: HighFirst},
		{Type: Uint32},
		{Type: Float32, WordOrder: LowFirst},
		{Type: Float32, WordOrder: HighFirst},
	} {
		s.Count, s.name = 2, "x"
		regs := make([]uint16, s.Span())
		for _, v := range []float64{0, 1.25, -1.5, 7} {
			if (s.Type == Uint16 || s.Type == Uint32) && v < 0 {
				continue
			}
			if err := s.Encode(regs, 1, v); err != nil {
				t.Fatalf("%s %s: %v", s.Type, s.WordOrder, err)
			}
			got := s.Decode(regs, 1)
			if math.Abs(got-v) > s.scale()/2+1e-9 {
				t.Errorf("%s %s: %v -> %v", s.Type, s.WordOrder, v, got)
			}
		}
	}
	// Word order on the wire: 1.0f = 0x3f800000.
	hi := &Signal{Type: Float32, WordOrder: HighFirst, Count: 1}
	lo := &Signal{Type: Float32, WordOrder: LowFirst, Count: 1}
	r := make([]uint16, 2)
	_ = hi.Encode(r, 0, 1)
	if r[0] != 0x3f80 || r[1] != 0 {
		t.Errorf("high_first: %04x", r)
	}
	_ = lo.Encode(r, 0, 1)
	if r[0] != 0 || r[1] != 0x3f80 {
		t.Errorf("low_first: %04x", r)
	}
}

func TestEncodeRefuses(t *testing.T) {
	mx, sc := 1.5, 0.001
	s := &Signal{Type: Int16, Scale: &sc, Count: 1, name: "v"}
	r := []uint16{0x1234}
	for _, v := range []float64{math.NaN(), math.Inf(1), 40} {
		if err := s.Encode(r, 0, v); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%v: got %v", v, err)
		}
	}
	s.Max = &mx
	if err := s.Encode(r, 0, 1.6); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("above max: %v", err)
	}
	if r[0] != 0x1234 {
		t.Errorf("register touched: %04x", r[0])
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{Transport: "can", Timeout: -1, BackoffMin: 3e9, BackoffMax: 1e9}
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`transport: "can"`, "timeout: -1ns is negative", "backoff_min 3s > backoff_max 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lacks %q: %v", want, err)
		}
	}
	c = Config{Transport: "rtu", Parity: "X", BaudRate: 10}
	err = c.Validate()
	for _, want := range []string{"device: required", `parity: "X"`, "baud_rate: 10"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lacks %q: %v", want, err)
		}
	}
	if err := (&Config{Address: "127.0.0.1:502"}).Validate(); err != nil {
		t.Error(err)
	}
}

// The runtime embeds Config in its YAML: durations are written as "100ms".
func TestConfigYAML(t *testing.T) {
	const y = `
transport: rtu
device: /dev/ttyUSB0
baud_rate: 115200
parity: N
stop_bits: 1
timeout: 50ms
connect_timeout: 1s
backoff_min: 20ms
backoff_max: 2s
map: examples/maps/generic.yaml
`
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(y))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 50*time.Millisecond || c.BackoffMax != 2*time.Second || c.BaudRate != 115200 || c.Parity != "N" {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
