package telemetry

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"
)

//go:embed web
var webFS embed.FS

// routes builds the HTTP handler:
//
//	GET  /                 the viewer page (and its .js/.css), no token
//	GET  /healthz          "ok", no token
//	GET  /api/session      scope and video settings            view
//	POST /api/offer        SDP offer → SDP answer (JSON)       view
//	POST /api/stop         {"reason"} → Controller.Stop        view
//	POST /api/reset        Controller.Reset                    reset
//	GET  /api/events       recent safety events                view
//	GET  /api/stats        CPU/GPU/video statistics            view
//	GET  /api/episode      episode, pending level, levels      view
//	POST /api/episode      {"level"} (optional) → NewEpisode   reset
//	POST /api/episode/level  {"level"} → SetLevel              reset
//	POST /api/recover      {"mode"} → Recoverer.Recover        reset
//	POST /api/jog          {"v", "gripper"} → Recoverer.Jog    reset
//	GET  /metrics          Prometheus text format              view (or public)
//
// The episode routes answer 404 without Options.Episodes (a real robot),
// the recovery routes without a Controller that is a Recoverer.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFS, "web")
	files := http.FileServer(http.FS(static))
	mux.Handle("GET /", files)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /api/session", s.auth(ScopeView, http.HandlerFunc(s.handleSession)))
	mux.Handle("POST /api/offer", s.auth(ScopeView, http.HandlerFunc(s.handleOffer)))
	mux.Handle("POST /api/stop", s.auth(ScopeView, http.HandlerFunc(s.handleStop)))
	mux.Handle("POST /api/reset", s.auth(ScopeReset, http.HandlerFunc(s.handleReset)))
	mux.Handle("GET /api/events", s.auth(ScopeView, http.HandlerFunc(s.handleEvents)))
	mux.Handle("GET /api/stats", s.auth(ScopeView, http.HandlerFunc(s.handleStats)))
	mux.Handle("GET /api/episode", s.auth(ScopeView, http.HandlerFunc(s.handleEpisode)))
	mux.Handle("POST /api/episode", s.auth(ScopeReset, http.HandlerFunc(s.handleNewEpisode)))
	mux.Handle("POST /api/episode/level", s.auth(ScopeReset, http.HandlerFunc(s.handleEpisodeLevel)))
	mux.Handle("POST /api/recover", s.auth(ScopeReset, http.HandlerFunc(s.handleRecover)))
	mux.Handle("POST /api/jog", s.auth(ScopeReset, http.HandlerFunc(s.handleJog)))
	if s.cfg.Auth.PublicMetrics {
		mux.Handle("GET /metrics", s.metrics.Handler())
	} else {
		mux.Handle("GET /metrics", s.auth(ScopeView, s.metrics.Handler()))
	}
	return s.guard(mux)
}

// guard adds security headers and turns a panic into a 500.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				httpError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'")
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

type scopeKey struct{}

// auth refuses requests whose bearer token does not reach need.
func (s *Server) auth(need Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := s.tokens.Scope(bearer(r))
		switch {
		case got == ScopeNone:
			s.metrics.authFailures.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="energyflow"`)
			httpError(w, http.StatusUnauthorized, "a valid token is required (open the page as /#token=…)")
			return
		case got < need:
			s.metrics.authFailures.Inc()
			httpError(w, http.StatusForbidden, "this token does not allow "+r.URL.Path)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, got)))
	})
}

func scopeOf(r *http.Request) Scope {
	s, _ := r.Context().Value(scopeKey{}).(Scope)
	return s
}

// actor names the requester for the controller's log.
func actor(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "web:" + host + " " + scopeOf(r).String()
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b := appendString([]byte(`{"error":`), msg)
	w.Write(append(b, "}\n"...))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// readBody reads at most limit bytes; it answers 413 or 400 itself.
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			httpError(w, http.StatusRequestEntityTooLarge, "request body too large")
		} else {
			httpError(w, http.StatusBadRequest, "cannot read request body")
		}
		return nil, false
	}
	return b, true
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	writeJSON(w, map[string]any{
		"scope": sc.String(), "can_reset": sc >= ScopeReset,
		"video":       map[string]int{"width": s.cfg.Video.Width, "height": s.cfg.Video.Height, "fps": s.cfg.Video.FPS},
		"max_viewers": s.cfg.MaxViewers, "viewers": s.Viewers(),
		"episode_control": s.episodes != nil, "episode_levels": s.episodeLevels(),
		"recovery": s.recoverySession(sc),
	})
}

func (s *Server) handleOffer(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, s.cfg.MaxOfferBytes)
	if !ok {
		return
	}
	offer, err := parseOffer(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ICE.GatherTimeout+2*time.Second)
	defer cancel()
	ans, err := s.answer(ctx, offer, r.RemoteAddr, scopeOf(r))
	switch {
	case errors.Is(err, errBadOffer):
		httpError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, errFull):
		httpError(w, http.StatusServiceUnavailable, "too many viewers (max_viewers)")
		return
	case err != nil:
		s.log.Warn("answer failed", "err", err)
		httpError(w, http.StatusInternalServerError, "could not answer the offer")
		return
	}
	writeJSON(w, offerRequest{Type: "answer", SDP: ans.SDP})
}

// cleanReason keeps a short, printable reason.
func cleanReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if len(s) > 120 {
		s = s[:120]
	}
	return strings.TrimSpace(s)
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, 4096)
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			httpError(w, http.StatusBadRequest, "body must be JSON {\"reason\": \"…\"}")
			return
		}
	}
	reason := cleanReason(req.Reason)
	if reason == "" {
		reason = "operator stop"
	}
	if s.ctrl == nil {
		httpError(w, http.StatusServiceUnavailable, "no controller attached")
		return
	}
	who := actor(r)
	// The stop must go through even if the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	err := s.ctrl.Stop(ctx, who, reason)
	ev := Event{Kind: "stop", Reason: reason, Actor: who}
	if err != nil {
		ev.Reason += " (failed: " + err.Error() + ")"
	}
	s.PublishEvent(ev)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "stop failed: "+err.Error())
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	if _, ok := readBody(w, r, 4096); !ok {
		return
	}
	if s.ctrl == nil {
		httpError(w, http.StatusServiceUnavailable, "no controller attached")
		return
	}
	who := actor(r)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	err := s.ctrl.Reset(ctx, who)
	ev := Event{Kind: "reset", Reason: "operator reset", Actor: who}
	if err != nil {
		ev.Reason += " (refused: " + err.Error() + ")"
	}
	s.PublishEvent(ev)
	if err != nil {
		// The gate's refusal names its cause with a hint: pass it on whole,
		// on one line, for the page to show.
		msg := oneLine(err)
		if !strings.Contains(msg, "reset refused") {
			msg = "reset refused: " + msg
		}
		httpError(w, http.StatusConflict, msg)
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(s.appendEvents(nil), '\n'))
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.readStats())
}

// oneLine is err's message on one line, for a JSON answer the page shows.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// episodeTimeout bounds NewEpisode: a new scene, and the arm moving again.
const episodeTimeout = 20 * time.Second

// episodeView is the answer of GET and POST /api/episode.
type episodeView struct {
	EpisodeInfo
	Levels []string `json:"levels"`
}

func (s *Server) episodeLevels() []string {
	if s.episodes == nil {
		return nil
	}
	return s.episodes.Levels()
}

// hasEpisodes answers 404 itself when the robot has no episode control.
func (s *Server) hasEpisodes(w http.ResponseWriter) bool {
	if s.episodes == nil {
		httpError(w, http.StatusNotFound, "this robot has no episode control")
		return false
	}
	return true
}

// episodeLevel reads the body {"level": …} and returns the level as
// Levels spells it (case-insensitive), or "" when optional and absent; it
// answers 400 or 413 itself.
func (s *Server) episodeLevel(w http.ResponseWriter, r *http.Request, optional bool) (string, bool) {
	body, ok := readBody(w, r, 4096)
	if !ok {
		return "", false
	}
	var req struct {
		Level string `json:"level"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			httpError(w, http.StatusBadRequest, `body must be JSON {"level": "…"}`)
			return "", false
		}
	}
	want := strings.TrimSpace(req.Level)
	if want == "" && optional {
		return "", true
	}
	levels := s.episodes.Levels()
	for _, l := range levels {
		if strings.EqualFold(l, want) {
			return l, true
		}
	}
	httpError(w, http.StatusBadRequest, fmt.Sprintf("unknown level %q: use one of %s", cleanReason(want), strings.Join(levels, ", ")))
	return "", false
}

func (s *Server) handleEpisode(w http.ResponseWriter, r *http.Request) {
	if !s.hasEpisodes(w) {
		return
	}
	info, err := s.episodes.Episode(r.Context())
	if err != nil {
		httpError(w, http.StatusConflict, oneLine(err))
		return
	}
	writeJSON(w, episodeView{info, s.episodes.Levels()})
}

func (s *Server) handleNewEpisode(w http.ResponseWriter, r *http.Request) {
	if !s.hasEpisodes(w) {
		return
	}
	level, ok := s.episodeLevel(w, r, true)
	if !ok {
		return
	}
	who := actor(r)
	// Like a reset, it goes through even if the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), episodeTimeout)
	defer cancel()
	info, err := s.episodes.NewEpisode(ctx, who, level)
	if err != nil {
		msg := oneLine(err)
		s.PublishEvent(Event{Kind: "info", Reason: "new episode refused: " + msg, Actor: who})
		httpError(w, http.StatusConflict, msg)
		return
	}
	s.PublishEvent(Event{Kind: "info", Reason: fmt.Sprintf("new episode %d at level %s (seed %d)", info.Episode, info.Level, info.Seed), Actor: who})
	writeJSON(w, episodeView{info, s.episodes.Levels()})
}

func (s *Server) handleEpisodeLevel(w http.ResponseWriter, r *http.Request) {
	if !s.hasEpisodes(w) {
		return
	}
	level, ok := s.episodeLevel(w, r, false)
	if !ok {
		return
	}
	who := actor(r)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.episodes.SetLevel(ctx, who, level); err != nil {
		httpError(w, http.StatusConflict, oneLine(err))
		return
	}
	s.PublishEvent(Event{Kind: "info", Reason: "next episodes at level " + level, Actor: who})
	writeJSON(w, map[string]any{"ok": true, "pending_level": level})
}
