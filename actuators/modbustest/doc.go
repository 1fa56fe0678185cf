// Package modbustest holds test doubles and peers for Modbus code:
// Record and Playback of request/reply transactions (periph's i2ctest
// idea, keyed on unit, function code and request bytes), a pymodbus server
// started as a subprocess (an independent peer), and pseudo-terminals for
// RTU tests.
package modbustest
