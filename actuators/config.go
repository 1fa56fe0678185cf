package actuators

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Transports.
const (
	TransportTCP = "tcp"
	TransportRTU = "rtu"
)

// Config is the arm connection as the runtime's YAML config embeds it.
// Zero fields take the defaults of DefaultConfig.
type Config struct {
	Transport string `yaml:"transport"`         // "tcp" (default) or "rtu"
	Address   string `yaml:"address,omitempty"` // tcp: host:port
	Device    string `yaml:"device,omitempty"`  // rtu: serial device, e.g. /dev/ttyUSB0
	BaudRate  int    `yaml:"baud_rate,omitempty"`
	DataBits  int    `yaml:"data_bits,omitempty"` // 7 or 8
	Parity    string `yaml:"parity,omitempty"`    // "N", "E" or "O"
	StopBits  int    `yaml:"stop_bits,omitempty"` // 1 or 2
	// Timeout bounds every request (TCP: from the request's context
	// deadline too, whichever is sooner; RTU: fixed when the port opens).
	Timeout        time.Duration `yaml:"timeout,omitempty"`
	ConnectTimeout time.Duration `yaml:"connect_timeout,omitempty"`
	// BackoffMin/Max bound the wait between reconnect attempts; it doubles
	// on every failed attempt and resets on a successful request.
	BackoffMin time.Duration `yaml:"backoff_min,omitempty"`
	BackoffMax time.Duration `yaml:"backoff_max,omitempty"`
	// Map is the register-map file (docs/register-map.md); Open loads it.
	Map string `yaml:"map,omitempty"`
}

// DefaultConfig returns the defaults that zero fields take.
func DefaultConfig() Config {
	return Config{
		Transport:      TransportTCP,
		BaudRate:       19200,
		DataBits:       8,
		Parity:         "E",
		StopBits:       1,
		Timeout:        100 * time.Millisecond,
		ConnectTimeout: 500 * time.Millisecond,
		BackoffMin:     50 * time.Millisecond,
		BackoffMax:     2 * time.Second,
	}
}

// withDefaults returns a copy with zero fields filled.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Transport == "" {
		c.Transport = d.Transport
	}
	if c.BaudRate == 0 {
		c.BaudRate = d.BaudRate
	}
	if c.DataBits == 0 {
		c.DataBits = d.DataBits
	}
	if c.Parity == "" {
		c.Parity = d.Parity
	}
	if c.StopBits == 0 {
		c.StopBits = d.StopBits
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = d.BackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = d.BackoffMax
	}
	return c
}

// Validate reports every problem in the configuration, naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	d := c.withDefaults()
	switch d.Transport {
	case TransportTCP:
		if c.Address == "" {
			bad("address: required for transport tcp (host:port, e.g. 192.168.1.10:502)")
		}
	case TransportRTU:
		if c.Device == "" {
			bad("device: required for transport rtu (e.g. /dev/ttyUSB0)")
		}
		if d.BaudRate < 300 || d.BaudRate > 4000000 {
			bad("baud_rate: %d outside 300..4000000", d.BaudRate)
		}
		if d.DataBits != 7 && d.DataBits != 8 {
			bad("data_bits: %d, want 7 or 8", d.DataBits)
		}
		if d.Parity != "N" && d.Parity != "E" && d.Parity != "O" {
			bad("parity: %q, want N, E or O", d.Parity)
		}
		if d.StopBits != 1 && d.StopBits != 2 {
			bad("stop_bits: %d, want 1 or 2", d.StopBits)
		}
	default:
		bad("transport: %q, want tcp or rtu", c.Transport)
	}
	for _, t := range []struct {
		key string
		v   time.Duration
	}{{"timeout", c.Timeout}, {"connect_timeout", c.ConnectTimeout}, {"backoff_min", c.BackoffMin}, {"backoff_max", c.BackoffMax}} {
		if t.v < 0 {
			bad("%s: %v is negative", t.key, t.v)
		}
	}
	if d.BackoffMin > d.BackoffMax {
		bad("backoff_min %v > backoff_max %v", d.BackoffMin, d.BackoffMax)
	}
	if len(errs) > 0 {
		return fmt.Errorf("actuators: invalid arm config: %w", errors.Join(errs...))
	}
	return nil
}

// Clock is the time source of the arm (backoff, State.Time). Tests inject
// a fake; nil means the system clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options are the optional collaborators of a ModbusArm. The zero value is
// valid.
type Options struct {
	Clock  Clock        // nil: system clock
	Logger *slog.Logger // nil: discard
	// OnEvent, when set, is called on every connection change (connected,
	// disconnected, reconnect attempt failed), right after the request that
	// noticed it and outside the arm's lock. It must not block; it may call
	// the arm. This is how the safety layer learns of a lost link at once.
	OnEvent func(Event)
}
