package simarm

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	smb "github.com/simonvetter/modbus"
)

// ServeRTU answers Modbus RTU requests read from port (e.g. the master side
// of a pseudo-terminal) with the same controller, until port is closed or
// the arm is. Frames addressed to other unit ids are ignored, as on a bus.
// A pseudo-terminal whose other side is closed reads EIO: ServeRTU waits
// for it to be opened again.
func (a *Arm) ServeRTU(port io.ReadWriter) error {
	var buf []byte
	chunk := make([]byte, 512)
	for {
		select {
		case <-a.done:
			return nil
		default:
		}
		n, err := port.Read(chunk)
		if err != nil {
			if errors.Is(err, syscall.EIO) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		buf = append(buf, chunk[:n]...)
		for {
			frame, rest, ok := nextFrame(buf)
			if !ok {
				break
			}
			buf = rest
			if frame == nil {
				continue
			}
			reply, discarded := a.handleRTU(frame)
			if discarded {
				// A hung controller loses what arrived meanwhile.
				buf = nil
				drain(port)
				break
			}
			if reply != nil {
				if _, err := port.Write(reply); err != nil && !errors.Is(err, syscall.EIO) {
					return err
				}
			}
		}
	}
}

// nextFrame cuts one request frame off buf. ok=false: need more bytes.
// frame=nil with ok: garbage dropped.
func nextFrame(buf []byte) (frame, rest []byte, ok bool) {
	if len(buf) < 2 {
		return nil, buf, false
	}
	var n int
	switch buf[1] {
	case 1, 2, 3, 4, 5, 6:
		n = 8
	case 15, 16:
		if len(buf) < 7 {
			return nil, buf, false
		}
		n = 9 + int(buf[6])
	default:
		return nil, nil, true // unknown function: resynchronize by dropping everything
	}
	if len(buf) < n {
		return nil, buf, false
	}
	if crc16(buf[:n-2]) != binary.LittleEndian.Uint16(buf[n-2:n]) {
		return nil, buf[1:], true
	}
	return buf[:n], buf[n:], true
}

func crc16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, c := range b {
		crc ^= uint16(c)
		for i := 0; i < 8; i++ {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// drain discards the bytes waiting on port, when it supports read deadlines.
func drain(port io.Reader) {
	d, ok := port.(interface{ SetReadDeadline(time.Time) error })
	if !ok {
		return
	}
	b := make([]byte, 512)
	for {
		if d.SetReadDeadline(time.Now().Add(20*time.Millisecond)) != nil {
			return
		}
		if _, err := port.Read(b); err != nil {
			break
		}
	}
	_ = d.SetReadDeadline(time.Time{})
}

func (a *Arm) handleRTU(f []byte) (reply []byte, discarded bool) {
	unit, fc := f[0], f[1]
	if !a.hasUnit(unit) {
		return nil, false
	}
	addr := binary.BigEndian.Uint16(f[2:])
	qty := binary.BigEndian.Uint16(f[4:])
	var pdu []byte
	var err error
	switch fc {
	case 1, 2:
		var bits []bool
		if fc == 1 {
			bits, err = a.HandleCoils(&smb.CoilsRequest{UnitId: unit, Addr: addr, Quantity: qty})
		} else {
			bits, err = a.HandleDiscreteInputs(&smb.DiscreteInputsRequest{UnitId: unit, Addr: addr, Quantity: qty})
		}
		if err == nil {
			pdu = append(pdu, fc, byte((len(bits)+7)/8))
			pdu = append(pdu, make([]byte, (len(bits)+7)/8)...)
			for i, b := range bits {
				if b {
					pdu[2+i/8] |= 1 << uint(i%8)
				}
			}
		}
	case 3, 4:
		var regs []uint16
		if fc == 3 {
			regs, err = a.HandleHoldingRegisters(&smb.HoldingRegistersRequest{UnitId: unit, Addr: addr, Quantity: qty})
		} else {
			regs, err = a.HandleInputRegisters(&smb.InputRegistersRequest{UnitId: unit, Addr: addr, Quantity: qty})
		}
		if err == nil {
			pdu = append(pdu, fc, byte(2*len(regs)))
			for _, r := range regs {
				pdu = binary.BigEndian.AppendUint16(pdu, r)
			}
		}
	case 5:
		_, err = a.HandleCoils(&smb.CoilsRequest{UnitId: unit, Addr: addr, Quantity: 1, IsWrite: true, Args: []bool{qty == 0xFF00}})
		pdu = append(pdu, f[1:6]...)
	case 6:
		_, err = a.HandleHoldingRegisters(&smb.HoldingRegistersRequest{UnitId: unit, Addr: addr, Quantity: 1, IsWrite: true, Args: []uint16{qty}})
		pdu = append(pdu, f[1:6]...)
	case 15, 16:
		want := int(qty+7) / 8
		if fc == 16 {
			want = 2 * int(qty)
		}
		if int(f[6]) != want || qty == 0 {
			err = smb.ErrIllegalDataValue
			break
		}
		if fc == 16 {
			args := make([]uint16, qty)
			for i := range args {
				args[i] = binary.BigEndian.Uint16(f[7+2*i:])
			}
			_, err = a.HandleHoldingRegisters(&smb.HoldingRegistersRequest{UnitId: unit, Addr: addr, Quantity: qty, IsWrite: true, Args: args})
			pdu = append(pdu, f[1:6]...)
			break
		}
		args := make([]bool, qty)
		for i := range args {
			args[i] = f[7+i/8]>>uint(i%8)&1 != 0
		}
		_, err = a.HandleCoils(&smb.CoilsRequest{UnitId: unit, Addr: addr, Quantity: qty, IsWrite: true, Args: args})
		pdu = append(pdu, f[1:6]...)
	}
	if err == errDiscarded {
		return nil, true
	}
	if err != nil {
		pdu = []byte{fc | 0x80, exceptionCode(err)}
	}
	out := append([]byte{unit}, pdu...)
	return binary.LittleEndian.AppendUint16(out, crc16(out)), false
}

func exceptionCode(err error) byte {
	switch err {
	case smb.ErrIllegalFunction:
		return 1
	case smb.ErrIllegalDataAddress:
		return 2
	case smb.ErrIllegalDataValue:
		return 3
	case smb.ErrServerDeviceBusy:
		return 6
	case smb.ErrGWTargetFailedToRespond:
		return 11
	}
	return 4
}
