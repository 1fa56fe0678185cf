package telemetry_test

import (
	"strings"
	"testing"

	"github.com/energyflow/edge/telemetry"
	"gopkg.in/yaml.v3"
)

func TestDefaultConfigValid(t *testing.T) {
	if err := telemetry.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryKey(t *testing.T) {
	c := telemetry.DefaultConfig()
	c.Listen = "nope"
	c.Video.Width = 641
	c.Video.FPS = 0
	c.Video.CPUUsed = 0
	c.Auth = telemetry.AuthConfig{ViewToken: "short"}
	c.ICE.Mode = "wan"
	c.ICE.UDPPortMin = 5000
	c.ICE.NAT1To1IPs = []string{"not-an-ip"}
	c.MaxViewers = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, key := range []string{"listen", "video.width", "video.fps", "video.cpu_used", "auth.view_token", "auth.reset_token",
		"ice.mode", "ice.udp_port_min", "ice.nat_1to1_ips", "max_viewers"} {
		if !strings.Contains(err.Error(), "telemetry: "+key+":") {
			t.Errorf("no error for %s in:\n%v", key, err)
		}
	}
}

func TestConfigYAML(t *testing.T) {
	src := `
listen: 192.168.1.20:8088
video: {width: 320, height: 240, fps: 10, bitrate_kbps: 600, cpu_used: -10, overlay: true, keyframe_interval: 5s}
auth: {token_file: /var/lib/energyflow/tokens.yaml, public_metrics: true}
ice: {mode: lan, interfaces: [eth0], udp_port_min: 50000, udp_port_max: 50100, gather_timeout: 2s}
max_viewers: 4
max_offer_bytes: 32768
event_history: 20
stats_interval: 2s
`
	c := telemetry.DefaultConfig()
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Video.KeyframeInterval.Seconds() != 5 || c.ICE.Interfaces[0] != "eth0" || c.StatsInterval.Seconds() != 2 {
		t.Fatalf("decoded %+v", c)
	}
}

func TestVideoURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"http://127.0.0.1:8090/view", true},
		{"https://cam.local/stream.mjpg", true},
		{"rtsp://127.0.0.1/view", false},
		{"http:///view", false},
		{"127.0.0.1:8090/view", false},
		{"http://[::1", false},
	} {
		c := telemetry.DefaultConfig()
		c.Video.URL = tc.url
		err := c.Validate()
		if tc.ok && err != nil {
			t.Errorf("%q: %v", tc.url, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "telemetry: video.url:")) {
			t.Errorf("%q: want a video.url error, got %v", tc.url, err)
		}
	}
	c := telemetry.DefaultConfig()
	if err := yaml.Unmarshal([]byte("video: {url: \"http://127.0.0.1:8090/view\"}"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Video.URL != "http://127.0.0.1:8090/view" || c.Video.Width != 640 {
		t.Fatalf("decoded %+v", c.Video)
	}
}
