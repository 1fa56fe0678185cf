// Package actuators drives a robot arm over Modbus (TCP or RTU) through a
// register map read from configuration, and provides a simulated arm that
// serves the same registers.
//
// # Concepts
//
// Map: where the controller keeps each signal (docs/register-map.md).
// ParseMap/LoadMap validate it and report every problem at once. No address
// is written in code.
//
// Arm: the small interface the runtime and the safety layer use (Command,
// State, Enable, Halt). ModbusArm implements it with github.com/goburrow/modbus
// v0.1.0; simarm.Arm is a controller that serves a map over Modbus TCP (and
// RTU) for tests and robot-free runs.
//
// Batching: Command, State and Halt each take as few requests as the map
// allows (adjacent signals of one table share a request); Requests reports
// how many.
//
// Faults: every request has a timeout. After any error that is not a Modbus
// exception the connection is closed and reopened later with exponential
// backoff, because goburrow's client otherwise stays one reply behind
// (after a timeout) or broken (after the server drops the connection).
// Losing the link is reported at once: the failing call returns an error
// wrapping ErrDisconnected, Options.OnEvent is called before that call
// returns, and Health tells the state at any time. A failed Command is never
// retried: the next tick writes a fresh command. Exceptions (ErrException,
// *ExceptionError) keep the connection.
//
// Stop path: Halt writes enable 0, zero velocity, the gripper hold and a
// fresh heartbeat, in one request for a map laid out as the docs advise. It
// ignores the caller's cancellation and the reconnect backoff. When the
// link is gone the controller's own heartbeat watchdog stops the arm.
//
// Ownership: cmd/energyflow builds the ModbusArm and closes it; the runtime
// and safety layer only use it through Arm. All methods are safe for
// concurrent use; requests are serialized (this is also the lock goburrow's
// RTU handler lacks).
package actuators
