package modbustest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/goburrow/modbus"
)

// Transaction is one request and its outcome.
type Transaction struct {
	Unit      byte   `json:"unit"`
	Function  byte   `json:"function"`            // Modbus function code
	Request   []byte `json:"request"`             // PDU data as sent: address, quantity, values
	Reply     []byte `json:"reply,omitempty"`     // what the client returned
	Exception byte   `json:"exception,omitempty"` // Modbus exception answered, 0 if none
	Err       string `json:"err,omitempty"`       // transport error, "" if none
}

func (t Transaction) String() string {
	return fmt.Sprintf("unit %d fc %d req % x", t.Unit, t.Function, t.Request)
}

// Recorder wraps the connections of a DialFunc and logs every transaction.
type Recorder struct {
	mu  sync.Mutex
	log []Transaction
}

// Dial wraps dial so that every connection it opens is recorded.
func (r *Recorder) Dial(dial actuators.DialFunc) actuators.DialFunc {
	return func(ctx context.Context, timeout time.Duration) (actuators.Conn, error) {
		c, err := dial(ctx, timeout)
		if err != nil {
			return nil, err
		}
		return &recConn{inner: c, r: r}, nil
	}
}

// Log returns a copy of the transactions so far.
func (r *Recorder) Log() []Transaction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transaction(nil), r.log...)
}

// Reset forgets the transactions so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = nil
}

type recConn struct {
	inner actuators.Conn
	r     *Recorder
	unit  byte
}

func (c *recConn) SetUnit(id byte)            { c.unit = id; c.inner.SetUnit(id) }
func (c *recConn) SetTimeout(d time.Duration) { c.inner.SetTimeout(d) }
func (c *recConn) Close() error               { return c.inner.Close() }

func (c *recConn) add(fc byte, req []byte, res []byte, err error) ([]byte, error) {
	t := Transaction{Unit: c.unit, Function: fc, Request: req, Reply: append([]byte(nil), res...)}
	var me *modbus.ModbusError
	switch {
	case errors.As(err, &me):
		t.Exception = me.ExceptionCode
	case err != nil:
		t.Err = err.Error()
	}
	c.r.mu.Lock()
	c.r.log = append(c.r.log, t)
	c.r.mu.Unlock()
	return res, err
}

func block(vals ...uint16) []byte {
	b := make([]byte, 0, 2*len(vals))
	for _, v := range vals {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return b
}

func (c *recConn) ReadCoils(a, q uint16) ([]byte, error) {
	res, err := c.inner.ReadCoils(a, q)
	return c.add(modbus.FuncCodeReadCoils, block(a, q), res, err)
}
func (c *recConn) ReadDiscreteInputs(a, q uint16) ([]byte, error) {
	res, err := c.inner.ReadDiscreteInputs(a, q)
	return c.add(modbus.FuncCodeReadDiscreteInputs, block(a, q), res, err)
}
func (c *recConn) WriteSingleCoil(a, v uint16) ([]byte, error) {
	res, err := c.inner.WriteSingleCoil(a, v)
	return c.add(modbus.FuncCodeWriteSingleCoil, block(a, v), res, err)
}
func (c *recConn) WriteMultipleCoils(a, q uint16, v []byte) ([]byte, error) {
	res, err := c.inner.WriteMultipleCoils(a, q, v)
	return c.add(modbus.FuncCodeWriteMultipleCoils, append(block(a, q), v...), res, err)
}
func (c *recConn) ReadInputRegisters(a, q uint16) ([]byte, error) {
	res, err := c.inner.ReadInputRegisters(a, q)
	return c.add(modbus.FuncCodeReadInputRegisters, block(a, q), res, err)
}
func (c *recConn) ReadHoldingRegisters(a, q uint16) ([]byte, error) {
	res, err := c.inner.ReadHoldingRegisters(a, q)
	return c.add(modbus.FuncCodeReadHoldingRegisters, block(a, q), res, err)
}
func (c *recConn) WriteSingleRegister(a, v uint16) ([]byte, error) {
	res, err := c.inner.WriteSingleRegister(a, v)
	return c.add(modbus.FuncCodeWriteSingleRegister, block(a, v), res, err)
}
func (c *recConn) WriteMultipleRegisters(a, q uint16, v []byte) ([]byte, error) {
	res, err := c.inner.WriteMultipleRegisters(a, q, v)
	return c.add(modbus.FuncCodeWriteMultipleRegisters, append(block(a, q), v...), res, err)
}
func (c *recConn) ReadWriteMultipleRegisters(ra, rq, wa, wq uint16, v []byte) ([]byte, error) {
	res, err := c.inner.ReadWriteMultipleRegisters(ra, rq, wa, wq, v)
	return c.add(modbus.FuncCodeReadWriteMultipleRegisters, append(block(ra, rq, wa, wq), v...), res, err)
}
func (c *recConn) MaskWriteRegister(a, and, or uint16) ([]byte, error) {
	res, err := c.inner.MaskWriteRegister(a, and, or)
	return c.add(modbus.FuncCodeMaskWriteRegister, block(a, and, or), res, err)
}
func (c *recConn) ReadFIFOQueue(a uint16) ([]byte, error) {
	res, err := c.inner.ReadFIFOQueue(a)
	return c.add(modbus.FuncCodeReadFIFOQueue, block(a), res, err)
}

// Playback replays a log: each request must equal the next transaction's
// unit, function and request bytes, and gets its recorded outcome. A
// mismatch is an error returned to the caller and kept for Err; Close
// nothing. Call Err at the end: it also reports transactions left unused.
type Playback struct {
	mu    sync.Mutex
	log   []Transaction
	next  int
	fails []error
}

// NewPlayback returns a Playback of log.
func NewPlayback(log []Transaction) *Playback { return &Playback{log: log} }

// Dial is an actuators.DialFunc that always connects to the playback.
func (p *Playback) Dial(ctx context.Context, timeout time.Duration) (actuators.Conn, error) {
	return &playConn{p: p}, nil
}

// Err reports every mismatch and any transaction left unused.
func (p *Playback) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := append([]error(nil), p.fails...)
	if p.next < len(p.log) {
		errs = append(errs, fmt.Errorf("modbustest: %d transactions left unused, next: %v", len(p.log)-p.next, p.log[p.next]))
	}
	return errors.Join(errs...)
}

type playConn struct {
	p    *Playback
	unit byte
}

func (c *playConn) SetUnit(id byte)          { c.unit = id }
func (c *playConn) SetTimeout(time.Duration) {}
func (c *playConn) Close() error             { return nil }

func (c *playConn) play(fc byte, req []byte) ([]byte, error) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	got := Transaction{Unit: c.unit, Function: fc, Request: req}
	if p.next >= len(p.log) {
		err := fmt.Errorf("modbustest: unexpected request %v after the log's end", got)
		p.fails = append(p.fails, err)
		return nil, err
	}
	want := p.log[p.next]
	if want.Unit != got.Unit || want.Function != got.Function || !bytes.Equal(want.Request, got.Request) {
		err := fmt.Errorf("modbustest: transaction %d: got %v, want %v", p.next, got, want)
		p.fails = append(p.fails, err)
		return nil, err
	}
	p.next++
	switch {
	case want.Exception != 0:
		return nil, &modbus.ModbusError{FunctionCode: fc | 0x80, ExceptionCode: want.Exception}
	case want.Err != "":
		return nil, errors.New(want.Err)
	}
	return append([]byte(nil), want.Reply...), nil
}

func (c *playConn) ReadCoils(a, q uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeReadCoils, block(a, q))
}
func (c *playConn) ReadDiscreteInputs(a, q uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeReadDiscreteInputs, block(a, q))
}
func (c *playConn) WriteSingleCoil(a, v uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeWriteSingleCoil, block(a, v))
}
func (c *playConn) WriteMultipleCoils(a, q uint16, v []byte) ([]byte, error) {
	return c.play(modbus.FuncCodeWriteMultipleCoils, append(block(a, q), v...))
}
func (c *playConn) ReadInputRegisters(a, q uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeReadInputRegisters, block(a, q))
}
func (c *playConn) ReadHoldingRegisters(a, q uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeReadHoldingRegisters, block(a, q))
}
func (c *playConn) WriteSingleRegister(a, v uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeWriteSingleRegister, block(a, v))
}
func (c *playConn) WriteMultipleRegisters(a, q uint16, v []byte) ([]byte, error) {
	return c.play(modbus.FuncCodeWriteMultipleRegisters, append(block(a, q), v...))
}
func (c *playConn) ReadWriteMultipleRegisters(ra, rq, wa, wq uint16, v []byte) ([]byte, error) {
	return c.play(modbus.FuncCodeReadWriteMultipleRegisters, append(block(ra, rq, wa, wq), v...))
}
func (c *playConn) MaskWriteRegister(a, and, or uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeMaskWriteRegister, block(a, and, or))
}
func (c *playConn) ReadFIFOQueue(a uint16) ([]byte, error) {
	return c.play(modbus.FuncCodeReadFIFOQueue, block(a))
}

var (
	_ actuators.Conn = (*recConn)(nil)
	_ actuators.Conn = (*playConn)(nil)
)
