package telemetry

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"time"
)

// ICE modes.
const (
	// ICELoopback gathers only loopback host candidates on "lo", with mDNS
	// off: for tests and for a viewer on the robot itself.
	ICELoopback = "loopback"
	// ICELAN gathers host candidates on the configured interfaces (all
	// non-loopback ones when none are named) and resolves browsers' mDNS
	// candidates.
	ICELAN = "lan"
)

// Config configures the telemetry server. The zero value is not valid; start
// from DefaultConfig.
type Config struct {
	// Listen is the HTTP address; its host picks the interface
	// ("127.0.0.1:8088", "192.168.1.20:8088", ":8088" for all).
	Listen string      `yaml:"listen"`
	Video  VideoConfig `yaml:"video"`
	Auth   AuthConfig  `yaml:"auth"`
	ICE    ICEConfig   `yaml:"ice"`
	// MaxViewers bounds concurrent WebRTC viewers.
	MaxViewers int `yaml:"max_viewers"`
	// MaxOfferBytes bounds the signaling request body.
	MaxOfferBytes int `yaml:"max_offer_bytes"`
	// EventHistory is how many recent safety events are kept for new viewers.
	EventHistory int `yaml:"event_history"`
	// StatsInterval is how often GPU/CPU statistics are sent to viewers.
	StatsInterval time.Duration `yaml:"stats_interval"`
}

// VideoConfig configures the encoded stream.
type VideoConfig struct {
	Width       int `yaml:"width"`  // encoded width, even; input frames are scaled to it
	Height      int `yaml:"height"` // encoded height, even
	FPS         int `yaml:"fps"`    // frames per second encoded at most; faster input is dropped
	BitrateKbps int `yaml:"bitrate_kbps"`
	// CPUUsed is libvpx's realtime speed setting, -16…-1 (more negative is
	// faster); -6…-12 suits 2-core boards.
	CPUUsed int  `yaml:"cpu_used"`
	Overlay bool `yaml:"overlay"` // draw the energy overlay
	// KeyframeInterval is the longest time between keyframes.
	KeyframeInterval time.Duration `yaml:"keyframe_interval"`
	// URL is an MJPEG-over-HTTP stream the live view shows instead of the
	// policy's camera (e.g. the simulator's display-size /view); empty
	// means the policy's camera frames, scaled to Width×Height. The server
	// does not read it: whoever feeds SubmitFrame (the runtime) opens it.
	URL string `yaml:"url"`
}

// AuthConfig configures access tokens. A view token lets a viewer watch and
// press STOP; the reset token also allows RESET. When a token is empty it is
// read from TokenFile, or generated, written there (mode 0600) and printed
// once.
type AuthConfig struct {
	ViewToken  string `yaml:"view_token"`
	ResetToken string `yaml:"reset_token"`
	TokenFile  string `yaml:"token_file"`
	// PublicMetrics serves /metrics without a token (for a Prometheus
	// scraper on a trusted network). Default false: /metrics needs a token.
	PublicMetrics bool `yaml:"public_metrics"`
}

// ICEConfig configures WebRTC connectivity.
type ICEConfig struct {
	Mode string `yaml:"mode"` // ICELAN or ICELoopback
	// Interfaces limits LAN candidates to these interface names (e.g.
	// ["eth0", "wlan0"]); empty means every non-loopback interface.
	Interfaces []string `yaml:"interfaces"`
	// UDPPortMin/Max bound the UDP ports used for media (for firewalls);
	// both zero means ephemeral ports.
	UDPPortMin uint16 `yaml:"udp_port_min"`
	UDPPortMax uint16 `yaml:"udp_port_max"`
	// NAT1To1IPs replaces host candidate addresses (robot behind 1:1 NAT).
	NAT1To1IPs []string `yaml:"nat_1to1_ips"`
	// GatherTimeout bounds ICE gathering while answering an offer.
	GatherTimeout time.Duration `yaml:"gather_timeout"`
}

// DefaultConfig returns a configuration for a LAN viewer on port 8088 with
// 640×480 at 15 fps. Tokens come from TokenFile.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:8088",
		Video: VideoConfig{
			Width: 640, Height: 480, FPS: 15, BitrateKbps: 1200, CPUUsed: -8,
			Overlay: true, KeyframeInterval: 10 * time.Second,
		},
		Auth:          AuthConfig{TokenFile: "telemetry-tokens.yaml"},
		ICE:           ICEConfig{Mode: ICELAN, GatherTimeout: 3 * time.Second},
		MaxViewers:    8,
		MaxOfferBytes: 64 << 10,
		EventHistory:  50,
		StatsInterval: time.Second,
	}
}

// Validate reports every problem in c, each prefixed with its YAML key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("telemetry: %s: "+format, append([]any{key}, args...)...))
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (%v) — e.g. \"127.0.0.1:8088\"", c.Listen, err)
	} else if port == "" {
		bad("listen", "%q has no port", c.Listen)
	}
	v := c.Video
	if v.Width < 16 || v.Width > 4096 || v.Width%2 != 0 {
		bad("video.width", "%d: must be even and in 16…4096", v.Width)
	}
	if v.Height < 16 || v.Height > 4096 || v.Height%2 != 0 {
		bad("video.height", "%d: must be even and in 16…4096", v.Height)
	}
	if v.FPS < 1 || v.FPS > 60 {
		bad("video.fps", "%d: must be in 1…60", v.FPS)
	}
	if v.BitrateKbps < 50 || v.BitrateKbps > 20000 {
		bad("video.bitrate_kbps", "%d: must be in 50…20000", v.BitrateKbps)
	}
	if v.CPUUsed < -16 || v.CPUUsed > 16 || v.CPUUsed == 0 {
		bad("video.cpu_used", "%d: must be in -16…16 and not 0 (use -6…-12 for realtime)", v.CPUUsed)
	}
	if v.KeyframeInterval < 0 {
		bad("video.keyframe_interval", "%v: must not be negative", v.KeyframeInterval)
	}
	if v.URL != "" {
		switch u, err := url.Parse(v.URL); {
		case err != nil:
			bad("video.url", "%v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("video.url", "%q: scheme must be http or https (an MJPEG stream, e.g. http://127.0.0.1:8090/view)", v.URL)
		case u.Host == "":
			bad("video.url", "%q has no host (e.g. http://127.0.0.1:8090/view)", v.URL)
		}
	}
	a := c.Auth
	if a.ViewToken == "" && a.TokenFile == "" {
		bad("auth", "set auth.view_token or auth.token_file (tokens are generated there at first start)")
	}
	if a.ResetToken == "" && a.ViewToken != "" && a.TokenFile == "" {
		bad("auth.reset_token", "empty: set it or auth.token_file")
	}
	if a.ViewToken != "" && len(a.ViewToken) < 16 {
		bad("auth.view_token", "too short (%d characters): use at least 16", len(a.ViewToken))
	}
	if a.ResetToken != "" && len(a.ResetToken) < 16 {
		bad("auth.reset_token", "too short (%d characters): use at least 16", len(a.ResetToken))
	}
	if a.ViewToken != "" && a.ViewToken == a.ResetToken {
		bad("auth.reset_token", "must differ from auth.view_token")
	}
	switch c.ICE.Mode {
	case ICELAN, ICELoopback:
	default:
		bad("ice.mode", "%q: must be %q or %q", c.ICE.Mode, ICELAN, ICELoopback)
	}
	if (c.ICE.UDPPortMin == 0) != (c.ICE.UDPPortMax == 0) || c.ICE.UDPPortMin > c.ICE.UDPPortMax {
		bad("ice.udp_port_min", "%d…%d: set both or neither, min ≤ max", c.ICE.UDPPortMin, c.ICE.UDPPortMax)
	}
	for _, ip := range c.ICE.NAT1To1IPs {
		if _, err := netip.ParseAddr(ip); err != nil {
			bad("ice.nat_1to1_ips", "%q is not an IP address", ip)
		}
	}
	if c.ICE.GatherTimeout <= 0 || c.ICE.GatherTimeout > 10*time.Second {
		bad("ice.gather_timeout", "%v: must be in (0, 10s]", c.ICE.GatherTimeout)
	}
	if c.MaxViewers < 1 || c.MaxViewers > 64 {
		bad("max_viewers", "%d: must be in 1…64", c.MaxViewers)
	}
	if c.MaxOfferBytes < 1024 || c.MaxOfferBytes > 1<<20 {
		bad("max_offer_bytes", "%d: must be in 1024…1048576", c.MaxOfferBytes)
	}
	if c.EventHistory < 1 || c.EventHistory > 10000 {
		bad("event_history", "%d: must be in 1…10000", c.EventHistory)
	}
	if c.StatsInterval < 100*time.Millisecond {
		bad("stats_interval", "%v: must be at least 100ms", c.StatsInterval)
	}
	return errors.Join(errs...)
}
