package harness_test

import (
	"bytes"
	"context"
	"image/jpeg"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestBridgeSpeaksTheRegisterMap drives the bridge with the runtime's own
// Modbus client and register map: the map round-trips between Go and the
// Python server, and every command advances the world one step.
func TestBridgeSpeaksTheRegisterMap(t *testing.T) {
	b, root := harnesstest.StartBridge(t, nil)
	cfg := actuators.DefaultConfig()
	cfg.Address = b.Modbus
	cfg.Map = filepath.Join(root, harness.MapFile)
	cfg.Timeout = 2 * time.Second
	arm, err := actuators.Open(cfg, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	ctx := context.Background()
	if err := arm.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var s0, s1 actuators.State
	if err := arm.State(ctx, &s0); err != nil {
		t.Fatal(err)
	}
	if len(s0.Observation) != 39 || len(s0.Position) != 3 {
		t.Fatalf("observation %d values, position %d; want 39 and 3", len(s0.Observation), len(s0.Position))
	}
	for i := 0; i < 3; i++ {
		if s0.Position[i] != s0.Observation[i] {
			t.Fatalf("position[%d]=%v differs from observation[%d]=%v", i, s0.Position[i], i, s0.Observation[i])
		}
	}
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	ep0, err := b.Episode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 1}, Gripper: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := arm.State(ctx, &s1); err != nil {
		t.Fatal(err)
	}
	if !s1.Enabled {
		t.Fatal("enable did not read back")
	}
	if s1.Position[2] <= s0.Position[2] {
		t.Fatalf("hand z %v → %v after 5 upward commands", s0.Position[2], s1.Position[2])
	}
	ep1, err := b.Episode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ep1.Step != ep0.Step+5 {
		t.Fatalf("steps %d → %d, want +5 (one per command)", ep0.Step, ep1.Step)
	}
	if err := arm.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := arm.State(ctx, &s1); err != nil || s1.Enabled {
		t.Fatalf("after halt: enabled=%v err=%v", s1.Enabled, err)
	}
}

// TestBridgeCameraDecodes reads the bridge's MJPEG stream through the camera
// package, as the runtime does.
func TestBridgeCameraDecodes(t *testing.T) {
	b, _ := harnesstest.StartBridge(t, nil)
	cfg := camera.DefaultConfig()
	cfg.Source = "http"
	cfg.URL = b.StreamURL()
	src, err := camera.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var f camera.Frame
	if err := src.Read(ctx, &f); err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(f.Data))
	if err != nil {
		t.Fatalf("frame is not a JPEG: %v", err)
	}
	if img.Bounds().Dx() != 96 || img.Bounds().Dy() != 96 {
		t.Fatalf("frame %v, want 96×96", img.Bounds())
	}
	if age := time.Since(f.Time); age < 0 || age > time.Minute {
		t.Fatalf("capture time %v is %v from now", f.Time, age)
	}
	var rgb camera.RGB
	var dec camera.JPEGDecoder
	if err := camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited); err != nil {
		t.Fatal(err)
	}
	if rgb.Width != 96 || len(rgb.Pix) != 96*96*3 {
		t.Fatalf("RGB %d×%d, %d bytes", rgb.Width, rgb.Height, len(rgb.Pix))
	}
}

// TestBridgeViewForLiveView: with a view size the bridge announces its /view
// URL, which the camera package reads at that size, while /stream keeps the
// policy's size.
func TestBridgeViewForLiveView(t *testing.T) {
	b, _ := harnesstest.StartBridge(t, func(o *harness.BridgeOptions) { o.View = "160x120" })
	if b.View != strings.TrimSuffix(b.StreamURL(), "/stream")+"/view" {
		t.Fatalf("view URL %q, stream %q", b.View, b.StreamURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		url  string
		w, h int
	}{{b.View, 160, 120}, {b.StreamURL(), 96, 96}} {
		cfg := camera.DefaultConfig()
		cfg.Source = "http"
		cfg.URL = tc.url
		src, err := camera.Open(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var f camera.Frame
		var rgb camera.RGB
		var dec camera.JPEGDecoder
		err = src.Read(ctx, &f)
		if err == nil {
			err = camera.ToRGB(&rgb, &f, &dec, camera.RangeLimited)
		}
		src.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if rgb.Width != tc.w || rgb.Height != tc.h {
			t.Fatalf("%s: %d×%d, want %d×%d", tc.url, rgb.Width, rgb.Height, tc.w, tc.h)
		}
	}
}
