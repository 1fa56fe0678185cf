package telemetry

import (
	"context"
	"time"
)

// Safety states as shown on the page and in the overlay. The runtime may
// send others; anything but StateRunning is drawn as a stop.
const (
	StateRunning    = "RUNNING"
	StateStopped    = "STOPPED"
	StateRecovering = "RECOVERING" // the operator drives the arm out of an energy stop (Recoverer)
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
	// ResetBlock says what a reset would be refused for now, while not
	// running: "" when it would pass, else "kind: detail", e.g. "energy:
	// state_energy 7.61 > 5.7".
	ResetBlock string
	// Recovery is the recovery mode while the state is StateRecovering
	// ("jog" or "retrace"; "" otherwise), and RecoveryLeft the time until
	// the recovery times out.
	Recovery     string
	RecoveryLeft time.Duration

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

// StageLatency is the recent latency of one stage of the control path
// (camera_decode, preprocess, encoder, sample, sample_step, rescore,
// state_term, command_write: docs/telemetry.md, "Stage latency"): how many
// times it ran, and the median and 90th percentile of its recent runs.
type StageLatency struct {
	Stage    string
	Count    uint64
	P50, P90 time.Duration
}

// StageSource gives the live view the control path's stage latencies
// (Options.Stages); the runtime's StageTimes implements it. The server
// calls it once per stats interval and per GET /api/stats, from its own
// goroutines: it must be safe for concurrent use.
type StageSource interface {
	// StageLatencies returns the stages that have run, in pipeline order.
	StageLatencies() []StageLatency
}

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

// EpisodeControl restarts the robot's scene: the simulated robot's
// episodes. It is optional (Options.Episodes); a real robot has none, and
// the page then shows no Episode panel. actor names who asked, as for
// Controller.
type EpisodeControl interface {
	// Levels lists the selectable out-of-distribution levels, in order
	// ("0", "S", "M", "L"). The server accepts no other.
	Levels() []string
	// Episode reports the current episode and the level pending for the
	// next one.
	Episode(ctx context.Context) (EpisodeInfo, error)
	// NewEpisode starts a new episode now at level ("" keeps the current
	// one) and re-arms the stop if it was stopped. It returns once the arm
	// moves again, or with an error saying why not (one line, with a hint).
	NewEpisode(ctx context.Context, actor, level string) (EpisodeInfo, error)
	// SetLevel sets the level from the next episode on.
	SetLevel(ctx context.Context, actor, level string) error
}

// EpisodeInfo is the current episode of an EpisodeControl.
type EpisodeInfo struct {
	Level   string `json:"level"`
	Seed    int64  `json:"seed"`
	Episode int    `json:"episode"` // the episode's number
	// PendingLevel is the level the next episode starts at when it differs
	// from Level ("" none).
	PendingLevel string `json:"pending_level,omitempty"`
}

// Recoverer is the optional ability of a Controller to drive the arm out
// of an energy stop: the safety gate's recovery mode (docs/safety.md,
// "Recovery mode"). The server finds it with a type assertion on
// Options.Controller; without it POST /api/recover and /api/jog answer 404
// and GET /api/session reports recovery unavailable. actor names who
// asked, as for Controller.
type Recoverer interface {
	// Recover starts a recovery in mode "jog" or "retrace". Like Reset it
	// blocks until the control loop decides; a refusal is one line naming
	// the cause, with a hint.
	Recover(ctx context.Context, actor, mode string) error
	// Jog sets the jog direction while recovering in jog mode: one
	// component in [-1, 1] per command axis (RecoveryInfo.Axes), moving the
	// arm for the gate's jog hold; gripper NaN holds the gripper. It must
	// not block.
	Jog(actor string, v []float64, gripper float64) error
	// RecoveryInfo describes the recovery mode for the page.
	RecoveryInfo() RecoveryInfo
}

// RecoveryInfo describes a Recoverer's recovery mode.
type RecoveryInfo struct {
	Axes          int           // command axes a jog has a component for
	SpeedFraction float64       // of the velocity limits
	TimeLimit     time.Duration // a recovery times out after it
	JogHold       time.Duration // one jog moves the arm this long
	RetraceWindow time.Duration // how much of the path before a stop a retrace replays
}
