// Package actuators drives a robot arm over Modbus (TCP or RTU) through a
// register map read from configuration, and provides a simulated arm that
// serves the same registers.
package actuators
