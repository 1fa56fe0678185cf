package actuators

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/goburrow/modbus"
	"github.com/goburrow/serial"
)

// RTUDialer opens the serial port of cfg (defaults filled). Framing, CRC
// and the client API are goburrow/modbus's (its RTU packager); the
// transport is the arm's own, because goburrow v0.1.0's RTU transporter
// sleeps 750 µs per byte of request+reply before reading at any baud rate
// above 19200 (about 60 ms for a 7-axis state read), which caps a tick at
// ~10 Hz. This one reads as soon as bytes arrive, up to the expected reply
// length (or the 5-byte exception reply), each read bounded by cfg.Timeout.
func RTUDialer(cfg Config) DialFunc {
	c := cfg.withDefaults()
	return func(ctx context.Context, timeout time.Duration) (Conn, error) {
		port, err := serial.Open(&serial.Config{
			Address: c.Device, BaudRate: c.BaudRate, DataBits: c.DataBits,
			StopBits: c.StopBits, Parity: c.Parity, Timeout: c.Timeout,
		})
		if err != nil {
			return nil, err
		}
		h := modbus.NewRTUClientHandler(c.Device) // used as the packager only
		t := &rtuTransport{port: port}
		return &rtuConn{Client: modbus.NewClient2(h, t), h: h, t: t}, nil
	}
}

type rtuConn struct {
	modbus.Client
	h *modbus.RTUClientHandler
	t *rtuTransport
}

func (c *rtuConn) SetUnit(id byte)          { c.h.SlaveId = id }
func (c *rtuConn) SetTimeout(time.Duration) {} // fixed when the port opens (goburrow/serial)
func (c *rtuConn) Close() error             { return c.t.port.Close() }

const (
	rtuMin       = 4   // unit, function, CRC
	rtuException = 5   // unit, function|0x80, code, CRC
	rtuMax       = 256 // largest RTU frame
)

type rtuTransport struct {
	port io.ReadWriteCloser
	buf  [rtuMax]byte
}

// Send writes one request frame and reads its reply frame.
func (t *rtuTransport) Send(req []byte) ([]byte, error) {
	if _, err := t.port.Write(req); err != nil {
		return nil, err
	}
	want := rtuReplyLength(req)
	n, err := io.ReadAtLeast(t.port, t.buf[:], rtuMin)
	if err != nil {
		return nil, err
	}
	if t.buf[1] == req[1]|0x80 {
		want = rtuException
	}
	if want > rtuMax {
		return nil, fmt.Errorf("actuators: rtu reply of %d bytes expected", want)
	}
	if n < want {
		m, err := io.ReadFull(t.port, t.buf[n:want])
		n += m
		if err != nil {
			return nil, err
		}
	}
	// A longer read means bytes of another frame: out of step.
	if n != want {
		return nil, fmt.Errorf("actuators: rtu reply of %d bytes, want %d", n, want)
	}
	return t.buf[:n], nil
}

// rtuReplyLength is the length of the normal reply to an RTU request.
func rtuReplyLength(req []byte) int {
	switch req[1] {
	case modbus.FuncCodeReadCoils, modbus.FuncCodeReadDiscreteInputs:
		q := int(binary.BigEndian.Uint16(req[4:]))
		return 5 + (q+7)/8
	case modbus.FuncCodeReadHoldingRegisters, modbus.FuncCodeReadInputRegisters, modbus.FuncCodeReadWriteMultipleRegisters:
		q := int(binary.BigEndian.Uint16(req[4:]))
		return 5 + 2*q
	case modbus.FuncCodeWriteSingleCoil, modbus.FuncCodeWriteMultipleCoils,
		modbus.FuncCodeWriteSingleRegister, modbus.FuncCodeWriteMultipleRegisters:
		return 8
	case modbus.FuncCodeMaskWriteRegister:
		return 10
	}
	return rtuMax
}
