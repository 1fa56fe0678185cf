package safety

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/energyflow/edge/calibration"
)

// Config is the safety section of the runtime's YAML configuration. Start
// from DefaultConfig and decode the file over it; the gate works on the
// frozen copy it was built with (changing it means building a new Guard).
type Config struct {
	Energy   EnergyConfig   `yaml:"energy"`
	Limits   LimitsConfig   `yaml:"limits"`
	Watchdog WatchdogConfig `yaml:"watchdog"`
	Events   EventsConfig   `yaml:"events"`
	Recovery RecoveryConfig `yaml:"recovery"`
	Tracking TrackingConfig `yaml:"tracking"`
}

// EnergyConfig configures the energy (out-of-distribution) monitor.
type EnergyConfig struct {
	// Disabled turns the energy monitor off (e.g. for a policy without an
	// energy). The score watchdog is off too then.
	Disabled bool `yaml:"disabled"`
	// Scores lists the scores to monitor; any one firing trips. Empty means
	// the default watch set: "state_energy" alone when the bundle has the
	// state term (Calibration.StateEnergy), else the bundle calibration's
	// closed-loop score and bands (when the rule is the one they were
	// certified for), else its recommended score and threshold.
	Scores []ScoreConfig `yaml:"scores"`
	// Rule decides when exceedances are a trip rather than noise.
	Rule RuleConfig `yaml:"rule"`
}

// ScoreConfig is one monitored score.
type ScoreConfig struct {
	// Name is "energy", "centered_energy" or "state_energy" (the bundle's
	// optional state term).
	Name string `yaml:"name"`
	// Threshold overrides the bundle's calibrated threshold (closed-loop
	// bands included).
	Threshold *float64 `yaml:"threshold"`
	// Quantile picks the calibration quantile used as the threshold when no
	// override is set and the bundle recommends another score (default "99.9").
	Quantile string `yaml:"quantile"`
	// Scale overrides the CUSUM scale (default: the calibration's std of the score).
	Scale *float64 `yaml:"scale"`
	// NOfM overrides energy.rule.n_of_m for this score (n_of_m rule only).
	// Default: energy.rule.n_of_m, except for "state_energy", judged 2 of
	// the last 5 (StateEnergyNOfM).
	NOfM *NOfMConfig `yaml:"n_of_m"`
}

// StateEnergyNOfM is the window "state_energy" is judged with unless its
// score entry sets n_of_m: 2 of the last 5 scores. The state term's
// transition part sees a push of the arm for 1–3 ticks only; measured on
// ButtonPress through the runtime (docs/safety.md, "The window of the state
// score"), 3 of 5 caught 18 of 48 pushes within 1 s and 2 of 5 caught 46,
// with 2 false trips in 50 normal episodes against 1.
func StateEnergyNOfM() NOfMConfig { return NOfMConfig{N: 2, M: 5} }

// ScoreNOfM is the n_of_m window of the named score when its entry sets
// none: StateEnergyNOfM for "state_energy", else global (energy.rule.n_of_m).
func ScoreNOfM(name string, global NOfMConfig) NOfMConfig {
	if name == ScoreStateEnergy.String() {
		return StateEnergyNOfM()
	}
	return global
}

// nOfMFor is the n_of_m window score name is judged with under e: its
// entry's n_of_m when e.Scores lists it with one, else ScoreNOfM.
func nOfMFor(e *EnergyConfig, name string) NOfMConfig {
	for _, s := range e.Scores {
		if s.Name == name && s.NOfM != nil {
			return *s.NOfM
		}
	}
	return ScoreNOfM(name, e.Rule.NOfM)
}

// Rule kinds.
const (
	RuleNOfM  = calibration.RuleNOfM // the rule a closed-loop calibration is certified for
	RuleCUSUM = "cusum"
)

// RuleConfig selects the decision rule applied to each monitored score.
type RuleConfig struct {
	// Kind is "n_of_m" or "cusum".
	Kind  string      `yaml:"kind"`
	NOfM  NOfMConfig  `yaml:"n_of_m"`
	CUSUM CUSUMConfig `yaml:"cusum"`
}

// NOfMConfig trips when at least N of the last M fresh scores are above the
// threshold (1 ≤ N ≤ M ≤ 64).
type NOfMConfig struct {
	N int `yaml:"n"`
	M int `yaml:"m"`
}

// CUSUMConfig is a one-sided CUSUM of the exceedance over the threshold in
// units of the score's scale: S ← max(0, S + (x − threshold)/scale − drift);
// trip when S > limit. A spike limit·scale above the threshold trips at once,
// smaller sustained excursions accumulate.
type CUSUMConfig struct {
	Drift float64 `yaml:"drift"`
	Limit float64 `yaml:"limit"`
}

// LimitsConfig bounds every command the gate writes. Per-axis lists have one
// entry per axis of actuators.Command.Velocity; max_velocity is required and
// fixes the axis count, the others are optional (empty: not applied).
type LimitsConfig struct {
	MaxVelocity     []float64 `yaml:"max_velocity"`     // |v| bound per axis (command units)
	MaxAcceleration []float64 `yaml:"max_acceleration"` // |Δv|/dt bound per axis (units/s)
	MaxJerk         []float64 `yaml:"max_jerk"`         // |Δa|/dt bound per axis (units/s²)
	MaxDelta        []float64 `yaml:"max_delta"`        // |Δv| bound per tick, whatever dt is
	// Soft position limits as in ros2_control (needs the arm's Position):
	// allowed velocity ∈ [−k·(p − lower), −k·(p − upper)] ∩ [−vmax, vmax], so
	// the arm slows down toward a bound and is pushed back beyond it.
	SoftLower []float64     `yaml:"soft_lower"`
	SoftUpper []float64     `yaml:"soft_upper"`
	KPosition []float64     `yaml:"k_position"` // 1/s
	Gripper   GripperLimits `yaml:"gripper"`
}

// GripperLimits bounds the gripper command.
type GripperLimits struct {
	Min      float64 `yaml:"min"`
	Max      float64 `yaml:"max"`
	MaxDelta float64 `yaml:"max_delta"` // per tick; 0: not applied
}

// WatchdogConfig bounds the age of every input. All are required (> 0)
// except CameraMaxAge, where 0 means the policy uses no camera.
type WatchdogConfig struct {
	// ScoreMaxAge: longest time without a fresh (non-NaN) score. The runtime
	// re-scores the committed chunk every tick, so this is about one period.
	ScoreMaxAge time.Duration `yaml:"score_max_age"`
	// InferenceDeadline: longest an inference request may stay in flight.
	InferenceDeadline time.Duration `yaml:"inference_deadline"`
	// CameraMaxAge: oldest acceptable newest camera frame; 0: no camera.
	CameraMaxAge time.Duration `yaml:"camera_max_age"`
	// CameraFrozenMotion catches a camera that keeps delivering the same
	// frame with fresh timestamps (a hung driver or encoder), which
	// CameraMaxAge cannot see: once no frame has differed from the one
	// before it for longer than CameraFrozenWait, the arm moving more than
	// this (position units, the distance over the position axes) trips
	// camera_frozen. A camera that sees the arm cannot stay pixel-identical
	// while it moves, and a real sensor's noise changes every frame anyway.
	// 0: off (the default; a camera that does not see the arm must keep it
	// off). Watched for bundles with an image input.
	CameraFrozenMotion float64 `yaml:"camera_frozen_motion"`
	// CameraFrozenWait is how long a motion may take to show in a frame
	// that reached the runtime (exposure, encoding, transport, decoding):
	// the arm's motion counts only after no frame has changed for this long.
	CameraFrozenWait time.Duration `yaml:"camera_frozen_wait"`
	// CameraMoved catches a fixed camera knocked or turned (camera.ViewWatch):
	// the view is moved when at least this fraction of the image tiles that
	// matched the camera's steady view change in one frame, and stays moved
	// (camera_moved, a reset refused) until fewer than half that fraction
	// still differ. In (0, 1]; 0: off (the default). Watched for bundles
	// with an image input; the runtime's camera loop measures the view.
	CameraMoved float64 `yaml:"camera_moved"`
	// CameraUnseen catches something new in a fixed camera's view (an
	// object, a hand, a tool left on the table): the arm stops
	// (camera_unseen, a reset refused while it lasts) when at least this
	// many pixels of each of two frames running have colours no frame of
	// the bundle's demonstrations showed (camera.Palette, the image input's
	// "palette" in the manifest). Pixels; 0: off. Watched for bundles whose
	// image input carries a palette; the runtime's camera loop counts.
	CameraUnseen int `yaml:"camera_unseen"`
	// ArmMaxAge: oldest acceptable newest arm state. A failing read is
	// tolerated until the last good state is this old (then arm_disconnected).
	ArmMaxAge time.Duration `yaml:"arm_max_age"`
	// LoopMaxLate: latest a tick may wake after its deadline; any skipped
	// deadline is late too.
	LoopMaxLate time.Duration `yaml:"loop_max_late"`
	// IgnoreEnabled stops the gate from tripping when the controller reports
	// enable dropped while running (for arms that cannot read enable back).
	IgnoreEnabled bool `yaml:"ignore_enabled"`
}

// EventsConfig sizes the score trace attached to trip events.
type EventsConfig struct {
	TraceBefore int `yaml:"trace_before"` // scores kept before a trip (ring buffer size)
	TraceAfter  int `yaml:"trace_after"`  // scores after a trip sent in a follow-up EventTrace; 0: none
}

// RecoveryConfig configures the recovery mode (Guard.Recover): how an
// operator drives the arm out of an energy stop at reduced speed.
type RecoveryConfig struct {
	// SpeedFraction scales recovery motion, in (0, 1]: a jog moves at this
	// fraction of limits.max_velocity, a retrace replays the recorded
	// velocities at this fraction (so it takes 1/SpeedFraction as long).
	SpeedFraction float64 `yaml:"speed_fraction"`
	// RetraceWindow is how much of the motion before a stop a retrace can
	// replay, in (0, 1m]: the gate keeps the commands it wrote during it.
	RetraceWindow time.Duration `yaml:"retrace_window"`
	// TimeLimit ends a recovery that has not brought the scores back under
	// their thresholds (back to Stopped), in (0, 5m].
	TimeLimit time.Duration `yaml:"time_limit"`
	// JogHold is how long one jog command moves the arm (a dead-man: the
	// page resends while a button is held), in (0, 2s].
	JogHold time.Duration `yaml:"jog_hold"`
}

// TrackingConfig configures the tracking monitor, a robot controller's
// following-error check: at every tick it compares how far the arm's
// measured position moved over the last Window with how far the commands
// the gate wrote over it should have moved the arm, and stops the arm
// (KindTracking) when the two differ by more than Tolerance — a position
// reading that jumped, an arm pushed or blocked. The position is the
// register map's position signal, one entry per command axis, in its own
// units; the commanded motion is the written (limited) velocities, times
// Scale, clipped to the controller's own target limits (Lower, Upper) and
// followed through the arm's first-order Response. See docs/safety.md,
// "Tracking".
type TrackingConfig struct {
	// Enabled turns the monitor on (it needs the arm's position).
	Enabled bool `yaml:"enabled"`
	// Window is how far back the measured displacement is compared with
	// the commanded one, in (0, 10s]: the sample nearest to that age (with
	// per: tick, that many loop periods back, at least one).
	Window time.Duration `yaml:"window"`
	// Tolerance is the largest difference allowed between the measured and
	// the commanded displacement over Window (Euclidean norm over the axes,
	// in the position's units), finite and > 0.
	Tolerance float64 `yaml:"tolerance"`
	// Per says what a command is: "second", a velocity (the arm moves
	// Scale·v per second while the command is in effect), or "tick", a step
	// (each command written moves the arm Scale·v once, as the lockstep
	// Meta-World bridge does; durations then count loop periods of such
	// steps).
	Per string `yaml:"per"`
	// Scale is, per axis, the distance in position units one command unit
	// moves the arm per second (per: second) or per command (per: tick).
	// Empty: 1 for every axis (a velocity in position units per second).
	Scale []float64 `yaml:"scale"`
	// Response is the time constant of the arm's first-order response to
	// its commands, in [0, 10s]: the commanded motion is that of an arm
	// whose velocity follows the command through this lag. 0: the arm
	// follows at once.
	Response time.Duration `yaml:"response"`
	// Lower and Upper are, per axis, the controller's own limits on where
	// it moves the arm's target (Meta-World's mocap box): a command that
	// would take the target past them is clipped there, so no motion past
	// them is expected. Empty: none.
	Lower []float64 `yaml:"lower"`
	Upper []float64 `yaml:"upper"`
	// Sustained turns on the sustained rule, for an error that builds over
	// several ticks with no window past Tolerance (an arm pushed or dragged
	// while the controller follows it through its lag): at every sample
	// the difference over the last sample step, less Drift times the step's
	// duration, is added to a sum that never goes below zero (a CUSUM),
	// and the arm stops when the sum exceeds Sustained (position units).
	// 0: off. The sum restarts with the model.
	Sustained float64 `yaml:"sustained"`
	// Drift is how fast normal driving may accumulate unexplained motion
	// without counting toward Sustained, in position units per second
	// (per: tick, per loop period of steps); >= 0.
	Drift float64 `yaml:"drift"`
}

// What a command is to the tracking monitor (TrackingConfig.Per).
const (
	TrackingPerSecond = "second" // a velocity, Scale per second
	TrackingPerTick   = "tick"   // a step, Scale per command written
)

// DefaultTracking is the tracking block of DefaultConfig: off; when turned
// on, a 100 ms window and a 2 cm tolerance, measured on the Meta-World arm
// at 10 Hz (docs/safety.md, "Tracking": the largest difference in 2310
// running ticks of normal driving was 7.8 mm), for velocity commands in
// position units per second followed at once.
func DefaultTracking() TrackingConfig {
	return TrackingConfig{Window: 100 * time.Millisecond, Tolerance: 0.02, Per: TrackingPerSecond}
}

// Bounds of the recovery keys.
const (
	maxRetraceWindow = time.Minute
	maxRecoveryTime  = 5 * time.Minute
	maxJogHold       = 2 * time.Second
	maxTrackingTime  = 10 * time.Second // tracking.window and tracking.response
)

// DefaultRecovery is the recovery block of DefaultConfig: a quarter of the
// speed, the last 5 s retraceable, 30 s to get back, jogs held 300 ms.
func DefaultRecovery() RecoveryConfig {
	return RecoveryConfig{SpeedFraction: 0.25, RetraceWindow: 5 * time.Second, TimeLimit: 30 * time.Second, JogHold: 300 * time.Millisecond}
}

// DefaultConfig returns the defaults for a 10 Hz loop. The limits have no
// defaults (they depend on the arm): set limits.max_velocity at least.
func DefaultConfig() Config {
	return Config{
		Energy: EnergyConfig{
			Rule: RuleConfig{
				Kind:  RuleNOfM,
				NOfM:  NOfMConfig{N: 3, M: 5},
				CUSUM: CUSUMConfig{Drift: 0, Limit: 2},
			},
		},
		Limits: LimitsConfig{Gripper: GripperLimits{Min: -1, Max: 1}},
		Watchdog: WatchdogConfig{
			ScoreMaxAge:       250 * time.Millisecond,
			InferenceDeadline: 500 * time.Millisecond,
			CameraMaxAge:      250 * time.Millisecond,
			CameraFrozenWait:  250 * time.Millisecond,
			ArmMaxAge:         250 * time.Millisecond,
			LoopMaxLate:       50 * time.Millisecond,
		},
		Events:   EventsConfig{TraceBefore: 64, TraceAfter: 16},
		Recovery: DefaultRecovery(),
		Tracking: DefaultTracking(),
	}
}

const maxWindow = calibration.MaxWindow

// Validate reports every problem of the configuration, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("safety: %s: %s", key, fmt.Sprintf(format, args...)))
	}

	// energy
	if !c.Energy.Disabled {
		seen := map[string]bool{}
		for i, s := range c.Energy.Scores {
			key := fmt.Sprintf("energy.scores[%d]", i)
			if _, ok := ParseScore(s.Name); !ok {
				bad(key+".name", "%q is not a score — use %s", s.Name, scoreList)
			} else if seen[s.Name] {
				bad(key+".name", "%q is listed twice", s.Name)
			}
			seen[s.Name] = true
			if s.Threshold != nil && !isFinite(*s.Threshold) {
				bad(key+".threshold", "must be a finite number, got %v", *s.Threshold)
			}
			if s.Scale != nil && !(*s.Scale > 0 && isFinite(*s.Scale)) {
				bad(key+".scale", "must be > 0, got %v", *s.Scale)
			}
			if w := s.NOfM; w != nil {
				switch {
				case c.Energy.Rule.Kind != RuleNOfM:
					bad(key+".n_of_m", "applies to the n_of_m rule only, the rule is %s", ruleName(c.Energy.Rule))
				case w.M < 1 || w.M > maxWindow:
					bad(key+".n_of_m.m", "must be in [1, %d], got %d", maxWindow, w.M)
				case w.N < 1 || w.N > w.M:
					bad(key+".n_of_m.n", "must be in [1, m=%d], got %d", w.M, w.N)
				}
			}
		}
		switch r := c.Energy.Rule; r.Kind {
		case RuleNOfM:
			if r.NOfM.M < 1 || r.NOfM.M > maxWindow {
				bad("energy.rule.n_of_m.m", "must be in [1, %d], got %d", maxWindow, r.NOfM.M)
			}
			if r.NOfM.N < 1 || r.NOfM.N > r.NOfM.M {
				bad("energy.rule.n_of_m.n", "must be in [1, m=%d], got %d", r.NOfM.M, r.NOfM.N)
			}
		case RuleCUSUM:
			if !(r.CUSUM.Drift >= 0 && isFinite(r.CUSUM.Drift)) {
				bad("energy.rule.cusum.drift", "must be ≥ 0, got %v", r.CUSUM.Drift)
			}
			if !(r.CUSUM.Limit > 0 && isFinite(r.CUSUM.Limit)) {
				bad("energy.rule.cusum.limit", "must be > 0, got %v", r.CUSUM.Limit)
			}
		default:
			bad("energy.rule.kind", "%q is not a rule — use %q or %q", r.Kind, RuleNOfM, RuleCUSUM)
		}
	}

	// limits
	l := &c.Limits
	axes := len(l.MaxVelocity)
	if axes == 0 {
		bad("limits.max_velocity", "required: one bound per command axis")
	}
	checkAxes := func(key string, v []float64, optional bool) {
		if len(v) == 0 && optional {
			return
		}
		if len(v) != axes {
			bad(key, "has %d entries, limits.max_velocity has %d — give one per axis", len(v), axes)
		}
		for i, x := range v {
			if !(x > 0 && isFinite(x)) {
				bad(fmt.Sprintf("%s[%d]", key, i), "must be > 0, got %v", x)
			}
		}
	}
	// checkBounds checks a pair of per-axis position bounds (soft limits,
	// the tracking box): one finite entry per axis each, lower below upper.
	checkBounds := func(loKey, hiKey string, lo, hi []float64, need string) {
		for _, kv := range []struct {
			key string
			v   []float64
		}{{loKey, lo}, {hiKey, hi}} {
			if len(kv.v) != axes {
				bad(kv.key, "has %d entries, limits.max_velocity has %d — %s", len(kv.v), axes, need)
			}
			for i, x := range kv.v {
				if !isFinite(x) {
					bad(fmt.Sprintf("%s[%d]", kv.key, i), "must be finite, got %v", x)
				}
			}
		}
		for i := 0; i < len(lo) && i < len(hi); i++ {
			if isFinite(lo[i]) && isFinite(hi[i]) && !(lo[i] < hi[i]) {
				bad(fmt.Sprintf("%s[%d]", loKey, i), "%v is not below %s[%d]=%v", lo[i], hiKey, i, hi[i])
			}
		}
	}
	checkAxes("limits.max_velocity", l.MaxVelocity, true)
	checkAxes("limits.max_acceleration", l.MaxAcceleration, true)
	checkAxes("limits.max_jerk", l.MaxJerk, true)
	checkAxes("limits.max_delta", l.MaxDelta, true)
	if len(l.MaxJerk) > 0 && len(l.MaxAcceleration) == 0 {
		bad("limits.max_jerk", "needs limits.max_acceleration")
	}
	if n := len(l.SoftLower) + len(l.SoftUpper) + len(l.KPosition); n > 0 {
		checkBounds("limits.soft_lower", "limits.soft_upper", l.SoftLower, l.SoftUpper,
			"soft limits need soft_lower, soft_upper and k_position for every axis")
		checkAxes("limits.k_position", l.KPosition, false)
	}
	g := l.Gripper
	if !isFinite(g.Min) || !isFinite(g.Max) || !(g.Min <= g.Max) {
		bad("limits.gripper", "min (%v) must be ≤ max (%v), both finite", g.Min, g.Max)
	}
	if !(g.MaxDelta >= 0 && isFinite(g.MaxDelta)) {
		bad("limits.gripper.max_delta", "must be ≥ 0 (0: not applied), got %v", g.MaxDelta)
	}

	// watchdog
	w := &c.Watchdog
	for _, kv := range []struct {
		key string
		d   time.Duration
	}{
		{"watchdog.score_max_age", w.ScoreMaxAge},
		{"watchdog.inference_deadline", w.InferenceDeadline},
		{"watchdog.arm_max_age", w.ArmMaxAge},
		{"watchdog.loop_max_late", w.LoopMaxLate},
	} {
		if kv.d <= 0 {
			bad(kv.key, "must be > 0 (a duration such as 250ms), got %v", kv.d)
		}
	}
	if w.CameraMaxAge < 0 {
		bad("watchdog.camera_max_age", "must be ≥ 0 (0: no camera), got %v", w.CameraMaxAge)
	}
	if !(w.CameraFrozenMotion >= 0) || math.IsInf(w.CameraFrozenMotion, 0) {
		bad("watchdog.camera_frozen_motion", "must be a finite distance ≥ 0 (0: off), got %v", w.CameraFrozenMotion)
	} else if w.CameraFrozenMotion > 0 && w.CameraMaxAge == 0 {
		bad("watchdog.camera_frozen_motion", "watches a camera, but watchdog.camera_max_age is 0 (no camera)")
	}
	if !(w.CameraMoved >= 0 && w.CameraMoved <= 1) {
		bad("watchdog.camera_moved", "must be a fraction in (0, 1] (0: off), got %v", w.CameraMoved)
	} else if w.CameraMoved > 0 && w.CameraMaxAge == 0 {
		bad("watchdog.camera_moved", "watches a camera, but watchdog.camera_max_age is 0 (no camera)")
	}
	if w.CameraUnseen < 0 {
		bad("watchdog.camera_unseen", "must be a number of pixels ≥ 1 (0: off), got %d", w.CameraUnseen)
	} else if w.CameraUnseen > 0 && w.CameraMaxAge == 0 {
		bad("watchdog.camera_unseen", "watches a camera, but watchdog.camera_max_age is 0 (no camera)")
	}
	if w.CameraFrozenMotion > 0 && w.CameraFrozenWait <= 0 {
		bad("watchdog.camera_frozen_wait", "must be > 0 (a duration such as 250ms) when watchdog.camera_frozen_motion is set, got %v", w.CameraFrozenWait)
	}

	// events
	if c.Events.TraceBefore < 1 || c.Events.TraceBefore > 1<<16 {
		bad("events.trace_before", "must be in [1, 65536], got %d", c.Events.TraceBefore)
	}
	if c.Events.TraceAfter < 0 || c.Events.TraceAfter > c.Events.TraceBefore {
		bad("events.trace_after", "must be in [0, trace_before=%d], got %d", c.Events.TraceBefore, c.Events.TraceAfter)
	}

	// recovery
	rc := &c.Recovery
	if f := rc.SpeedFraction; !(f > 0 && f <= 1) {
		bad("recovery.speed_fraction", "must be in (0, 1] (a fraction of limits.max_velocity, e.g. 0.25), got %v", f)
	}
	for _, kv := range []struct {
		key      string
		d, limit time.Duration
	}{
		{"recovery.retrace_window", rc.RetraceWindow, maxRetraceWindow},
		{"recovery.time_limit", rc.TimeLimit, maxRecoveryTime},
		{"recovery.jog_hold", rc.JogHold, maxJogHold},
	} {
		if kv.d <= 0 || kv.d > kv.limit {
			bad(kv.key, "must be in (0, %v] (a duration such as 5s), got %v", kv.limit, kv.d)
		}
	}

	// tracking: checked whether enabled or not, so that a typo shows before
	// the monitor is turned on
	tr := &c.Tracking
	if tr.Window <= 0 || tr.Window > maxTrackingTime {
		bad("tracking.window", "must be in (0, %v] (a duration such as 100ms), got %v", maxTrackingTime, tr.Window)
	}
	if !(tr.Tolerance > 0 && isFinite(tr.Tolerance)) {
		bad("tracking.tolerance", "must be a finite number > 0 (a distance in the position's units, such as 0.02 for 2 cm), got %v", tr.Tolerance)
	}
	if tr.Response < 0 || tr.Response > maxTrackingTime {
		bad("tracking.response", "must be in [0, %v] (0: the arm follows at once), got %v", maxTrackingTime, tr.Response)
	}
	if tr.Per != TrackingPerSecond && tr.Per != TrackingPerTick {
		bad("tracking.per", "%q: want %q (a command is a velocity) or %q (a command is one step)", tr.Per, TrackingPerSecond, TrackingPerTick)
	}
	if !(tr.Sustained >= 0 && isFinite(tr.Sustained)) {
		bad("tracking.sustained", "must be a finite number >= 0 (a distance in the position's units; 0: the sustained rule off), got %v", tr.Sustained)
	}
	if !(tr.Drift >= 0 && isFinite(tr.Drift)) {
		bad("tracking.drift", "must be a finite number >= 0 (position units per second), got %v", tr.Drift)
	}
	checkAxes("tracking.scale", tr.Scale, true)
	if len(tr.Lower)+len(tr.Upper) > 0 {
		checkBounds("tracking.lower", "tracking.upper", tr.Lower, tr.Upper,
			"give tracking.lower and tracking.upper for every axis, or neither")
	}
	return errors.Join(errs...)
}

// Calibration is what the gate's thresholds come from: the bundle
// manifest's calibration block (nil Block fields: none) and the state
// term's held-out statistics, which the manifest keeps in its state_energy
// block rather than in the calibration block.
type Calibration struct {
	calibration.Block
	// StateEnergy holds the held-out statistics of the "state_energy" score
	// (the manifest's state_energy.calibration): the runtime fills it. Nil:
	// the bundle has no state term. Its quantile is the state score's
	// threshold when no closed-loop calibration of that score applies.
	StateEnergy *calibration.ScoreStats `json:"-"`
}

// Threshold is a resolved threshold of one monitored score.
type Threshold struct {
	Score Score
	Value float64 // trip level (with Bands: band 0's, the start band)
	Scale float64 // CUSUM scale (0 when the rule is n_of_m)
	// Source is "config", "calibration.closed_loop",
	// "calibration.recommended", "calibration.quantiles[99.9]" or, for
	// "state_energy", "state_energy.calibration.quantiles[99.9]", the last
	// three followed by why a closed_loop calibration did not apply, if any.
	Source string
	// Bands make the threshold time-varying (calibration.closed_loop):
	// sorted by From, the first From 0. Nil: the fixed Value.
	Bands []calibration.Band
	// BandUnit is what the bands' From counts since arming:
	// calibration.BandTicks or calibration.BandFreshScores ("" counts fresh
	// scores too).
	BandUnit calibration.BandUnit
	// NOfM is the window of the n_of_m rule for this score (nOfMFor);
	// zero under the CUSUM rule.
	NOfM NOfMConfig
	// Ceiling is the closed-loop calibration's one-tick ceiling
	// (calibration.closed_loop.ceiling), applied with its Bands: one fresh
	// score above CeilingAt trips at once. Nil: none.
	Ceiling *calibration.Ceiling
}

// CeilingAt returns the one-tick trip level at n since the gate was armed
// (n as in At): the ceiling of the band that applies at n, or +Inf without
// a ceiling. It allocates nothing.
func (t Threshold) CeilingAt(n int) float64 {
	if t.Ceiling == nil || len(t.Bands) == 0 {
		return math.Inf(1)
	}
	return t.Ceiling.Level(t.Bands[calibration.BandAt(t.Bands, n)])
}

// At returns the trip level at n (from 0) since the gate was armed, n
// counted in BandUnit — running ticks, or fresh scores: the threshold of the
// last band whose From is at or below n, or Value without bands. It
// allocates nothing.
func (t Threshold) At(n int) float64 {
	if len(t.Bands) == 0 {
		return t.Value
	}
	return t.Bands[calibration.BandAt(t.Bands, n)].Threshold
}

const defaultQuantile = "99.9"

// resolveThresholds picks each monitored score's threshold: the config
// override, else the calibration's closed-loop bands for that score when the
// rule is the n_of_m rule they were certified for, else the calibration's
// recommendation for that score, else the configured quantile of the
// calibration (for "state_energy": of the state_energy block's held-out
// statistics, Calibration.StateEnergy). CUSUM also needs a scale. With no
// scores configured, the monitored scores are defaultScores'.
func resolveThresholds(e *EnergyConfig, cal *Calibration) ([]Threshold, error) {
	if e.Disabled {
		return nil, nil
	}
	var cl *calibration.ClosedLoop // the closed-loop calibration, if the rule is the one it was certified for
	clNote := ""                   // why it does not apply otherwise
	if cal != nil && cal.ClosedLoop != nil {
		c := cal.ClosedLoop
		w := nOfMFor(e, c.Score)
		if r := e.Rule; r.Kind == RuleNOfM && c.Rule.Kind == RuleNOfM && w.N == c.Rule.N && w.M == c.Rule.M {
			cl = c
		} else {
			rule := ruleName(r)
			if r.Kind == RuleNOfM && w != r.NOfM { // the score's own window
				rule = fmt.Sprintf("%s %d/%d for %s", r.Kind, w.N, w.M, c.Score)
			}
			clNote = fmt.Sprintf(" (closed_loop was fitted for %s %d/%d, the rule is %s)", c.Rule.Kind, c.Rule.N, c.Rule.M, rule)
		}
	}
	scores, keys := e.Scores, []string(nil)
	if len(scores) == 0 {
		var err error
		if scores, keys, err = defaultScores(cl, cal, clNote); err != nil {
			return nil, err
		}
	}
	cusum := e.Rule.Kind == RuleCUSUM
	var errs []error
	out := make([]Threshold, 0, len(scores))
	for i, s := range scores {
		key := fmt.Sprintf("energy.scores[%d]", i)
		if keys != nil {
			key = keys[i]
		}
		fix := func(fields ...string) string { return fixHint(key, s.Name, keys == nil, fields...) }
		sc, ok := ParseScore(s.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("safety: %s.name: %q is not a score — use %s", key, s.Name, scoreList))
			continue
		}
		t := Threshold{Score: sc}
		if e.Rule.Kind == RuleNOfM {
			t.NOfM = nOfMFor(e, s.Name)
		}
		var stats *calibration.ScoreStats
		statsKey := "calibration" // where stats come from, for Source
		if cal != nil {
			if st, ok := cal.Scores[s.Name]; ok {
				stats = &st
			}
			if sc == ScoreStateEnergy {
				stats, statsKey = cal.StateEnergy, "state_energy.calibration"
			}
		}
		q := s.Quantile
		if q == "" {
			q = defaultQuantile
		}
		note := ""
		if cal != nil && cal.ClosedLoop != nil && cal.ClosedLoop.Score == s.Name {
			note = clNote
		}
		switch {
		case s.Threshold != nil:
			t.Value, t.Source = *s.Threshold, "config"
		case cl != nil && cl.Score == s.Name:
			if err := cl.Validate(); err != nil {
				errs = append(errs, inPackage(err)...)
				continue
			}
			t.Bands, t.BandUnit = slices.Clone(cl.Bands), cl.Unit()
			t.Value, t.Source = t.Bands[0].Threshold, "calibration.closed_loop"
			if cl.Ceiling != nil {
				c := *cl.Ceiling
				t.Ceiling = &c
			}
		case cal != nil && cal.Recommended.Score == s.Name && isFinite(cal.Recommended.Threshold):
			t.Value, t.Source = cal.Recommended.Threshold, "calibration.recommended"+note
		case stats != nil && stats.Quantiles != nil && isFinite(stats.Quantiles[q]) && hasKey(stats.Quantiles, q):
			t.Value, t.Source = stats.Quantiles[q], statsKey+".quantiles["+q+"]"+note
		case sc == ScoreStateEnergy && stats == nil:
			errs = append(errs, fmt.Errorf("safety: %s: no threshold for score %q: the bundle has no state term (no \"state_energy\" block) — train one (python -m energyflow state-term) or watch another score%s", key, s.Name, note))
			continue
		case sc == ScoreStateEnergy:
			errs = append(errs, fmt.Errorf("safety: %s: no threshold for score %q: not set in the config and the bundle's state_energy.calibration has no quantile %q%s — %s", key, s.Name, q, note, fix("threshold", "quantile")))
			continue
		default:
			errs = append(errs, fmt.Errorf("safety: %s: no threshold for score %q: not set in the config and the bundle calibration has neither a recommendation nor quantile %q for it%s — %s", key, s.Name, q, note, fix("threshold")))
			continue
		}
		if cusum {
			switch {
			case s.Scale != nil:
				t.Scale = *s.Scale
			case stats != nil && stats.Std > 0 && isFinite(stats.Std):
				t.Scale = stats.Std
			default:
				errs = append(errs, fmt.Errorf("safety: %s.scale: the cusum rule needs a scale for score %q and the bundle's %s has no std for it — %s", key, s.Name, statsKey, fix("scale")))
				continue
			}
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// defaultScores is the watch set when energy.scores is empty, with the key
// naming each entry in messages. A bundle with the state term
// (cal.StateEnergy) watches "state_energy" alone, on its closed-loop
// calibration if it has one, else its held-out quantile: the policy energy
// does not see an unseen state (score matching fixes it only up to a
// state-dependent constant), the state term does, and measured through the
// runtime the energy stop added false stops and caught fewer of every fault
// (docs/safety.md, "What is watched by default"). A bundle without it
// watches the calibration's closed-loop score (cl: when it applies to the
// rule), else its recommended score. clNote says why the bundle's
// closed_loop does not apply, if it does not.
func defaultScores(cl *calibration.ClosedLoop, cal *Calibration, clNote string) ([]ScoreConfig, []string, error) {
	switch {
	case cal != nil && cal.StateEnergy != nil:
		key := "state_energy.calibration"
		if cl != nil && cl.Score == ScoreStateEnergy.String() {
			key = "calibration.closed_loop"
		}
		return []ScoreConfig{{Name: ScoreStateEnergy.String()}}, []string{key}, nil
	case cl != nil:
		return []ScoreConfig{{Name: cl.Score}}, []string{"calibration.closed_loop"}, nil
	case cal != nil && cal.Recommended.Score != "":
		return []ScoreConfig{{Name: cal.Recommended.Score}}, []string{"calibration.recommended"}, nil
	default:
		return nil, nil, errors.New("safety: energy.scores: empty and the bundle has no calibration to recommend a score — set energy.scores (with a threshold) or run the bundle's calibrate step" + clNote)
	}
}

// fixHint tells how to give a monitored score what it lacks: set the fields
// of its entry (key, "energy.scores[i]") when the config lists it, else (a
// score of the default watch set) list it in energy.scores with them.
func fixHint(key, name string, listed bool, fields ...string) string {
	if listed {
		return "set " + key + "." + strings.Join(fields, " or "+key+".")
	}
	return fmt.Sprintf("list %q in energy.scores with a %s", name, strings.Join(fields, " or "))
}

// ruleName describes a rule for messages ("n_of_m 3/5", "cusum").
func ruleName(r RuleConfig) string {
	if r.Kind == RuleNOfM {
		return fmt.Sprintf("%s %d/%d", r.Kind, r.NOfM.N, r.NOfM.M)
	}
	return r.Kind
}

// inPackage returns each error joined in err (errors.Join) prefixed by
// this package, as the gate's own messages are.
func inPackage(err error) []error {
	var errs []error
	for _, e := range unwrapJoin(err) {
		errs = append(errs, fmt.Errorf("safety: %w", e))
	}
	return errs
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
