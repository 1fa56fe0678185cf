package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/telemetrytest"
)

// fakeRecoverer is a Controller that is also a Recoverer with 3 axes; it
// records what reaches it and answers RecoverErr / JogErr when set.
type fakeRecoverer struct {
	telemetrytest.FakeController
	RecoverErr, JogErr error

	mu       sync.Mutex
	recovers []string // actor + " " + mode
	jogs     [][]float64
	grippers []float64
}

var _ telemetry.Recoverer = (*fakeRecoverer)(nil)

func (f *fakeRecoverer) Recover(_ context.Context, actor, mode string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recovers = append(f.recovers, actor+" "+mode)
	return f.RecoverErr
}

func (f *fakeRecoverer) Jog(actor string, v []float64, gripper float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jogs = append(f.jogs, append([]float64(nil), v...))
	f.grippers = append(f.grippers, gripper)
	return f.JogErr
}

func (f *fakeRecoverer) RecoveryInfo() telemetry.RecoveryInfo {
	return telemetry.RecoveryInfo{Axes: 3, SpeedFraction: 0.25, TimeLimit: 30e9, JogHold: 3e8, RetraceWindow: 5e9}
}

func newRecoverServer(t *testing.T, ctrl telemetry.Controller) *httptest.Server {
	t.Helper()
	cfg := telemetry.DefaultConfig()
	cfg.Video.Width, cfg.Video.Height = 160, 120
	cfg.ICE.Mode = telemetry.ICELoopback
	cfg.Auth = telemetry.AuthConfig{ViewToken: viewTok, ResetToken: resetTok}
	srv, err := telemetry.New(cfg, telemetry.Options{Controller: ctrl})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs
}

// errorOf returns the "error" of a one-line JSON error answer.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if strings.Count(strings.TrimSpace(body), "\n") != 0 || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
		t.Errorf("not a one-line JSON error: %q", body)
	}
	return e.Error
}

// POST /api/recover and /api/jog need the reset scope, check their body
// (400), pass refusals on as 409 with the gate's reason, and reach the
// Recoverer otherwise.
func TestRecoveryRoutes(t *testing.T) {
	refused := errors.New("safety: recovery refused (by web:127.0.0.1 reset): arm_disconnected: arm connection lost: EOF; recovery is for an energy stop: fix the fault, then reset")
	cases := []struct {
		name       string
		path, body string
		token      string
		recoverErr error
		jogErr     error
		want       int
		wantErr    string // in the JSON error
	}{
		{"recover without a token", "/api/recover", `{"mode":"jog"}`, "", nil, nil, 401, "token"},
		{"recover with a view token", "/api/recover", `{"mode":"jog"}`, viewTok, nil, nil, 403, "does not allow"},
		{"recover without a body", "/api/recover", ``, resetTok, nil, nil, 400, `{"mode": "jog"}`},
		{"recover in an unknown mode", "/api/recover", `{"mode":"fly"}`, resetTok, nil, nil, 400, `{"mode": "retrace"}`},
		{"recover refused", "/api/recover", `{"mode":"retrace"}`, resetTok, refused, nil, 409, refused.Error()},
		{"recover", "/api/recover", `{"mode":"retrace"}`, resetTok, nil, nil, 200, ""},
		{"jog without a token", "/api/jog", `{"v":[1,0,0]}`, "", nil, nil, 401, "token"},
		{"jog with a view token", "/api/jog", `{"v":[1,0,0]}`, viewTok, nil, nil, 403, "does not allow"},
		{"jog malformed", "/api/jog", `{"v":`, resetTok, nil, nil, 400, `{"v": [x, y, z, …]`},
		{"jog without v", "/api/jog", `{"gripper":0.5}`, resetTok, nil, nil, 400, `{"v": [x, y, z, …]`},
		{"jog of the wrong length", "/api/jog", `{"v":[1,0]}`, resetTok, nil, nil, 400, "v has 2 components, the arm has 3"},
		{"jog out of range", "/api/jog", `{"v":[1.5,0,-2]}`, resetTok, nil, nil, 400, "v[0] = 1.5, v[2] = -2: each component must be in [-1, 1]"},
		{"jog refused", "/api/jog", `{"v":[1,0,0]}`, resetTok, nil, errors.New("safety: jog refused (by x): the gate is STOPPED, not recovering in jog mode — start a jog recovery first"), 409, "not recovering in jog mode"},
		{"jog", "/api/jog", `{"v":[1,0,-0.5],"gripper":0.25}`, resetTok, nil, nil, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := &fakeRecoverer{RecoverErr: tc.recoverErr, JogErr: tc.jogErr}
			hs := newRecoverServer(t, ctrl)
			code, body := do(t, "POST", hs.URL+tc.path, tc.token, tc.body)
			if code != tc.want {
				t.Fatalf("%d %s, want %d", code, body, tc.want)
			}
			if tc.wantErr != "" {
				if e := errorOf(t, body); !strings.Contains(e, tc.wantErr) {
					t.Fatalf("error %q does not contain %q", e, tc.wantErr)
				}
			}
			ctrl.mu.Lock()
			defer ctrl.mu.Unlock()
			reached := len(ctrl.recovers) + len(ctrl.jogs)
			if wantReach := tc.want == 200 || tc.want == 409; (reached == 1) != wantReach || reached > 1 {
				t.Fatalf("%d calls reached the Recoverer (recovers %v, jogs %v)", reached, ctrl.recovers, ctrl.jogs)
			}
			if tc.name == "recover" && ctrl.recovers[0] != "web:127.0.0.1 reset retrace" {
				t.Errorf("recover call %q", ctrl.recovers[0])
			}
			if tc.name == "jog" && (ctrl.jogs[0][2] != -0.5 || ctrl.grippers[0] != 0.25) {
				t.Errorf("jog call %v gripper %v", ctrl.jogs[0], ctrl.grippers[0])
			}
		})
	}
	// Without a gripper the jog holds it (NaN).
	ctrl := &fakeRecoverer{}
	hs := newRecoverServer(t, ctrl)
	if code, body := do(t, "POST", hs.URL+"/api/jog", resetTok, `{"v":[0,1,0]}`); code != 200 || !math.IsNaN(ctrl.grippers[0]) {
		t.Fatalf("jog without gripper: %d %s, gripper %v", code, body, ctrl.grippers)
	}
}

// GET /api/session says whether this token may use recovery mode; a
// controller without it answers 404 to the recovery routes.
func TestRecoverySession(t *testing.T) {
	hs := newRecoverServer(t, &fakeRecoverer{})
	session := func(hs *httptest.Server, tok string) map[string]any {
		t.Helper()
		code, body := do(t, "GET", hs.URL+"/api/session", tok, "")
		var s struct {
			Recovery map[string]any `json:"recovery"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
			t.Fatalf("session: %d %s", code, body)
		}
		return s.Recovery
	}
	if r := session(hs, viewTok); r["available"] != false {
		t.Errorf("view token: recovery %v, want unavailable", r)
	}
	if r := session(hs, resetTok); r["available"] != true || r["axes"] != 3.0 || r["time_limit_s"] != 30.0 || r["jog_hold_ms"] != 300.0 {
		t.Errorf("reset token: recovery %v", r)
	}
	if code, body := do(t, "GET", hs.URL+"/recovery.js", "", ""); code != 200 || !strings.Contains(body, "/api/jog") {
		t.Errorf("GET /recovery.js: %d", code)
	}
	if _, page := do(t, "GET", hs.URL+"/", "", ""); !strings.Contains(page, `<script src="recovery.js" defer></script>`) || !strings.Contains(page, `id="recovery"`) {
		t.Error("the page does not load recovery.js or has no Recovery panel")
	}
	plain := newRecoverServer(t, &telemetrytest.FakeController{})
	if r := session(plain, resetTok); r["available"] != false {
		t.Errorf("no Recoverer: recovery %v, want unavailable", r)
	}
	for _, p := range []string{"/api/recover", "/api/jog"} {
		if code, body := do(t, "POST", plain.URL+p, resetTok, `{"mode":"jog","v":[0,0,0]}`); code != 404 {
			t.Errorf("%s without a Recoverer: %d %s, want 404", p, code, body)
		}
	}
}

// The recovery metrics exist from the start and follow the gate.
func TestRecoveryMetrics(t *testing.T) {
	m := telemetry.NewMetrics()
	value := func(name, end string) float64 {
		t.Helper()
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, mm := range f.GetMetric() {
				if end == "" {
					return mm.GetGauge().GetValue()
				}
				for _, l := range mm.GetLabel() {
					if l.GetName() == "end" && l.GetValue() == end {
						return mm.GetCounter().GetValue()
					}
				}
			}
		}
		t.Fatalf("no %s{end=%q}", name, end)
		return 0
	}
	for _, end := range []string{"rearmed", "timeout", "stopped", "fault"} {
		if v := value("energyflow_recoveries_total", end); v != 0 {
			t.Errorf("%s: %v at start", end, v)
		}
	}
	m.RecoveryStarted()
	if v := value("energyflow_recovery_active", ""); v != 1 {
		t.Errorf("active %v during recovery", v)
	}
	m.RecoveryEnded("timeout")
	if a, n := value("energyflow_recovery_active", ""), value("energyflow_recoveries_total", "timeout"); a != 0 || n != 1 {
		t.Errorf("after a timeout: active %v, timeouts %v", a, n)
	}
}
