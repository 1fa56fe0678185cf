package telemetry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/energyflow/edge/telemetry"
	"github.com/energyflow/edge/telemetry/telemetrytest"
)

// newEpisodeServer is newServer with the given controller and episode
// control (nil: none).
func newEpisodeServer(t *testing.T, ctrl *telemetrytest.FakeController, ep telemetry.EpisodeControl) *httptest.Server {
	t.Helper()
	cfg := telemetry.DefaultConfig()
	cfg.Video.Width, cfg.Video.Height = 160, 120
	cfg.ICE.Mode = telemetry.ICELoopback
	cfg.Auth = telemetry.AuthConfig{ViewToken: viewTok, ResetToken: resetTok}
	srv, err := telemetry.New(cfg, telemetry.Options{Controller: ctrl, Episodes: ep})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs
}

// jsonError returns the "error" of a one-line JSON error answer.
func jsonError(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if strings.Count(strings.TrimSpace(body), "\n") != 0 || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
		t.Errorf("not a one-line JSON error: %q", body)
	}
	return e.Error
}

type episodeAnswer struct {
	telemetry.EpisodeInfo
	Levels []string `json:"levels"`
}

func TestEpisodeRoutes(t *testing.T) {
	ctrl := &telemetrytest.FakeController{}
	ep := &telemetrytest.FakeEpisodes{Controller: ctrl}
	hs := newEpisodeServer(t, ctrl, ep)
	cases := []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/api/episode", "", "", 401},
		{"POST", "/api/episode", "", `{"level":"L"}`, 401},
		{"POST", "/api/episode", viewTok, `{"level":"L"}`, 403},
		{"POST", "/api/episode/level", "", `{"level":"S"}`, 401},
		{"POST", "/api/episode/level", viewTok, `{"level":"S"}`, 403},
		{"GET", "/api/episode/level", viewTok, "", 404},
		{"POST", "/api/episode", resetTok, `{"level":"XL"}`, 400},
		{"POST", "/api/episode", resetTok, `{"level":`, 400},
		{"POST", "/api/episode/level", resetTok, `{}`, 400}, // the level is required here
		{"POST", "/api/episode/level", resetTok, `{"level":"S","pad":"` + strings.Repeat("x", 5000) + `"}`, 413},
	}
	for _, c := range cases {
		if got, body := do(t, c.method, hs.URL+c.path, c.token, c.body); got != c.want {
			t.Errorf("%s %s token=%q body=%.20q: %d, want %d (%s)", c.method, c.path, c.token, c.body, got, c.want, body)
		}
	}
	if n, m := len(ep.NewEpisodes()), len(ep.SetLevels()); n != 0 || m != 0 {
		t.Fatalf("refused requests reached the control: %d new episodes, %d levels", n, m)
	}
	_, body := do(t, "POST", hs.URL+"/api/episode", resetTok, `{"level":"XL"}`)
	if msg := jsonError(t, body); !strings.Contains(msg, `"XL"`) || !strings.Contains(msg, "0, S, M, L") {
		t.Errorf("bad level answer %q: want the level and the valid ones", msg)
	}

	// The session tells the page that there is episode control, and the levels.
	_, body = do(t, "GET", hs.URL+"/api/session", viewTok, "")
	var sess struct {
		Control bool     `json:"episode_control"`
		Levels  []string `json:"episode_levels"`
	}
	if err := json.Unmarshal([]byte(body), &sess); err != nil || !sess.Control || strings.Join(sess.Levels, ",") != "0,S,M,L" {
		t.Errorf("session %s: %v", body, err)
	}

	get := func() episodeAnswer {
		t.Helper()
		code, body := do(t, "GET", hs.URL+"/api/episode", viewTok, "")
		var a episodeAnswer
		if err := json.Unmarshal([]byte(body), &a); code != 200 || err != nil {
			t.Fatalf("GET /api/episode: %d %s %v", code, body, err)
		}
		return a
	}
	if a := get(); a.Level != "0" || a.Seed != 1 || a.Episode != 1 || a.PendingLevel != "" || strings.Join(a.Levels, ",") != "0,S,M,L" {
		t.Errorf("first episode %+v", a)
	}

	// A new episode at L, now; the stop is re-armed.
	ctrl.Stop(t.Context(), "test", "energy stop")
	code, body := do(t, "POST", hs.URL+"/api/episode", resetTok, `{"level":"L"}`)
	var a episodeAnswer
	if err := json.Unmarshal([]byte(body), &a); code != 200 || err != nil || a.Level != "L" || a.Episode != 2 || a.Seed != 2 {
		t.Errorf("POST /api/episode L: %d %s %v", code, body, err)
	}
	if st, _ := ctrl.State(); st != telemetry.StateRunning {
		t.Errorf("state after a new episode: %s", st)
	}
	// The next episodes at S (levels match case-insensitively); a new
	// episode without a level takes it.
	if code, body := do(t, "POST", hs.URL+"/api/episode/level", resetTok, `{"level":"s"}`); code != 200 || !strings.Contains(body, `"pending_level":"S"`) {
		t.Errorf("POST /api/episode/level s: %d %s", code, body)
	}
	if a := get(); a.Level != "L" || a.PendingLevel != "S" {
		t.Errorf("after SetLevel: %+v", a)
	}
	if code, body := do(t, "POST", hs.URL+"/api/episode", resetTok, ""); code != 200 || !strings.Contains(body, `"level":"S"`) {
		t.Errorf("POST /api/episode without a level: %d %s", code, body)
	}
	news, sets := ep.NewEpisodes(), ep.SetLevels()
	if len(news) != 2 || news[0].Level != "L" || news[1].Level != "" || !strings.HasSuffix(news[0].Actor, " reset") {
		t.Errorf("new episodes %+v", news)
	}
	if len(sets) != 1 || sets[0].Level != "S" || !strings.HasPrefix(sets[0].Actor, "web:") {
		t.Errorf("levels %+v", sets)
	}
	_, events := do(t, "GET", hs.URL+"/api/events", viewTok, "")
	if !strings.Contains(events, "new episode 2 at level L (seed 2)") || !strings.Contains(events, "next episodes at level S") {
		t.Errorf("events %s", events)
	}
}

func TestEpisodeRoutesWithoutControl(t *testing.T) {
	hs := newEpisodeServer(t, &telemetrytest.FakeController{}, nil)
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/api/episode", viewTok},
		{"POST", "/api/episode", resetTok},
		{"POST", "/api/episode/level", resetTok},
	} {
		code, body := do(t, c.method, hs.URL+c.path, c.token, `{"level":"L"}`)
		if code != 404 || jsonError(t, body) != "this robot has no episode control" {
			t.Errorf("%s %s without control: %d %s", c.method, c.path, code, body)
		}
	}
	if code, _ := do(t, "GET", hs.URL+"/episode.js", "", ""); code != 200 {
		t.Errorf("GET /episode.js: %d", code)
	}
	// Scopes are checked first.
	if code, _ := do(t, "POST", hs.URL+"/api/episode", viewTok, ""); code != 403 {
		t.Errorf("POST /api/episode with a view token, no control: %d, want 403", code)
	}
	_, body := do(t, "GET", hs.URL+"/api/session", viewTok, "")
	if !strings.Contains(body, `"episode_control":false`) {
		t.Errorf("session without control: %s", body)
	}
}

func TestEpisodeControlErrors(t *testing.T) {
	ep := &telemetrytest.FakeEpisodes{Err: errors.New("sim: new episode: bridge at 127.0.0.1:9 does not answer\n— is `energyflow sim` still running?")}
	hs := newEpisodeServer(t, &telemetrytest.FakeController{}, ep)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/episode", ""},
		{"POST", "/api/episode", `{"level":"M"}`},
		{"POST", "/api/episode/level", `{"level":"M"}`},
	} {
		code, body := do(t, c.method, hs.URL+c.path, resetTok, c.body)
		if want := "sim: new episode: bridge at 127.0.0.1:9 does not answer — is `energyflow sim` still running?"; code != 409 || jsonError(t, body) != want {
			t.Errorf("%s %s: %d %s, want 409 %q", c.method, c.path, code, body, want)
		}
	}
	if n := len(ep.NewEpisodes()); n != 1 {
		t.Errorf("control saw %d new episodes, want 1", n)
	}
}

// The page shows a refused reset's answer as it is: the gate's reason, once,
// on one line.
func TestResetRefusalCarriesReason(t *testing.T) {
	errRefused := errors.New("safety: reset refused")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w (by web:127.0.0.1 reset): energy: state_energy score 5.2 vs threshold 3.1: still above the threshold — move the scene back toward the demonstrations", errRefused),
			"safety: reset refused (by web:127.0.0.1 reset): energy: state_energy score 5.2 vs threshold 3.1: still above the threshold — move the scene back toward the demonstrations"},
		{errors.New("runtime: not ready yet\n(arm, engines or camera not live)"), "reset refused: runtime: not ready yet (arm, engines or camera not live)"},
	} {
		hs := newEpisodeServer(t, &telemetrytest.FakeController{ResetErr: c.err}, nil)
		code, body := do(t, "POST", hs.URL+"/api/reset", resetTok, "")
		if got := jsonError(t, body); code != 409 || got != c.want {
			t.Errorf("refused reset: %d %q, want 409 %q", code, got, c.want)
		}
	}
}
