package actuators

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is; every error the arm returns wraps
// at most one of the first three.
var (
	// ErrDisconnected means the arm is not reachable: the connection was lost
	// (timeout, reset, EOF, refused) or is waiting out its reconnect backoff.
	// The command in flight may or may not have reached the controller; it
	// is never retried. The safety layer should stop: the controller stops
	// the arm by itself when the heartbeat lapses.
	ErrDisconnected = errors.New("actuators: arm disconnected")
	// ErrException means the controller answered with a Modbus exception
	// (see *ExceptionError for the code). The connection is kept.
	ErrException = errors.New("actuators: controller answered an exception")
	// ErrOutOfRange means a command value is NaN, outside the map's min/max
	// or not representable in its register type; nothing was written.
	ErrOutOfRange = errors.New("actuators: value out of range")
	// ErrBadCommand means the command does not fit the map (wrong number of
	// axes); nothing was written.
	ErrBadCommand = errors.New("actuators: command does not fit the register map")
	// ErrFault means Enable was refused because the controller's fault word
	// is non-zero.
	ErrFault = errors.New("actuators: controller reports a fault")
	// ErrEStop means Enable was refused because the hardware e-stop is asserted.
	ErrEStop = errors.New("actuators: e-stop asserted")
	// ErrNotEnabled means enable was written but the controller does not
	// report motion permitted.
	ErrNotEnabled = errors.New("actuators: controller did not enable")
	// ErrClosed means the arm was closed.
	ErrClosed = errors.New("actuators: arm closed")
)

// ExceptionError is a Modbus exception answered by the controller.
// errors.Is(err, ErrException) is true for it.
type ExceptionError struct {
	Function  byte // function code of the request
	Exception byte // Modbus exception code (1 illegal function, 2 illegal address, 3 illegal value, 4 device failure, 6 busy, ...)
}

func (e *ExceptionError) Error() string {
	return fmt.Sprintf("actuators: controller answered exception %d (%s) to function %d", e.Exception, exceptionName(e.Exception), e.Function)
}

// Is makes errors.Is(err, ErrException) true.
func (e *ExceptionError) Is(target error) bool { return target == ErrException }

func exceptionName(c byte) string {
	switch c {
	case 1:
		return "illegal function"
	case 2:
		return "illegal data address"
	case 3:
		return "illegal data value"
	case 4:
		return "server device failure"
	case 5:
		return "acknowledge"
	case 6:
		return "server device busy"
	case 10:
		return "gateway path unavailable"
	case 11:
		return "gateway target failed to respond"
	}
	return "unknown"
}
