package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/telemetrytest"
	"github.com/energyflow/edge/telemetry/vpx"
	"github.com/pion/ice/v2"
	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v3"
	"github.com/prometheus/common/expfmt"
)

const (
	viewTok  = "view-token-for-tests-0123"
	resetTok = "reset-token-for-tests-0123"
)

func newServer(t *testing.T, mut func(*telemetry.Config)) (*telemetry.Server, *telemetrytest.FakeController, *httptest.Server) {
	t.Helper()
	cfg := telemetry.DefaultConfig()
	cfg.Video.Width, cfg.Video.Height = 160, 120
	cfg.ICE.Mode = telemetry.ICELoopback
	cfg.Auth = telemetry.AuthConfig{ViewToken: viewTok, ResetToken: resetTok}
	cfg.MaxViewers = 3
	cfg.StatsInterval = 200 * time.Millisecond
	if mut != nil {
		mut(&cfg)
	}
	ctrl := &telemetrytest.FakeController{}
	srv, err := telemetry.New(cfg, telemetry.Options{Controller: ctrl})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return srv, ctrl, hs
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestAccessControl(t *testing.T) {
	_, ctrl, hs := newServer(t, nil)
	cases := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/", "", 200},
		{"GET", "/app.js", "", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/api/session", "", 401},
		{"GET", "/api/session", "wrong-token-wrong-token", 401},
		{"GET", "/api/session", viewTok, 200},
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", viewTok, 200},
		{"GET", "/api/events", viewTok, 200},
		{"GET", "/api/stats", viewTok, 200},
		{"POST", "/api/offer", "", 401},
		{"POST", "/api/stop", "", 401},
		{"POST", "/api/reset", "", 401},
		{"POST", "/api/reset", viewTok, 403},
		{"POST", "/api/stop", viewTok, 200},
		{"POST", "/api/reset", resetTok, 200},
		{"POST", "/api/stop", resetTok, 200},
		{"GET", "/api/stop", viewTok, 404},
	}
	for _, c := range cases {
		if got, body := do(t, c.method, hs.URL+c.path, c.token, ""); got != c.want {
			t.Errorf("%s %s token=%q: %d, want %d (%s)", c.method, c.path, c.token, got, c.want, body)
		}
	}
	if n := len(ctrl.Stops()); n != 2 {
		t.Errorf("controller saw %d stops, want 2", n)
	}
	if r := ctrl.Resets(); len(r) != 1 || !strings.HasSuffix(r[0].Actor, " reset") {
		t.Errorf("resets %+v", r)
	}
	code, body := do(t, "POST", hs.URL+"/api/stop", viewTok, `{"reason":"arm near the edge\u0007"}`)
	if code != 200 || ctrl.Stops()[2].Reason != "arm near the edge" {
		t.Errorf("stop with reason: %d %s %+v", code, body, ctrl.Stops())
	}
	if code, _ := do(t, "POST", hs.URL+"/api/stop", viewTok, `{"reason":`); code != 400 {
		t.Errorf("malformed stop body: %d", code)
	}
	_, events := do(t, "GET", hs.URL+"/api/events", viewTok, "")
	var evs []map[string]any
	if err := json.Unmarshal([]byte(events), &evs); err != nil || len(evs) < 4 {
		t.Fatalf("events %s: %v", events, err)
	}
}

func TestPublicMetrics(t *testing.T) {
	_, _, hs := newServer(t, func(c *telemetry.Config) { c.Auth.PublicMetrics = true })
	if code, _ := do(t, "GET", hs.URL+"/metrics", "", ""); code != 200 {
		t.Fatalf("public metrics: %d", code)
	}
}

func TestMetricsScrapeParses(t *testing.T) {
	srv, _, hs := newServer(t, nil)
	m := srv.Metrics()
	m.ObserveTick(8*time.Millisecond, 300*time.Microsecond)
	m.ObserveTick(9*time.Millisecond, -200*time.Microsecond)
	m.TickOverrun()
	m.ObserveInference(40 * time.Millisecond)
	m.ObserveEnergy(0.7, 1.5)
	m.SafetyTrip("energy")
	m.SafetyTrip("energy")
	m.SafetyTrip("watchdog")
	m.ObserveModbus("read", 2*time.Millisecond, nil)
	m.ObserveModbus("write", 0, fmt.Errorf("timeout"))
	srv.SubmitFrame(make([]byte, 160*120*3), 160, 120, time.Now())
	srv.SubmitFrame(make([]byte, 5), 160, 120, time.Now())

	code, body := do(t, "GET", hs.URL+"/metrics", viewTok, "")
	if code != 200 {
		t.Fatal(code)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	hist := func(name string) uint64 {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 || f.Metric[0].Histogram == nil {
			t.Fatalf("no histogram %s", name)
		}
		return f.Metric[0].Histogram.GetSampleCount()
	}
	if n := hist("energyflow_tick_duration_seconds"); n != 2 {
		t.Errorf("tick duration count %d", n)
	}
	if n := hist("energyflow_tick_jitter_seconds"); n != 2 {
		t.Errorf("jitter count %d", n)
	}
	if n := hist("energyflow_inference_latency_seconds"); n != 1 {
		t.Errorf("inference count %d", n)
	}
	if v := fams["energyflow_energy_score"].Metric[0].Gauge.GetValue(); v != 0.7 {
		t.Errorf("energy gauge %v", v)
	}
	trips := map[string]float64{}
	for _, mm := range fams["energyflow_safety_trips_total"].Metric {
		trips[mm.Label[0].GetValue()] = mm.Counter.GetValue()
	}
	if trips["energy"] != 2 || trips["watchdog"] != 1 {
		t.Errorf("trips %v", trips)
	}
	if f := fams["energyflow_modbus_errors_total"]; f == nil || f.Metric[0].Counter.GetValue() != 1 {
		t.Errorf("modbus errors %v", f)
	}
	if v := fams["energyflow_telemetry_frames_captured_total"].Metric[0].Counter.GetValue(); v != 2 {
		t.Errorf("frames captured %v", v)
	}
	dropped := map[string]float64{}
	for _, mm := range fams["energyflow_telemetry_frames_dropped_total"].Metric {
		dropped[mm.Label[0].GetValue()] = mm.Counter.GetValue()
	}
	if dropped["invalid"] != 1 {
		t.Errorf("dropped %v", dropped)
	}
	for _, name := range []string{"energyflow_telemetry_frames_encoded_total", "energyflow_telemetry_viewers",
		"energyflow_modbus_round_trip_seconds", "energyflow_tick_overruns_total", "go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("missing %s", name)
		}
	}
}

// client is a Go WebRTC viewer (pion) for tests without a browser.
type client struct {
	pc     *webrtc.PeerConnection
	frames chan []byte // first RTP payloads of each frame
	msgs   chan string
}

func newClient(t *testing.T) (*client, string) {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetInterfaceFilter(func(n string) bool { return n == "lo" })
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	var me webrtc.MediaEngine
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(&me))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	c := &client{pc: pc, frames: make(chan []byte, 256), msgs: make(chan string, 1024)}
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	neg, id := true, uint16(0)
	dc, err := pc.CreateDataChannel("telemetry", &webrtc.DataChannelInit{Negotiated: &neg, ID: &id})
	if err != nil {
		t.Fatal(err)
	}
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		select {
		case c.msgs <- string(m.Data):
		default:
		}
	})
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		start, keyed := true, false
		for {
			p, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			if start && len(p.Payload) > 0 {
				// Like a browser: ask for a keyframe while frames cannot be decoded.
				if _, _, ok := vpx.KeyframeInfo(vp8Frame(p.Payload)); ok {
					keyed = true
				} else if !keyed {
					pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(tr.SSRC())}})
				}
				select {
				case c.frames <- append([]byte(nil), p.Payload...):
				default:
				}
			}
			start = p.Marker
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	done := webrtc.GatheringCompletePromise(pc)
	pc.SetLocalDescription(offer)
	<-done
	return c, pc.LocalDescription().SDP
}

func offerBody(sdp string) string {
	b, _ := json.Marshal(map[string]string{"type": "offer", "sdp": sdp})
	return string(b)
}

// vp8Frame strips the VP8 payload descriptor (RFC 7741) off the first
// packet of a frame.
func vp8Frame(p []byte) []byte {
	if len(p) < 1 {
		return nil
	}
	i := 1
	if p[0]&0x80 != 0 {
		x := p[1]
		i = 2
		if x&0x80 != 0 { // picture ID
			if p[i]&0x80 != 0 {
				i += 2
			} else {
				i++
			}
		}
		if x&0x40 != 0 {
			i++
		}
		if x&0x30 != 0 {
			i++
		}
	}
	return p[i:]
}

// TestGoViewers connects two pion viewers: each gets a keyframe first (on
// join), of the configured size, and parsable data-channel messages.
func TestGoViewers(t *testing.T) {
	srv, _, hs := newServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &telemetrytest.Source{Width: 320, Height: 240, FPS: 15, ControlRate: 20} // scaled to 160×120
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); src.Run(ctx, srv) }()
	defer wg.Wait()
	defer cancel()

	for i := 0; i < 2; i++ {
		c, sdp := newClient(t)
		code, body := do(t, "POST", hs.URL+"/api/offer", viewTok, offerBody(sdp))
		if code != 200 {
			t.Fatalf("offer: %d %s", code, body)
		}
		var ans webrtc.SessionDescription
		if err := json.Unmarshal([]byte(body), &ans); err != nil || ans.Type != webrtc.SDPTypeAnswer {
			t.Fatalf("answer %s: %v", body, err)
		}
		if err := c.pc.SetRemoteDescription(ans); err != nil {
			t.Fatal(err)
		}
		// The viewer's track starts at a keyframe forced on join; if that
		// one races the viewer's SRTP setup, its PLI brings the next one,
		// long before the 10 s keyframe interval.
		gotKey := false
		for n := 0; n < 10 && !gotKey; n++ {
			select {
			case p := <-c.frames:
				w, h, ok := vpx.KeyframeInfo(vp8Frame(p))
				if ok && (w != 160 || h != 120) {
					t.Fatalf("viewer %d: keyframe %dx%d, want 160x120", i, w, h)
				}
				gotKey = ok
			case <-time.After(15 * time.Second):
				t.Fatalf("viewer %d: no video", i)
			}
		}
		if !gotKey {
			t.Fatalf("viewer %d: no keyframe among the first 10 frames", i)
		}
		types := map[string]int{}
		deadline := time.After(10 * time.Second)
		for types["hello"] == 0 || types["sample"] < 3 || types["stats"] == 0 {
			select {
			case m := <-c.msgs:
				var v map[string]any
				if err := json.Unmarshal([]byte(m), &v); err != nil {
					t.Fatalf("message %q: %v", m, err)
				}
				types[v["type"].(string)]++
			case <-deadline:
				t.Fatalf("viewer %d: messages %v", i, types)
			}
		}
	}
	if n := srv.Viewers(); n != 2 {
		t.Errorf("viewers %d, want 2", n)
	}
	if srv.EncodeStats().Frames == 0 {
		t.Error("no frames encoded")
	}
}

func TestOfferLimits(t *testing.T) {
	srv, _, hs := newServer(t, func(c *telemetry.Config) { c.MaxViewers = 1; c.MaxOfferBytes = 8192 })
	_ = srv
	big := offerBody("v=0\r\n" + strings.Repeat("a=x\r\n", 4000))
	if code, _ := do(t, "POST", hs.URL+"/api/offer", viewTok, big); code != 413 {
		t.Errorf("oversized offer: %d, want 413", code)
	}
	_, sdp := newClient(t)
	if code, body := do(t, "POST", hs.URL+"/api/offer", viewTok, offerBody(sdp)); code != 200 {
		t.Fatalf("first viewer: %d %s", code, body)
	}
	_, sdp2 := newClient(t)
	if code, _ := do(t, "POST", hs.URL+"/api/offer", viewTok, offerBody(sdp2)); code != 503 {
		t.Errorf("viewer beyond max_viewers: %d, want 503", code)
	}
}

// TestMalformedOffers sends broken signaling requests, hand-written and
// mutated from a real offer: every one is answered 400 (or, for a mutation
// that is still a valid offer, 200) — never 5xx, never a panic.
func TestMalformedOffers(t *testing.T) {
	_, _, hs := newServer(t, func(c *telemetry.Config) { c.MaxViewers = 64 })
	_, valid := newClient(t)
	audioOnly := "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n"
	vp9Only := strings.ReplaceAll(strings.ReplaceAll(valid, "VP8/90000", "VP9/90000"), "vp8", "vp9")
	fixed := []string{
		"", "{", "null", "[]", "42", `"offer"`, `{"type":"offer"}`, `{"type":"answer","sdp":"v=0"}`,
		`{"type":1,"sdp":2}`, `{"type":"offer","sdp":"garbage"}`, `{"type":"offer","sdp":"v=0"}`,
		`{"type":"offer","sdp":"v=0\r\n"}`, offerBody(audioOnly), offerBody(vp9Only),
		offerBody(valid) + `{"type":"offer"}`, offerBody("v=0\r\n\x00"), `{"type":"offer","sdp":"\xff\xfe"}`,
		offerBody(strings.Replace(valid, "m=video 9", "m=video x", 1)),
		offerBody(strings.ReplaceAll(valid, "a=fingerprint", "a=fingerprunt")),
		offerBody(strings.ReplaceAll(valid, "a=ice-ufrag", "a=ice-ufrug")),
	}
	for i, body := range fixed {
		if code, resp := do(t, "POST", hs.URL+"/api/offer", viewTok, body); code != 400 {
			t.Errorf("case %d body %.80q: %d, want 400 (%.100s)", i, body, code, resp)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 60; i++ {
		s := []byte(valid)
		switch i % 3 {
		case 0: // truncate
			s = s[:rng.Intn(len(s))]
		case 1: // flip bytes
			for j := 0; j < 5; j++ {
				s[rng.Intn(len(s))] = byte(rng.Intn(256))
			}
		case 2: // drop a line
			lines := strings.Split(string(s), "\r\n")
			k := rng.Intn(len(lines))
			s = []byte(strings.Join(append(lines[:k:k], lines[k+1:]...), "\r\n"))
		}
		code, resp := do(t, "POST", hs.URL+"/api/offer", viewTok, offerBody(string(s)))
		if code != 400 && code != 200 {
			t.Errorf("mutation %d: %d (%s)", i, code, resp)
		}
	}
}

func TestNoGPUAnswer(t *testing.T) {
	_, _, hs := newServer(t, nil)
	_, body := do(t, "GET", hs.URL+"/api/stats", viewTok, "")
	var st struct {
		GPU       []any  `json:"gpu"`
		GPUSource string `json:"gpu_source"`
		GPUError  string `json:"gpu_error"`
		CPU       struct {
			Cores int `json:"cores"`
		} `json:"cpu"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.GPUSource != "none" || len(st.GPU) != 0 || !strings.Contains(st.GPUError, "no GPU") || st.CPU.Cores == 0 {
		t.Fatalf("stats %s", body)
	}
}
