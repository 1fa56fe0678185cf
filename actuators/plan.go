package actuators

import (
	"sort"
)

// Modbus per-request limits.
const (
	maxReadRegs  = 125
	maxWriteRegs = 123
	maxReadBits  = 2000
	maxWriteBits = 1968
)

// span is one request: a contiguous range of one table on one unit, with
// its preallocated register (or bit, one per element) buffer.
type span struct {
	unit byte
	fn   Function
	addr int
	qty  int
	regs []uint16 // registers, or bits as 0/1
	wire []byte   // encoded payload for writes
	sigs []*Signal
}

// loc is where a signal sits inside a plan: span index and offset.
type loc struct {
	span int
	off  int
	ok   bool
}

// plan is an ordered list of requests covering a set of signals.
type plan struct {
	spans []span
	locs  map[*Signal]loc // built once; looked up at build time only
}

func (p *plan) loc(s *Signal) loc {
	if s == nil {
		return loc{}
	}
	return p.locs[s]
}

// Requests is the number of Modbus requests the plan takes.
func (p *plan) requests() int { return len(p.spans) }

// buildPlan groups signals by (unit, table), sorts by address and merges
// neighbours into as few requests as the Modbus limits allow: reads may
// bridge gaps of up to gap registers, writes only join adjacent signals
// (a write over a hole would clobber registers the map does not own).
func buildPlan(sigs []*Signal, write bool, gap int) *plan {
	var list []*Signal
	for _, s := range sigs {
		if s != nil {
			list = append(list, s)
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.unit != b.unit {
			return a.unit < b.unit
		}
		if a.Function != b.Function {
			return a.Function < b.Function
		}
		return a.Address < b.Address
	})
	p := &plan{locs: map[*Signal]loc{}}
	if write {
		gap = 0
	}
	for _, s := range list {
		limit := maxReadRegs
		switch {
		case write && s.Function.isBit():
			limit = maxWriteBits
		case write:
			limit = maxWriteRegs
		case s.Function.isBit():
			limit = maxReadBits
		}
		n := len(p.spans)
		if n > 0 {
			c := &p.spans[n-1]
			end := c.addr + c.qty
			newEnd := max(end, s.Address+s.Span())
			if c.unit == s.unit && c.fn == s.Function && s.Address >= c.addr && s.Address <= end+gap && newEnd-c.addr <= limit {
				c.qty = newEnd - c.addr
				c.sigs = append(c.sigs, s)
				p.locs[s] = loc{span: n - 1, off: s.Address - c.addr, ok: true}
				continue
			}
		}
		p.spans = append(p.spans, span{unit: s.unit, fn: s.Function, addr: s.Address, qty: s.Span(), sigs: []*Signal{s}})
		p.locs[s] = loc{span: n, off: 0, ok: true}
	}
	for i := range p.spans {
		sp := &p.spans[i]
		sp.regs = make([]uint16, sp.qty)
		if sp.fn.isBit() {
			sp.wire = make([]byte, (sp.qty+7)/8)
		} else {
			sp.wire = make([]byte, 2*sp.qty)
		}
	}
	return p
}

// moveFirst puts the span holding s first (Halt drops enable before anything else).
func (p *plan) moveFirst(s *Signal) { p.move(s, true) }

// moveLast puts the span holding s last (the heartbeat comes after the command it vouches for).
func (p *plan) moveLast(s *Signal) { p.move(s, false) }

func (p *plan) move(s *Signal, first bool) {
	l := p.loc(s)
	if !l.ok || len(p.spans) < 2 {
		return
	}
	sp := p.spans[l.span]
	rest := append([]span(nil), p.spans[:l.span]...)
	rest = append(rest, p.spans[l.span+1:]...)
	if first {
		p.spans = append([]span{sp}, rest...)
	} else {
		p.spans = append(rest, sp)
	}
	for i := range p.spans {
		for _, sg := range p.spans[i].sigs {
			if lc, ok := p.locs[sg]; ok {
				lc.span = i
				p.locs[sg] = lc
			}
		}
	}
}

// slot is a resolved signal location used on the hot path without map lookups.
type slot struct {
	sig *Signal
	sp  *span
	off int
}

func (p *plan) slot(s *Signal) slot {
	l := p.loc(s)
	if !l.ok {
		return slot{}
	}
	return slot{sig: s, sp: &p.spans[l.span], off: l.off}
}

func (sl slot) mapped() bool { return sl.sig != nil }

// regs returns the signal's registers (or bits) within its span.
func (sl slot) regs() []uint16 { return sl.sp.regs[sl.off : sl.off+sl.sig.Span()] }

func (sl slot) get(i int) float64 { return sl.sig.Decode(sl.regs(), i) }

func (sl slot) bool() bool {
	if sl.sig.Function.isBit() {
		return sl.sp.regs[sl.off] != 0
	}
	return sl.get(0) != 0
}

func (sl slot) set(i int, v float64) error { return sl.sig.Encode(sl.regs(), i, v) }

func (sl slot) setBool(b bool) {
	var v uint16
	if b {
		v = 1
	}
	sl.sp.regs[sl.off] = v
}

// packWire fills the span's wire payload from its registers or bits.
func (sp *span) packWire() []byte {
	if sp.fn.isBit() {
		for i := range sp.wire {
			sp.wire[i] = 0
		}
		for i, b := range sp.regs {
			if b != 0 {
				sp.wire[i/8] |= 1 << uint(i%8)
			}
		}
		return sp.wire
	}
	for i, r := range sp.regs {
		sp.wire[2*i] = byte(r >> 8)
		sp.wire[2*i+1] = byte(r)
	}
	return sp.wire
}

// unpack stores a read reply (big-endian registers or packed bits) in regs.
func (sp *span) unpack(b []byte) bool {
	if sp.fn.isBit() {
		if len(b) < (sp.qty+7)/8 {
			return false
		}
		for i := range sp.regs {
			sp.regs[i] = uint16(b[i/8]>>uint(i%8)) & 1
		}
		return true
	}
	if len(b) != 2*sp.qty {
		return false
	}
	for i := range sp.regs {
		sp.regs[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	return true
}
