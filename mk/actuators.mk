# actuators: Modbus arm client, simulated arm, register maps.
#
#   make bench-actuators   command round trip (write command + read state)
#                          and stop-path latency on loopback, median/p99,
#                          against the Go simulated arm and a pymodbus server

ACTUATORS_BENCHTIME ?= 5000x

.PHONY: bench-actuators
bench-actuators:
	$(GO) test -run '^$$' -bench 'RoundTrip|Halt' -benchtime $(ACTUATORS_BENCHTIME) -count 3 ./actuators/

EXTRA_BENCH += bench-actuators
