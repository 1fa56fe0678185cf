package camera

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestConfigYAMLAndDefaults(t *testing.T) {
	const doc = `
source: v4l2
by_id: usb-Logitech_C920_ABC-video-index0
format: yuyv
width: 320
height: 240
fps: 15
buffers: 3
read_timeout: 1500ms
reconnect_max: 2s
stale_after: 300ms
replay: {dir: testdata/frames, rate: 10, loop: true}
`
	var c Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	if c.ReadTimeout != 1500*time.Millisecond || c.ReconnectMin != 250*time.Millisecond || c.Buffers != 3 || c.Width != 320 {
		t.Errorf("decoded/defaulted config wrong: %+v", c)
	}
	if got := DevicePath(c); got != "/dev/v4l/by-id/usb-Logitech_C920_ABC-video-index0" {
		t.Errorf("DevicePath = %q", got)
	}
}

func TestConfigValidateReportsEveryKey(t *testing.T) {
	c := Config{Source: "v4l2", Device: "video0", Format: "h264", Width: 641, Height: -1,
		Buffers: 99, YUVRange: "tv", ReconnectMin: 3 * time.Second, ReconnectMax: time.Second}
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, key := range []string{"camera.device", "camera.format", "camera.width", "camera.buffers", "camera.yuv_range", "camera.reconnect_max"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error does not mention %s:\n%v", key, err)
		}
	}
	bad := []Config{
		{Source: "http"},
		{Source: "http", URL: "ftp://x/y"},
		{Source: "replay"},
		{Source: "replay", Replay: ReplayConfig{File: "x.avi"}},
		{Source: "replay", Replay: ReplayConfig{Dir: "d", Rate: -1}},
		{Source: "bogus"},
		{Source: "v4l2"},
	}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	good := []Config{
		{Device: "/dev/video0"},
		{URL: "http://127.0.0.1:8081/stream.mjpg"},
		{Replay: ReplayConfig{File: "testdata/clip_160x120.yuyv"}, Width: 160, Height: 120},
	}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestPreprocessValidate(t *testing.T) {
	p := Preprocess{Resize: [2]int{10, 0}, Crop: [2]int{20, 5}, ChannelOrder: "RBG"}
	err := p.Validate()
	for _, key := range []string{"preprocess.resize", "preprocess.crop", "preprocess.channel_order", "preprocess.std[0]"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error does not mention %s: %v", key, err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]PixelFormat{"mjpeg": FormatMJPEG, "yuyv": FormatYUYV} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v", in, got, err)
		}
	}
	if FormatYUYV.String() != "YUYV" || FormatMJPEG.String() != "MJPG" || PixelFormat(1).String() != "0x00000001" {
		t.Error("PixelFormat.String")
	}
	if uint32(FormatYUYV) != 0x56595559 {
		t.Error("YUYV fourcc")
	}
}

func TestV4L2MissingDevice(t *testing.T) {
	_, err := OpenV4L2(Config{Device: "/dev/video-energyflow-missing"}, nil)
	if !errors.Is(err, ErrNoDevice) && !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrNoDevice", err)
	}
	if errors.Is(err, ErrNoDevice) && !strings.Contains(err.Error(), "camera list") {
		t.Errorf("error gives no hint: %v", err)
	}
	_, err = Open(Config{ByID: "usb-none-video-index0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "/dev/v4l/by-id/usb-none-video-index0") {
		t.Errorf("by-id open: %v", err)
	}
}

func TestConfigRange(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want YUVRange
	}{{"", RangeLimited}, {"limited", RangeLimited}, {"full", RangeFull}} {
		if got := (Config{YUVRange: tc.set}).Range(); got != tc.want {
			t.Errorf("yuv_range %q: Range %v, want %v", tc.set, got, tc.want)
		}
	}
}
