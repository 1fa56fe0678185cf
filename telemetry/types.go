package telemetry

import (
	"context"
	"time"
)

// Safety states as shown on the page and in the overlay. The runtime may
// send others; anything but StateRunning is drawn as a stop.
const (
	StateRunning = "RUNNING"
	StateStopped = "STOPPED"
)

// Sample is one control tick as the runtime saw it. The server copies what
// it keeps, so the caller may reuse the slices after Publish returns.
type Sample struct {
	Tick uint64
	Time time.Time

	// Energy is the safety score compared with Threshold (the energy of
	// the chosen action chunk, or whatever score the monitor stops on).
	Energy    float64
	Threshold float64
	// Watched names the score Energy holds and the stop compares with
	// Threshold: "energy", "centered_energy" or "state_energy"; "" (or
	// "energy") for the energy. The page and the overlay label it.
	Watched string
	// StateEnergy is the bundle's state term on the newest observation
	// (higher = further from the demonstrations), whether the stop watches
	// it or not; NaN when the bundle has none or there is no fresh score.
	StateEnergy float64
	// Reward is the centered reward −(E − mean E(ref)); optional.
	Reward float64
	// Scores holds further energy scores (e.g. per-candidate energies);
	// optional, at most MaxVector values are kept.
	Scores []float64

	State  string // StateRunning, StateStopped, …
	Reason string // why the state is not RUNNING; empty otherwise

	LoopRateHz       float64
	TickDuration     time.Duration
	InferenceLatency time.Duration
	// PlanLateP90 is the p90 of the recent plans' inference latency in
	// control periods (NaN before enough plans), and PlanLateLimit the
	// level past which the runtime warns that the host is falling behind
	// the energy stop's calibration (NaN: no limit).
	PlanLateP90   float64
	PlanLateLimit float64

	// Arm state; any of these may be empty.
	Joints      []float64 // joint positions (rad)
	Velocities  []float64 // joint velocities (rad/s)
	EndEffector []float64 // end-effector pose or position
	Gripper     float64

	// Planned is the planned motion: Planned[step][dim] for the coming
	// action steps (end-effector deltas or joint targets). Optional; at
	// most MaxPlanSteps×MaxVector values are kept.
	Planned [][]float64
}

// Limits on what a Sample carries through to viewers.
const (
	MaxVector    = 32
	MaxPlanSteps = 32
)

// Event is a safety event: a trip, a stop, a reset. Trace holds the
// watched score's values that led to it (oldest first).
type Event struct {
	Time      time.Time
	Tick      uint64
	Kind      string // "trip", "stop", "reset", "info"
	Reason    string
	Actor     string // who caused it ("safety", "web:…")
	Energy    float64
	Threshold float64
	// Score names the score Energy and Trace hold (as Sample.Watched; ""
	// for the energy).
	Score string
	Trace []float64
}

// Controller is what the page's STOP and RESET buttons reach. The runtime
// implements it on its safety layer. Stop must be idempotent and must work
// after ctx is cancelled (implementations use context.WithoutCancel for the
// arm's halt). actor names who asked ("web:127.0.0.1 view").
type Controller interface {
	Stop(ctx context.Context, actor, reason string) error
	Reset(ctx context.Context, actor string) error
}
