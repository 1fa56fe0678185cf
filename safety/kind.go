package safety

import "strconv"

// State is the gate's operating state.
type State uint8

// The gate is either passing commands (Running) or latched (Stopped). It
// starts Stopped with reason KindStartup: the first Reset arms it, and only
// when every input is fresh. Recovering is the operator's way out of an
// energy stop (Guard.Recover): the gate writes its own reduced-speed jog or
// retrace commands, every monitor but the energy rule trips, and it
// re-arms by itself once a reset would pass.
const (
	Stopped State = iota
	Running
	Recovering
)

func (s State) String() string {
	switch s {
	case Stopped:
		return "STOPPED"
	case Running:
		return "RUNNING"
	case Recovering:
		return "RECOVERING"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Kind says which monitor tripped (a stop reason), or which fault is active.
type Kind uint8

// Stop reasons. Each has its own counter (Counters.Trips) and its own rule
// for when a reset is allowed again (the cause must be gone).
const (
	KindNone              Kind = iota // no fault
	KindStartup                       // the gate has not been armed yet (initial state, not counted as a trip)
	KindOperator                      // Stop was called (STOP button, API, SIGTERM)
	KindEnergy                        // the energy monitor's rule fired
	KindNaN                           // NaN or Inf in the proposed command, the arm position or a score (±Inf)
	KindInvalidInput                  // command or state of the wrong shape (axis count)
	KindScoreStale                    // no fresh score for longer than watchdog.score_max_age
	KindInferenceDeadline             // an inference request has run past watchdog.inference_deadline
	KindCameraStale                   // newest camera frame older than watchdog.camera_max_age
	KindArmStale                      // newest arm state older than watchdog.arm_max_age
	KindArmDisconnected               // arm reads failing and the last good state older than watchdog.arm_max_age
	KindArmWrite                      // writing the command to the arm failed
	KindArmFault                      // the controller reports a non-zero fault word
	KindEStop                         // the hardware e-stop input is asserted
	KindArmDisabled                   // the controller dropped enable while the gate was running
	KindLoopLate                      // the control loop woke later than watchdog.loop_max_late or skipped a deadline
	KindTracking                      // the arm's measured motion left the commanded one by more than tracking.tolerance
	KindCameraFrozen                  // the camera's frames stayed identical while the arm moved more than watchdog.camera_frozen_motion
	KindCameraMoved                   // the camera's view moved at once (knocked or turned) and has not come back (watchdog.camera_moved)
	KindCameraUnseen                  // two frames running showed at least watchdog.camera_unseen pixels of colours no demonstration showed

	NumKinds // number of kinds; Kind values are in [0, NumKinds)
)

var kindNames = [NumKinds]string{
	KindNone:              "none",
	KindStartup:           "startup",
	KindOperator:          "operator",
	KindEnergy:            "energy",
	KindNaN:               "nan",
	KindInvalidInput:      "invalid_input",
	KindScoreStale:        "score_stale",
	KindInferenceDeadline: "inference_deadline",
	KindCameraStale:       "camera_stale",
	KindArmStale:          "arm_stale",
	KindArmDisconnected:   "arm_disconnected",
	KindArmWrite:          "arm_write",
	KindArmFault:          "arm_fault",
	KindEStop:             "estop",
	KindArmDisabled:       "arm_disabled",
	KindLoopLate:          "loop_late",
	KindTracking:          "tracking",
	KindCameraFrozen:      "camera_frozen",
	KindCameraMoved:       "camera_moved",
	KindCameraUnseen:      "camera_unseen",
}

// String returns the snake_case name used in logs, metrics labels and
// telemetry ("energy", "camera_stale", ...).
func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Limit names one command limit; clamps are counted per Limit.
type Limit uint8

// Command limits, in the order they are applied (see Limiter).
const (
	LimitVelocity     Limit = iota // |v| ≤ limits.max_velocity
	LimitSoftPosition              // soft position limits (ros2_control style velocity bound)
	LimitDelta                     // |v − v_prev| ≤ limits.max_delta per tick
	LimitAcceleration              // |v − v_prev|/dt ≤ limits.max_acceleration
	LimitJerk                      // |a − a_prev|/dt ≤ limits.max_jerk
	LimitGripper                   // gripper within [min, max] and max_delta per tick

	NumLimits // number of limits
)

var limitNames = [NumLimits]string{
	LimitVelocity:     "velocity",
	LimitSoftPosition: "soft_position",
	LimitDelta:        "delta",
	LimitAcceleration: "acceleration",
	LimitJerk:         "jerk",
	LimitGripper:      "gripper",
}

// String returns the snake_case name of the limit.
func (l Limit) String() string {
	if l < NumLimits {
		return limitNames[l]
	}
	return "Limit(" + strconv.Itoa(int(l)) + ")"
}

// Score names one of the policy's out-of-distribution scores (higher = less
// like the demonstrations), as in the bundle manifest's calibration block.
type Score uint8

// The scores the policy reports every tick.
const (
	ScoreEnergy   Score = iota // E(a, cond, γ) of the chosen action: "energy"
	ScoreCentered              // E(a, cond, γ) − mean_m E(ref_m, cond, γ) = −centered reward: "centered_energy"
	// ScoreStateEnergy is the bundle's optional state term read on the
	// newest observation alone (max of z-scores: g(s, σ) per σ and, with
	// the max_z reading, its transition and RND components), the same for
	// every action: "state_energy". NaN every tick for a bundle without it.
	ScoreStateEnergy

	NumScores
)

var scoreNames = [NumScores]string{ScoreEnergy: "energy", ScoreCentered: "centered_energy", ScoreStateEnergy: "state_energy"}

// scoreList is the valid score names for messages.
const scoreList = `"energy", "centered_energy" or "state_energy"`

// String returns the manifest name of the score.
func (s Score) String() string {
	if s < NumScores {
		return scoreNames[s]
	}
	return "Score(" + strconv.Itoa(int(s)) + ")"
}

// ParseScore maps a manifest name ("energy", "centered_energy",
// "state_energy") to a Score.
func ParseScore(name string) (Score, bool) {
	for i, n := range scoreNames {
		if n == name {
			return Score(i), true
		}
	}
	return 0, false
}
