// Package safety is the gate every command passes through on its way to the
// arm: it stops the arm when the policy's energy says "out of distribution"
// and on every other fault, and bounds every command it lets through.
//
// # Concepts
//
// A Guard wraps an actuators.Arm and is the only thing the runtime writes
// commands through. The control loop calls Guard.Tick once per tick with
// Inputs: the tick's time and deadline, the policy's fresh Scores (NaN: none
// this tick), the timestamps of the newest camera frame, arm state and
// in-flight inference, and the proposed actuators.Command. Tick checks every
// monitor and watchdog, then writes either the limited command
// (arm.Command) or the stop path (arm.Halt: zero velocity, gripper hold,
// enable dropped), and returns a Decision for telemetry.
//
// The energy monitor compares each monitored score ("energy",
// "centered_energy", or "state_energy", the bundle's optional state term read
// on the observation alone) with its threshold — from the bundle's
// Calibration (for "state_energy": a closed-loop calibration of that score,
// else the state_energy block's held-out quantile, Calibration.StateEnergy),
// or overridden in Config — through a decision rule that tolerates single-sample
// noise: n_of_m (trip when N of the last M fresh scores exceed the
// threshold; default 3 of 5) or cusum (a one-sided CUSUM of the exceedance).
// A calibration's closed loop (calibration.ClosedLoop, the type the bundle
// manifest holds) makes the threshold time-varying: bands indexed by the
// running ticks since the gate was armed (calibration.BandTicks; fresh
// scores, calibration.BandFreshScores, for calibrations without band_unit),
// fitted offline (energyflow sim calibrate, split conformal) so that a fresh
// in-distribution episode trips the n-of-m rule with probability at most its
// alpha; while stopped the gate uses the start band. Any monitored score firing trips. With none
// configured (EnergyConfig.Scores empty) the gate watches the calibration's
// closed-loop or recommended score and, when the bundle has the state term
// (Calibration.StateEnergy), "state_energy" too: the policy energy does not
// see an unseen state, the state term does.
//
// Watchdogs bound the age of every input: scores (score_stale), an
// in-flight inference (inference_deadline), camera frames (camera_stale;
// camera_frozen when they stop changing while the arm moves in front of them,
// camera_moved when the camera's view moved at once: knocked or turned,
// camera_unseen when two frames running show colours no demonstration
// showed: something new in view),
// arm state (arm_stale, or arm_disconnected when reads fail), and the loop's
// own lateness (loop_late). The arm's e-stop, fault word and enable read-back
// (estop, arm_fault, arm_disabled), failed command writes (arm_write), NaN or
// Inf anywhere (nan), wrongly shaped inputs (invalid_input) and operator
// stops (operator) complete the stop reasons; see Kind.
//
// The tracking monitor (TrackingConfig, off unless enabled), a robot
// controller's following-error check, compares at every tick how far the
// arm's measured position moved over the last window with how far the
// commands the gate wrote should have moved it — through a small model of
// the arm: the command's scale per second or per command, the one-tick lag
// between a write and the reads that show it, the controller's own target
// limits and a first-order response — and trips (tracking) when they
// differ by more than the tolerance: a position reading that jumped, an arm
// pushed or blocked. It starts afresh at every enable and scene change
// (Inputs.SceneChange), watches the halted arm while stopped, and keeps
// watching while Recovering.
//
// Guard.OnArmEvent takes the arm driver's link events, so that a lost link
// stops the arm at the next tick rather than when the state has aged.
//
// Any trip latches: the gate is Stopped with a Reason (kind, scores,
// threshold, tick, time, message) until Guard.Reset, which is decided on the
// next tick on live inputs and refused while the cause persists. The gate
// starts Stopped (KindStartup), so the first Reset arms it only once every
// input is fresh. Guard.Stop is the operator stop (STOP button, API,
// SIGTERM): it halts the arm at once from the caller's goroutine.
//
// An energy stop can leave the arm standing where every reset is refused.
// Guard.Recover is the way out, as an industrial arm's jog out of a
// protective stop: decided at the next tick, refused while any other fault
// is present, it puts the gate in Recovering, where it writes its own
// reduced-speed commands — the operator's Guard.Jog directions (a dead-man)
// or a retrace of the velocities written before the stop, reversed — and
// every monitor but the energy rule trips; it re-arms by itself once a
// reset would pass, and stops again after recovery.time_limit.
//
// Command limits apply to every command even while all monitors are quiet:
// per-axis velocity, soft position limits that slow the arm toward a bound
// (ros2_control's k_position rule), maximum change per tick, acceleration and
// jerk, and gripper range and rate. Clamped values are counted; the rate
// limits never push a command beyond what the policy proposed.
//
// Every trip, reset and refused reset is logged (slog), counted (Counters,
// read by the metrics layer) and published as an Event on Options.Events
// with the score trace around it; sends never block the loop. Refusals
// repeated every tick (a retrying auto start) are logged and published
// when their cause starts or changes and then at most every 5 s, with the
// count of the others (telemetry/lograte).
//
// Tick allocates nothing while running. Stop, Reset, Status, Counters and
// Trace are safe from any goroutine; every call into the arm is serialized,
// so no command decided before a Stop reaches the arm after its halt.
//
// See docs/safety.md for the design, the configuration keys and the
// measured false-trip rates, detection delays and stop latency.
package safety
