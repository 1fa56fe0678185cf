package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// The recovery routes: POST /api/recover and POST /api/jog (reset scope),
// served when Options.Controller is a Recoverer (404 otherwise). A bad body
// is 400, a refusal 409 with the gate's one-line reason. A recovery request
// (or its refusal) is published as an event; jogs, which the page resends
// every 100 ms while a button is held, are neither logged nor published.

// recoveryTimeout bounds Recover: it waits for the next control tick.
const recoveryTimeout = 5 * time.Second

// recoverer returns the controller's recovery ability, or answers 404.
func (s *Server) recoverer(w http.ResponseWriter) (Recoverer, bool) {
	if rc, ok := s.ctrl.(Recoverer); ok {
		return rc, true
	}
	httpError(w, http.StatusNotFound, "this robot has no recovery mode")
	return nil, false
}

// recoverySession is GET /api/session's "recovery": whether this token may
// use recovery mode and, if so, what the page needs to drive it.
func (s *Server) recoverySession(sc Scope) map[string]any {
	rc, ok := s.ctrl.(Recoverer)
	if !ok || sc < ScopeReset {
		return map[string]any{"available": false}
	}
	in := rc.RecoveryInfo()
	return map[string]any{"available": true, "modes": []string{"jog", "retrace"}, "axes": in.Axes,
		"speed_fraction": in.SpeedFraction, "time_limit_s": in.TimeLimit.Seconds(),
		"jog_hold_ms": in.JogHold.Milliseconds(), "retrace_window_s": in.RetraceWindow.Seconds()}
}

func (s *Server) handleRecover(w http.ResponseWriter, r *http.Request) {
	rc, ok := s.recoverer(w)
	if !ok {
		return
	}
	body, ok := readBody(w, r, 4096)
	if !ok {
		return
	}
	var req struct {
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(body, &req); err != nil || (req.Mode != "jog" && req.Mode != "retrace") {
		httpError(w, http.StatusBadRequest, `body must be JSON {"mode": "jog"} or {"mode": "retrace"}`)
		return
	}
	who := actor(r)
	// Like a reset, it is decided even if the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), recoveryTimeout)
	defer cancel()
	if err := rc.Recover(ctx, who, req.Mode); err != nil {
		msg := oneLine(err)
		s.PublishEvent(Event{Kind: "recover", Reason: "recovery (" + req.Mode + ") refused: " + msg, Actor: who})
		httpError(w, http.StatusConflict, msg)
		return
	}
	writeJSON(w, map[string]any{"ok": true, "mode": req.Mode})
}

func (s *Server) handleJog(w http.ResponseWriter, r *http.Request) {
	rc, ok := s.recoverer(w)
	if !ok {
		return
	}
	body, ok := readBody(w, r, 1024)
	if !ok {
		return
	}
	var req struct {
		V       []float64 `json:"v"`
		Gripper *float64  `json:"gripper"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.V == nil {
		httpError(w, http.StatusBadRequest, `body must be JSON {"v": [x, y, z, …], "gripper": g} (gripper optional)`)
		return
	}
	if err := checkJog(req.V, rc.RecoveryInfo().Axes); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	g := math.NaN() // hold
	if req.Gripper != nil {
		g = *req.Gripper
	}
	if err := rc.Jog(actor(r), req.V, g); err != nil {
		httpError(w, http.StatusConflict, oneLine(err))
		return
	}
	writeJSON(w, map[string]any{"ok": true})
}

// checkJog checks a jog direction: axes components (when axes > 0), each
// in [-1, 1].
func checkJog(v []float64, axes int) error {
	if axes > 0 && len(v) != axes {
		return fmt.Errorf("v has %d components, the arm has %d command axes — send one per axis", len(v), axes)
	}
	var bad []string
	for i, x := range v {
		if !(x >= -1 && x <= 1) {
			bad = append(bad, fmt.Sprintf("v[%d] = %v", i, x))
		}
	}
	if bad != nil {
		return fmt.Errorf("%s: each component must be in [-1, 1]", strings.Join(bad, ", "))
	}
	return nil
}
