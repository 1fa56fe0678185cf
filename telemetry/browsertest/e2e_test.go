package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/telemetrytest"
)

// requireBrowser skips (locally) or fails (CI) when the browser test cannot
// run here.
func requireBrowser(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		missing = append(missing, "/usr/bin/chromium (apt-get install chromium)")
	}
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		missing = append(missing, "telemetry/browsertest/node_modules/playwright-core (run scripts/deps.sh)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "browser test needs " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// artifactDir is build/artifacts at the repository root (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "build", "artifacts")
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 18)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io.ReadFull(f, b)
	return fmt.Sprintf("%x", b)
}

// fixedStages gives the page's Machine panel a stages row: e2e.mjs expects
// "decode 1.2/1.9 · sample 48/61 (2.4/step)".
type fixedStages struct{}

func (fixedStages) StageLatencies() []telemetry.StageLatency {
	return []telemetry.StageLatency{
		{Stage: "camera_decode", Count: 30, P50: 1200 * time.Microsecond, P90: 1900 * time.Microsecond},
		{Stage: "sample", Count: 4, P50: 48 * time.Millisecond, P90: 61 * time.Millisecond},
		{Stage: "sample_step", Count: 4, P50: 2400 * time.Microsecond, P90: 3050 * time.Microsecond},
	}
}

type harness struct {
	srv    *telemetry.Server
	ctrl   *telemetrytest.FakeController
	eps    *telemetrytest.FakeEpisodes
	src    *telemetrytest.Source
	url    string
	cancel context.CancelFunc
	done   chan struct{}
}

func startHarness(t *testing.T, w, h, fps int) *harness {
	t.Helper()
	cfg := telemetry.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Video.Width, cfg.Video.Height, cfg.Video.FPS = w, h, fps
	cfg.ICE.Mode = telemetry.ICELoopback
	cfg.Auth = telemetry.AuthConfig{ViewToken: randomToken(t), ResetToken: randomToken(t)}
	cfg.StatsInterval = 500 * time.Millisecond
	// The robot refuses every reset as the gate does while the arm stands
	// out of distribution; a new episode re-arms it.
	ctrl := &telemetrytest.FakeController{ResetErr: errRefused}
	eps := &telemetrytest.FakeEpisodes{Controller: ctrl}
	srv, err := telemetry.New(cfg, telemetry.Options{Controller: ctrl, Episodes: eps, Stages: fixedStages{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &harness{srv: srv, ctrl: ctrl, eps: eps, url: "http://" + ln.Addr().String() + "/", cancel: cancel, done: make(chan struct{})}
	hs.src = &telemetrytest.Source{Width: w, Height: h, FPS: fps, ControlRate: 20, Controller: ctrl}
	go func() { srv.Serve(ctx, ln) }()
	go func() { hs.src.Run(ctx, srv); close(hs.done) }()
	t.Cleanup(func() {
		cancel()
		<-hs.done
		srv.Close()
	})
	return hs
}

func (hs *harness) nodeEnv(t *testing.T, w, h int, mode string) []string {
	bs, x0, y0 := telemetrytest.StampGeometry(w, h)
	stamp, _ := json.Marshal(map[string]int{"bs": bs, "x0": x0, "y0": y0})
	// Overlay layout for 320×240 (scale 1): the energy bar spans
	// x 8…150, y 19…27 (see layoutFor; TestOverlayLayout pins it). The
	// synthetic energy stays below a third of the bar: its left end is
	// green, its right end the grey bar background.
	probes := `[{"name":"bar-fill","x":11,"y":23,"expect":"green"},{"name":"bar-background","x":146,"y":23,"expect":"gray"}]`
	tok := hs.srv.Tokens()
	return append(os.Environ(),
		"EF_URL="+hs.url, "EF_VIEW_TOKEN="+tok.View, "EF_RESET_TOKEN="+tok.Reset,
		fmt.Sprintf("EF_WIDTH=%d", w), fmt.Sprintf("EF_HEIGHT=%d", h),
		"EF_PROBES="+probes, "EF_STAMP="+string(stamp), "EF_ARTIFACTS="+artifactDir(t), "EF_MODE="+mode)
}

// errRefused is the harness's answer to every reset, worded as the safety
// gate's (safety.ErrResetRefused and the cause).
var errRefused = errors.New("safety: reset refused (by web:127.0.0.1 reset): energy: state_energy score 5.2 vs threshold 3.1: still above the threshold — move the scene back toward the demonstrations")

// TestBrowserEndToEnd drives the viewer page in Chromium: refused without a
// token; VP8 frames of the configured size decoded; data-channel messages
// parse; the overlay is in the decoded pixels; RESET refused to a view
// token; STOP reaches the controller; with the reset token a refused reset
// shows the gate's reason and what to do, and "New episode" and "Next
// episodes at this level" reach the episode control. Leaves
// build/artifacts/telemetry-e2e.png and telemetry-e2e-refused.png.
func TestBrowserEndToEnd(t *testing.T) {
	requireBrowser(t)
	const w, h = 320, 240
	hs := startHarness(t, w, h, 15)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "e2e.mjs")
	cmd.Env = hs.nodeEnv(t, w, h, "e2e")
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	result := lastResult(string(out))
	t.Logf("result: %s", result)
	if err != nil {
		t.Fatalf("e2e.mjs: %v", err)
	}
	var r struct {
		OK bool `json:"ok"`
	}
	if json.Unmarshal([]byte(result), &r) != nil || !r.OK {
		t.Fatalf("e2e.mjs did not report success: %s", result)
	}
	stops := hs.ctrl.Stops()
	if len(stops) != 2 { // the page's STOP button, then a second stop 2.2 s later (event times)
		t.Fatalf("controller got %d stops, want 2", len(stops))
	}
	if !strings.HasPrefix(stops[0].Actor, "web:127.0.0.1 view") || stops[0].Reason == "" {
		t.Errorf("stop call %+v: want actor web:127.0.0.1 view and a reason", stops[0])
	}
	if r := hs.ctrl.Resets(); len(r) != 1 || !strings.HasPrefix(r[0].Actor, "web:127.0.0.1 reset") {
		t.Errorf("resets %+v: want one, the reset token's RESET click (a view token must not reach Reset)", r)
	}
	if n := hs.eps.NewEpisodes(); len(n) != 1 || n[0].Level != "L" || !strings.HasPrefix(n[0].Actor, "web:127.0.0.1 reset") {
		t.Errorf("new episodes %+v: want one at level L from the reset token's page", n)
	}
	if l := hs.eps.SetLevels(); len(l) != 1 || l[0].Level != "S" {
		t.Errorf("level changes %+v: want one to S", l)
	}
	for _, f := range []string{"telemetry-e2e.png", "telemetry-e2e-refused.png"} {
		if _, err := os.Stat(filepath.Join(artifactDir(t), f)); err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}
}

func lastResult(out string) string {
	res := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "RESULT ") {
			res = strings.TrimPrefix(l, "RESULT ")
		}
	}
	return res
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBrowserBenchmark measures, at 640×480 and 15 fps on loopback, the
// encode time per frame, this process's CPU (encoder, pion, synthetic
// source) with one and with four Chromium viewers, and the glass-to-glass
// delay: the source stamps a frame counter into each frame, the page reads
// it back from the decoded video in requestVideoFrameCallback, and the
// delay is the browser's clock at that moment minus the submit time.
// Run with EF_BENCH=1 (make telemetry-bench).
func TestBrowserBenchmark(t *testing.T) {
	if os.Getenv("EF_BENCH") == "" {
		t.Skip("set EF_BENCH=1 to run the live-view benchmark")
	}
	requireBrowser(t)
	const w, h, fps = 640, 480, 15
	hs := startHarness(t, w, h, fps)
	window := 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "e2e.mjs")
	cmd.Env = append(hs.nodeEnv(t, w, h, "bench"), fmt.Sprintf("EF_BENCH_MS=%d", window.Milliseconds()))
	cmd.Stderr = testWriter{t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var table []string
	var cpu0 time.Duration
	var wall0 time.Time
	var enc0 uint64
	var drop0 map[string]float64
	var sd0, sn0 float64
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "READY "):
			cpu0, wall0 = cpuTime(), time.Now()
			enc0 = encodedFrames(hs.srv)
			drop0 = dropped(t, hs.srv)
			sd0, sn0 = sendDelay(t, hs.srv)
		case strings.HasPrefix(line, "DONE "):
			cpu, wall := cpuTime()-cpu0, time.Since(wall0)
			var ph struct {
				Viewers    int          `json:"viewers"`
				Readings   [][2]float64 `json:"readings"`
				DecodedFPS []float64    `json:"decodedFps"`
			}
			if err := json.Unmarshal([]byte(strings.SplitN(line, " ", 3)[2]), &ph); err != nil {
				t.Fatal(err)
			}
			var delays []float64
			seen := map[uint16]bool{}
			for _, r := range ph.Readings {
				c := uint16(r[0])
				if seen[c] {
					continue
				}
				seen[c] = true
				if ts, ok := hs.src.FrameTime(c); ok {
					d := r[1] - float64(ts.UnixNano())/1e6
					if d > 0 && d < 5000 {
						delays = append(delays, d)
					}
				}
			}
			sort.Float64s(delays)
			st := hs.srv.EncodeStats()
			pct := func(p float64) float64 {
				if len(delays) == 0 {
					return -1
				}
				return delays[min(len(delays)-1, int(p*float64(len(delays))))]
			}
			drop1 := dropped(t, hs.srv)
			sd1, sn1 := sendDelay(t, hs.srv)
			row := fmt.Sprintf("| %d | %.2f / %.2f | %.1f %% | %.1f (dropped busy %.0f, rate %.0f) | %v | %.1f ms | %.0f / %.0f ms (n=%d) |",
				ph.Viewers, ms(st.MedianWall), ms(st.MedianCPU), 100*cpu.Seconds()/wall.Seconds(),
				float64(encodedFrames(hs.srv)-enc0)/wall.Seconds(), drop1["busy"]-drop0["busy"], drop1["rate"]-drop0["rate"], ph.DecodedFPS,
				1000*(sd1-sd0)/max(1, sn1-sn0), pct(0.5), pct(0.95), len(delays))
			table = append(table, row)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("e2e.mjs bench: %v", err)
	}
	t.Logf("\n| viewers | encode median ms (wall / thread CPU) | process CPU (1 core = 100 %%) | encoded fps | decoded fps per viewer | capture→sent mean (server part) | glass-to-glass median / p95 |\n|---|---|---|---|---|---|---|\n%s",
		strings.Join(table, "\n"))
}

func encodedFrames(s *telemetry.Server) uint64 { return s.EncodeStats().Frames }

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// dropped returns frames_dropped_total by reason.
func dropped(t *testing.T, s *telemetry.Server) map[string]float64 {
	fams, err := s.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "energyflow_telemetry_frames_dropped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// sendDelay returns the sum and count of telemetry_send_delay_seconds.
func sendDelay(t *testing.T, s *telemetry.Server) (sum, count float64) {
	fams, err := s.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "energyflow_telemetry_send_delay_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), float64(h.GetSampleCount())
		}
	}
	return 0, 0
}
