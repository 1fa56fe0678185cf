package main

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
)

// TestDemoControlWayOut drives the ways out of a stop against the real
// bridge and runtime: a new episode at level L while running (the live
// view's Episode panel), the stop trips there; a jog recovery moves the
// hand and, the scene staying out of distribution, ends at its time limit
// back in STOPPED; a new episode at level 0 re-arms the arm within
// demoRearmWithin. The episodes that end on their own start the next one
// through the runtime too (demoEpisodes).
func TestDemoControlWayOut(t *testing.T) {
	if testing.Short() {
		t.Skip("closed loop against the Meta-World bridge")
	}
	b, root := startTestBridge(t)
	t.Setenv("ENERGYFLOW_ROOT", root)
	f := simFlags{task: "button-press", level: "0", rate: 10, seed: 3, camera: "96x96"}
	if err := f.prepare(root); err != nil {
		t.Fatal(err)
	}
	cfg, err := simConfig(root, &f, b, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Safety.Recovery.TimeLimit = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl := &demoControl{b: b}
	app, err := runtime.NewApp(ctx, cfg, runtime.AppOptions{Episodes: ctl})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ctl.setLoop(app.Loop())
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	go demoEpisodes(rctx, ctl, slog.New(slog.DiscardHandler))
	defer func() { stop(); <-done }()

	state := func() runtime.State { s, _ := app.Loop().Machine().State(); return s }
	waitFor := func(want runtime.State, within time.Duration) {
		t.Helper()
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if state() == want {
				return
			}
		}
		t.Fatalf("state %v after %v, want %v", state(), within, want)
	}
	waitFor(runtime.StateRunning, 30*time.Second) // auto start

	ep, err := ctl.NewEpisode(ctx, "test", "L")
	if err != nil {
		t.Fatalf("new episode at L: %v", err)
	}
	if ep.Level != "L" || ep.Seed != 4 {
		t.Fatalf("new episode %+v, want level L seed 4", ep)
	}
	waitFor(runtime.StateStopped, 60*time.Second) // the stop at level L

	// Recovery: jog up for a second; the level-L scene stays out of
	// distribution, so it ends at its time limit, stopped again.
	if err := app.Loop().Recover(ctx, "test", safety.RecoveryJog); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if st := state(); st != runtime.StateRecovering {
		t.Fatalf("state %v after an accepted recovery, want RECOVERING", st)
	}
	if err := app.Loop().Jog("test", []float64{0, 0, 0.5}, math.NaN()); err != nil {
		t.Fatalf("jog: %v", err)
	}
	if st := app.Guard().Status(); st.Recovery != safety.RecoveryJog || st.RecoveryActor != "test" {
		t.Errorf("gate status %+v, want a jog recovery by test", st)
	}
	waitFor(runtime.StateStopped, 5*time.Second)
	if r := app.Guard().Status().Reason; !strings.Contains(r.Message, "recovery") {
		t.Errorf("stopped after the recovery with %q, want the recovery's time limit named", r.Message)
	}

	t0 := time.Now()
	ep, err = ctl.NewEpisode(ctx, "test", "0")
	if err != nil {
		t.Fatalf("new episode at 0 after the stop: %v", err)
	}
	if state() != runtime.StateRunning || ep.Level != "0" {
		t.Fatalf("after a new level-0 episode: %v at level %s, want RUNNING at 0", state(), ep.Level)
	}
	if d := time.Since(t0); d > demoRearmWithin {
		t.Errorf("re-armed after %v, want within %v", d, demoRearmWithin)
	}
	if _, err := ctl.NewEpisode(ctx, "test", "X"); err == nil {
		t.Error("a new episode at an unknown level was accepted")
	}
}
