package demo

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/runtime"
	"github.com/energyflow/edge/safety"
	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestDemoControlWayOut drives the ways out of a stop against the real
// bridge and runtime: a new episode at level L while running (the live
// view's Episode panel), the stop trips there; a jog recovery moves the
// hand and, the scene staying out of distribution, ends at its time limit
// back in STOPPED; a new episode at level 0 re-arms the arm within
// rearmWithin. The episodes that end on their own start the next one
// through the runtime too (runEpisodes).
func TestControlWayOut(t *testing.T) {
	if testing.Short() {
		t.Skip("closed loop against the Meta-World bridge")
	}
	b, root := harnesstest.StartBridge(t, nil)
	t.Setenv("ENERGYFLOW_ROOT", root)
	f := harness.Flags{Task: "button-press", Level: "0", Rate: 10, Seed: 3, Camera: "96x96"}
	if err := f.Prepare(root); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.RuntimeConfig(root, b, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Safety.Recovery.TimeLimit = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl := &control{b: b}
	app, err := runtime.NewApp(ctx, cfg, runtime.AppOptions{Episodes: ctl})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ctl.setLoop(app.Loop())
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	go runEpisodes(rctx, ctl, slog.New(slog.DiscardHandler))
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
	if d := time.Since(t0); d > rearmWithin {
		t.Errorf("re-armed after %v, want within %v", d, rearmWithin)
	}
	if _, err := ctl.NewEpisode(ctx, "test", "X"); err == nil {
		t.Error("a new episode at an unknown level was accepted")
	}
}

// TestSimDemoLevelSwitch checks the bridge's two ways to change the OOD
// level (docs/sim.md) against a real bridge: the pending level is taken by
// the demo's next episode (nextEpisode, as its auto-reset loop calls it),
// and "now" starts an episode at that level at once.
func TestLevelSwitch(t *testing.T) {
	b, root := harnesstest.StartBridge(t, func(o *harness.BridgeOptions) { o.MaxSteps = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := actuators.DefaultConfig()
	cfg.Address, cfg.Map, cfg.Timeout = b.Modbus, filepath.Join(root, harness.MapFile), 2*time.Second
	arm, err := actuators.Open(cfg, actuators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer arm.Close()
	if err := arm.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := arm.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	setLevel := func(now bool) harness.Episode {
		t.Helper()
		ep, err := b.SetLevel(ctx, "L", now)
		if err != nil {
			t.Fatalf("POST /episode/level L (now %v): %v", now, err)
		}
		return ep
	}

	// From the next episode on.
	ep := setLevel(false)
	if ep.Level != "0" || ep.PendingLevel != "L" {
		t.Fatalf("after level L: level %q pending %q, want 0 and L", ep.Level, ep.PendingLevel)
	}
	if _, ep, reset, err := nextEpisode(ctx, b, nil, nil); err != nil || reset || ep.Level != "0" {
		t.Fatalf("episode still running: reset %v, level %q, err %v; want no reset", reset, ep.Level, err)
	}
	for i := 0; i < 3; i++ { // the bridge truncates at 3 steps: the episode ends
		if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 0}, Gripper: -1}); err != nil {
			t.Fatal(err)
		}
	}
	ended, ep, reset, err := nextEpisode(ctx, b, nil, nil)
	if err != nil || !reset {
		t.Fatalf("ended episode: reset %v, err %v; want a new episode", reset, err)
	}
	if ep.Level != "L" || ep.PendingLevel != "" || ep.Seed != 4 || ep.Step != 0 || ep.Task != "button-press" {
		t.Fatalf("new episode %+v, want button-press level L seed 4 step 0, nothing pending", ep)
	}
	if !ended.Done || ended.Seed != 3 || ended.Level != "0" {
		t.Errorf("ended episode %+v, want the finished level-0 seed 3", ended)
	}

	// At once.
	if _, err := b.Reset(ctx, "", "0", 10, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := arm.Command(ctx, actuators.Command{Velocity: []float64{0, 0, 0}, Gripper: -1}); err != nil {
		t.Fatal(err)
	}
	ep = setLevel(true)
	if ep.Level != "L" || ep.Step != 0 || ep.Seed != 11 || ep.PendingLevel != "" {
		t.Fatalf("after level L now: %+v, want level L, step 0, seed 11 at once", ep)
	}
}

// TestActsOn: the demo's "policy:" line says what the bundle acts on.
func TestActsOn(t *testing.T) {
	for _, tc := range []struct {
		state  []string
		images bool
		want   string
	}{
		{[]string{"observation"}, false, "39-wide state"},
		{[]string{"position", "gripper"}, true, "from the topview camera and the arm's position and gripper"},
		{[]string{"position", "gripper"}, false, "the arm's position and gripper alone (no camera"},
	} {
		if got := actsOn(tc.state, tc.images, "topview"); !strings.Contains(got, tc.want) {
			t.Errorf("actsOn(%v, %v) = %q, want it to contain %q", tc.state, tc.images, got, tc.want)
		}
	}
}
