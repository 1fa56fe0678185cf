package safety

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/energyflow/edge/calibration"
	"gopkg.in/yaml.v3"
)

const exampleYAML = `
energy:
  scores:
    - name: energy
    - name: centered_energy
      threshold: 4.5
  rule:
    kind: cusum
    cusum: {drift: 0.25, limit: 3}
limits:
  max_velocity: [1, 1, 1]
  max_acceleration: [8, 8, 8]
  max_jerk: [200, 200, 200]
  max_delta: [0.5, 0.5, 0.5]
  soft_lower: [-0.5, -0.5, -0.2]
  soft_upper: [0.5, 0.5, 0.4]
  k_position: [5, 5, 5]
  gripper: {min: -1, max: 1, max_delta: 0.5}
watchdog:
  score_max_age: 150ms
  inference_deadline: 300ms
  camera_max_age: 0s
  arm_max_age: 200ms
  loop_max_late: 30ms
events:
  trace_before: 100
  trace_after: 20
recovery:
  speed_fraction: 0.5
  retrace_window: 3s
  time_limit: 1m
`

func TestConfigYAML(t *testing.T) {
	cfg := DefaultConfig()
	if err := yaml.Unmarshal([]byte(exampleYAML), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Watchdog.ScoreMaxAge != 150*time.Millisecond || cfg.Watchdog.CameraMaxAge != 0 ||
		cfg.Energy.Rule.CUSUM.Limit != 3 || *cfg.Energy.Scores[1].Threshold != 4.5 ||
		cfg.Limits.KPosition[2] != 5 || cfg.Limits.Gripper.MaxDelta != 0.5 || cfg.Events.TraceAfter != 20 ||
		cfg.Recovery != (RecoveryConfig{SpeedFraction: 0.5, RetraceWindow: 3 * time.Second, TimeLimit: time.Minute, JogHold: 300 * time.Millisecond}) {
		t.Fatalf("decoded %+v", cfg)
	}
	// Keys not in the file keep their defaults.
	if cfg.Energy.Rule.NOfM != DefaultConfig().Energy.Rule.NOfM {
		t.Fatal("default lost")
	}
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		keys []string
	}{
		{"no velocity", func(c *Config) { c.Limits.MaxVelocity = nil }, []string{"limits.max_velocity"}},
		{"axes mismatch", func(c *Config) { c.Limits.MaxAcceleration = []float64{1} }, []string{"limits.max_acceleration"}},
		{"negative", func(c *Config) { c.Limits.MaxDelta = []float64{1, -1, 1} }, []string{"limits.max_delta[1]"}},
		{"jerk needs accel", func(c *Config) { c.Limits.MaxJerk = []float64{1, 1, 1} }, []string{"limits.max_jerk"}},
		{"soft incomplete", func(c *Config) { c.Limits.SoftLower = []float64{0, 0, 0} },
			[]string{"limits.soft_upper", "limits.k_position"}},
		{"soft inverted", func(c *Config) {
			softLimits(c)
			c.Limits.SoftLower[2] = 3
		}, []string{"limits.soft_lower[2]"}},
		{"gripper", func(c *Config) { c.Limits.Gripper = GripperLimits{Min: 1, Max: -1, MaxDelta: -1} },
			[]string{"limits.gripper:", "limits.gripper.max_delta"}},
		{"rule", func(c *Config) { c.Energy.Rule.Kind = "median" }, []string{"energy.rule.kind"}},
		{"n of m", func(c *Config) { c.Energy.Rule.NOfM = NOfMConfig{N: 0, M: 65} },
			[]string{"energy.rule.n_of_m.m", "energy.rule.n_of_m.n"}},
		{"cusum", func(c *Config) {
			c.Energy.Rule.Kind = RuleCUSUM
			c.Energy.Rule.CUSUM = CUSUMConfig{Drift: -1, Limit: 0}
		}, []string{"energy.rule.cusum.drift", "energy.rule.cusum.limit"}},
		{"scores", func(c *Config) {
			c.Energy.Scores = []ScoreConfig{{Name: "reward"}, {Name: "energy", Threshold: f64(math.NaN())}, {Name: "energy", Scale: f64(0)}}
		}, []string{"energy.scores[0].name", "energy.scores[1].threshold", "energy.scores[2].name", "energy.scores[2].scale"}},
		{"a score's window", func(c *Config) {
			c.Energy.Scores = []ScoreConfig{{Name: "energy", NOfM: &NOfMConfig{N: 0, M: 5}}, {Name: "state_energy", NOfM: &NOfMConfig{N: 2, M: 65}}}
		}, []string{"energy.scores[0].n_of_m.n", "energy.scores[1].n_of_m.m"}},
		{"a score's window under cusum", func(c *Config) {
			c.Energy.Rule.Kind = RuleCUSUM
			c.Energy.Rule.CUSUM = CUSUMConfig{Drift: 0.5, Limit: 5}
			c.Energy.Scores = []ScoreConfig{{Name: "state_energy", NOfM: &NOfMConfig{N: 2, M: 5}}}
		}, []string{"energy.scores[0].n_of_m"}},
		{"watchdog", func(c *Config) { c.Watchdog = WatchdogConfig{CameraMaxAge: -1} },
			[]string{"watchdog.score_max_age", "watchdog.inference_deadline", "watchdog.arm_max_age", "watchdog.loop_max_late", "watchdog.camera_max_age"}},
		{"frozen camera motion negative", func(c *Config) { c.Watchdog.CameraFrozenMotion = -0.01 }, []string{"watchdog.camera_frozen_motion"}},
		{"frozen camera motion NaN", func(c *Config) { c.Watchdog.CameraFrozenMotion = math.NaN() }, []string{"watchdog.camera_frozen_motion"}},
		{"frozen camera without a camera", func(c *Config) { c.Watchdog.CameraFrozenMotion, c.Watchdog.CameraMaxAge = 0.01, 0 },
			[]string{"watchdog.camera_frozen_motion"}},
		{"frozen camera wait 0", func(c *Config) { c.Watchdog.CameraFrozenMotion, c.Watchdog.CameraFrozenWait = 0.01, 0 },
			[]string{"watchdog.camera_frozen_wait"}},
		{"camera moved 1.5", func(c *Config) { c.Watchdog.CameraMoved = 1.5 }, []string{"watchdog.camera_moved"}},
		{"camera moved NaN", func(c *Config) { c.Watchdog.CameraMoved = math.NaN() }, []string{"watchdog.camera_moved"}},
		{"camera unseen negative", func(c *Config) { c.Watchdog.CameraUnseen = -1 }, []string{"watchdog.camera_unseen"}},
		{"camera unseen without a camera", func(c *Config) { c.Watchdog.CameraUnseen = 6; c.Watchdog.CameraMaxAge = 0 }, []string{"watchdog.camera_unseen"}},
		{"camera moved without a camera", func(c *Config) { c.Watchdog.CameraMoved, c.Watchdog.CameraMaxAge = 0.5, 0 },
			[]string{"watchdog.camera_moved"}},
		{"events", func(c *Config) { c.Events = EventsConfig{TraceBefore: 0, TraceAfter: 5} },
			[]string{"events.trace_before", "events.trace_after"}},
		{"recovery fraction 0", func(c *Config) { c.Recovery.SpeedFraction = 0 }, []string{"recovery.speed_fraction"}},
		{"recovery fraction 1.5", func(c *Config) { c.Recovery.SpeedFraction = 1.5 }, []string{"recovery.speed_fraction"}},
		{"recovery fraction NaN", func(c *Config) { c.Recovery.SpeedFraction = math.NaN() }, []string{"recovery.speed_fraction"}},
		{"recovery window 0", func(c *Config) { c.Recovery.RetraceWindow = 0 }, []string{"recovery.retrace_window"}},
		{"recovery window 61s", func(c *Config) { c.Recovery.RetraceWindow = 61 * time.Second }, []string{"recovery.retrace_window"}},
		{"recovery durations", func(c *Config) { c.Recovery.TimeLimit, c.Recovery.JogHold = 6*time.Minute, -time.Millisecond },
			[]string{"recovery.time_limit", "recovery.jog_hold"}},
		// tracking: refused whether the monitor is on or not
		{"tracking window 0", func(c *Config) { c.Tracking.Window = 0 }, []string{"tracking.window"}},
		{"tracking window negative", func(c *Config) { c.Tracking.Enabled, c.Tracking.Window = true, -time.Millisecond }, []string{"tracking.window"}},
		{"tracking window 11s", func(c *Config) { c.Tracking.Window = 11 * time.Second }, []string{"tracking.window"}},
		{"tracking tolerance 0", func(c *Config) { c.Tracking.Tolerance = 0 }, []string{"tracking.tolerance"}},
		{"tracking tolerance negative", func(c *Config) { c.Tracking.Tolerance = -0.02 }, []string{"tracking.tolerance"}},
		{"tracking tolerance NaN", func(c *Config) { c.Tracking.Tolerance = math.NaN() }, []string{"tracking.tolerance"}},
		{"tracking tolerance +Inf", func(c *Config) { c.Tracking.Tolerance = math.Inf(1) }, []string{"tracking.tolerance"}},
		{"tracking response negative", func(c *Config) { c.Tracking.Response = -time.Millisecond }, []string{"tracking.response"}},
		{"tracking per", func(c *Config) { c.Tracking.Per = "meter" }, []string{"tracking.per"}},
		{"tracking sustained negative", func(c *Config) { c.Tracking.Sustained = -0.01 }, []string{"tracking.sustained"}},
		{"tracking sustained NaN", func(c *Config) { c.Tracking.Sustained = math.NaN() }, []string{"tracking.sustained"}},
		{"tracking drift negative", func(c *Config) { c.Tracking.Drift = -1 }, []string{"tracking.drift"}},
		{"tracking drift +Inf", func(c *Config) { c.Tracking.Drift = math.Inf(1) }, []string{"tracking.drift"}},
		{"tracking scale", func(c *Config) { c.Tracking.Scale = []float64{0.01, 0, math.Inf(1)} }, []string{"tracking.scale[1]", "tracking.scale[2]"}},
		{"tracking scale axes", func(c *Config) { c.Tracking.Scale = []float64{0.01} }, []string{"tracking.scale"}},
		{"tracking lower alone", func(c *Config) { c.Tracking.Lower = []float64{0, 0, 0} }, []string{"tracking.upper"}},
		{"tracking limits", func(c *Config) {
			c.Tracking.Lower, c.Tracking.Upper = []float64{0, 1, math.NaN()}, []float64{1, 1, 1}
		}, []string{"tracking.lower[2]", "tracking.lower[1]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, k := range tc.keys {
				if !strings.Contains(msg, "safety: "+k) {
					t.Errorf("error does not name %q:\n%s", k, msg)
				}
			}
			if n := strings.Count(msg, "safety: "); n != len(tc.keys) {
				t.Errorf("%d problems reported, want %d:\n%s", n, len(tc.keys), msg)
			}
		})
	}
	// Everything at once: all reported together.
	c := Config{}
	if err := c.Validate(); err == nil || strings.Count(err.Error(), "\n") < 5 {
		t.Fatalf("zero config: %v", err)
	}
}

const calJSON = `{"n_windows": 512, "seed": 0, "steps": 20,
 "scores": {
   "energy":          {"mean": 2.0, "std": 0.5, "quantiles": {"50": 2.0, "90": 2.6, "99": 3.1, "99.9": 3.6}},
   "centered_energy": {"mean": 0.0, "std": 0.3, "quantiles": {"50": 0.0, "90": 0.4, "99": 0.7, "99.9": 0.9}}},
 "recommended": {"score": "energy", "threshold": 3.7, "rule": "quantile 99.9 of held-out windows"}}`

func TestResolveThresholds(t *testing.T) {
	var cal Calibration
	if err := json.Unmarshal([]byte(calJSON), &cal); err != nil {
		t.Fatal(err)
	}
	bands := []calibration.Band{{From: 0, Mean: 2, Std: 0.5, Threshold: 3}, {From: 20, Mean: 1.8, Std: 0.4, Threshold: 2.6}}
	withCL := func(score string, n, m int, bands []calibration.Band) *Calibration {
		c := cal
		c.ClosedLoop = &calibration.ClosedLoop{Score: score, Alpha: 0.1, Rule: calibration.Rule{Kind: RuleNOfM, N: n, M: m}, Q: 2, Bands: bands}
		return &c
	}
	withUnit := func(unit calibration.BandUnit) *Calibration {
		c := withCL("energy", 3, 5, bands)
		c.ClosedLoop.BandUnit = unit
		return c
	}
	nOfM := func(n, m int) RuleConfig { return RuleConfig{Kind: RuleNOfM, NOfM: NOfMConfig{N: n, M: m}} }
	// The state term's held-out statistics (the manifest's state_energy block).
	stateStats := &calibration.ScoreStats{Mean: 0.1, Std: 1.2, Quantiles: map[string]float64{"50": 0, "90": 1.4, "99": 2.9, "99.9": 4.2}}
	withState := func(c *Calibration) *Calibration {
		if c == nil {
			return &Calibration{StateEnergy: stateStats}
		}
		cc := *c
		cc.StateEnergy = stateStats
		return &cc
	}
	withStats := func(c *Calibration, st *calibration.ScoreStats) *Calibration {
		cc := *c
		cc.StateEnergy = st
		return &cc
	}
	// A diffusion bundle's: no energy calibration, a closed loop of the state score.
	diffusionCL := func(n, m int) *Calibration {
		return &Calibration{StateEnergy: stateStats,
			Block: calibration.Block{ClosedLoop: &calibration.ClosedLoop{Score: "state_energy", Alpha: 0.1, Rule: calibration.Rule{Kind: RuleNOfM, N: n, M: m}, Q: 2, Bands: bands}}}
	}
	watchState := func(r RuleConfig, sc ...ScoreConfig) EnergyConfig {
		if len(sc) == 0 {
			sc = []ScoreConfig{{Name: "state_energy"}}
		}
		return EnergyConfig{Scores: sc, Rule: r}
	}
	cases := []struct {
		name   string
		e      EnergyConfig
		cal    *Calibration
		want   []Threshold
		errHas string
	}{
		{"closed loop takes precedence", EnergyConfig{Rule: nOfM(3, 5)}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"closed loop for a listed score", EnergyConfig{Scores: []ScoreConfig{{Name: "energy"}}, Rule: nOfM(3, 5)}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"closed loop picks the score", EnergyConfig{Rule: nOfM(3, 5)}, withCL("centered_energy", 3, 5, bands),
			[]Threshold{{Score: ScoreCentered, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"closed loop in ticks", EnergyConfig{Rule: nOfM(3, 5)}, withUnit(calibration.BandTicks),
			[]Threshold{{Score: ScoreEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandTicks}}, ""},
		{"closed loop in fresh scores", EnergyConfig{Rule: nOfM(3, 5)}, withUnit(calibration.BandFreshScores),
			[]Threshold{{Score: ScoreEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"closed loop in an unknown unit", EnergyConfig{Rule: nOfM(3, 5)}, withUnit("seconds"), nil, `calibration.closed_loop.band_unit: got "seconds"`},
		{"override beats closed loop", EnergyConfig{Scores: []ScoreConfig{{Name: "energy", Threshold: f64(5)}}, Rule: nOfM(3, 5)}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 5, Source: "config"}}, ""},
		{"closed loop on another score", EnergyConfig{Scores: []ScoreConfig{{Name: "energy"}}, Rule: nOfM(3, 5)}, withCL("centered_energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Source: "calibration.recommended"}}, ""},
		{"closed loop for another n of m", EnergyConfig{Rule: nOfM(2, 3)}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Source: "calibration.recommended (closed_loop was fitted for n_of_m 3/5, the rule is n_of_m 2/3)"}}, ""},
		{"closed loop with cusum", EnergyConfig{Rule: RuleConfig{Kind: RuleCUSUM}}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Scale: 0.5, Source: "calibration.recommended (closed_loop was fitted for n_of_m 3/5, the rule is cusum)"}}, ""},
		{"closed loop mismatch, quantile", EnergyConfig{Scores: []ScoreConfig{{Name: "centered_energy"}}, Rule: nOfM(2, 3)}, withCL("centered_energy", 3, 5, bands),
			[]Threshold{{Score: ScoreCentered, Value: 0.9, Source: "calibration.quantiles[99.9] (closed_loop was fitted for n_of_m 3/5, the rule is n_of_m 2/3)"}}, ""},
		{"invalid closed loop", EnergyConfig{Rule: nOfM(3, 5)}, withCL("energy", 3, 5, []calibration.Band{{From: 0, Std: 1, Threshold: 3}, {From: 0, Std: 1, Threshold: 2}}),
			nil, "calibration.closed_loop.bands[1].from"},
		{"closed loop without bands", EnergyConfig{Rule: nOfM(3, 5)}, withCL("energy", 3, 5, nil), nil, "calibration.closed_loop.bands: empty"},
		{"recommended by default", EnergyConfig{Rule: RuleConfig{Kind: RuleNOfM}}, &cal,
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Source: "calibration.recommended"}}, ""},
		{"override", EnergyConfig{Scores: []ScoreConfig{{Name: "energy", Threshold: f64(5)}}, Rule: RuleConfig{Kind: RuleNOfM}}, &cal,
			[]Threshold{{Score: ScoreEnergy, Value: 5, Source: "config"}}, ""},
		{"quantile of another score", EnergyConfig{Scores: []ScoreConfig{{Name: "centered_energy", Quantile: "99"}}, Rule: RuleConfig{Kind: RuleNOfM}}, &cal,
			[]Threshold{{Score: ScoreCentered, Value: 0.7, Source: "calibration.quantiles[99]"}}, ""},
		{"cusum scale from std", EnergyConfig{Scores: []ScoreConfig{{Name: "centered_energy"}}, Rule: RuleConfig{Kind: RuleCUSUM}}, &cal,
			[]Threshold{{Score: ScoreCentered, Value: 0.9, Scale: 0.3, Source: "calibration.quantiles[99.9]"}}, ""},
		{"cusum scale override", EnergyConfig{Scores: []ScoreConfig{{Name: "energy", Threshold: f64(1), Scale: f64(2)}}, Rule: RuleConfig{Kind: RuleCUSUM}}, nil,
			[]Threshold{{Score: ScoreEnergy, Value: 1, Scale: 2, Source: "config"}}, ""},
		{"no calibration", EnergyConfig{Rule: RuleConfig{Kind: RuleNOfM}}, nil, nil, "energy.scores: empty"},
		{"missing quantile", EnergyConfig{Scores: []ScoreConfig{{Name: "centered_energy", Quantile: "95"}}, Rule: RuleConfig{Kind: RuleNOfM}}, &cal, nil, "energy.scores[0].threshold"},
		{"cusum without std", EnergyConfig{Scores: []ScoreConfig{{Name: "energy", Threshold: f64(1)}}, Rule: RuleConfig{Kind: RuleCUSUM}}, nil, nil, "energy.scores[0].scale"},

		// state_energy: the closed-loop calibration when it is for that
		// score, else the state_energy block's held-out q99.9.
		{"state: held-out q99.9 of the block", watchState(nOfM(3, 5)), withState(&cal),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"state: block only, no calibration block", watchState(nOfM(3, 5)), withState(nil),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"state: closed loop for it", watchState(nOfM(3, 5)), withState(withCL("state_energy", 2, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"state: closed loop for energy", watchState(nOfM(3, 5)), withState(withCL("energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"state: closed loop for another rule", watchState(nOfM(2, 3)), withState(withCL("state_energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9] (closed_loop was fitted for n_of_m 3/5, the rule is n_of_m 2/5 for state_energy)"}}, ""},
		{"state: its own window, the closed loop fitted for it", watchState(nOfM(2, 3), ScoreConfig{Name: "state_energy", NOfM: &NOfMConfig{N: 3, M: 5}}),
			withState(withCL("state_energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores, NOfM: NOfMConfig{N: 3, M: 5}}}, ""},
		{"energy: its own window", EnergyConfig{Scores: []ScoreConfig{{Name: "energy", NOfM: &NOfMConfig{N: 1, M: 1}}}, Rule: nOfM(3, 5)}, &cal,
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Source: "calibration.recommended", NOfM: NOfMConfig{N: 1, M: 1}}}, ""},
		{"state: another quantile", watchState(nOfM(3, 5), ScoreConfig{Name: "state_energy", Quantile: "99"}), withState(&cal),
			[]Threshold{{Score: ScoreStateEnergy, Value: 2.9, Source: "state_energy.calibration.quantiles[99]"}}, ""},
		{"state: override", watchState(nOfM(3, 5), ScoreConfig{Name: "state_energy", Threshold: f64(6)}), nil,
			[]Threshold{{Score: ScoreStateEnergy, Value: 6, Source: "config"}}, ""},
		{"state: cusum scale from the block's std", watchState(RuleConfig{Kind: RuleCUSUM}), withState(&cal),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Scale: 1.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"state: with energy", watchState(nOfM(3, 5), ScoreConfig{Name: "energy"}, ScoreConfig{Name: "state_energy"}), withState(&cal),
			[]Threshold{{Score: ScoreEnergy, Value: 3.7, Source: "calibration.recommended"},
				{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"state: no state term", watchState(nOfM(3, 5)), &cal, nil, `energy.scores[0]: no threshold for score "state_energy": the bundle has no state term`},
		{"state: missing quantile", watchState(nOfM(3, 5), ScoreConfig{Name: "state_energy", Quantile: "95"}), withState(&cal), nil,
			`state_energy.calibration has no quantile "95"`},

		// The default watch set (energy.scores empty) of a bundle with the
		// state term: state_energy alone, on its closed loop when the bundle
		// has one for it (and the rule it was fitted for), else its held-out
		// quantile; the energy calibration does not add the energy.
		{"default: closed loop of the energy and the state term", EnergyConfig{Rule: nOfM(3, 5)}, withState(withCL("energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"default: recommended and the state term", EnergyConfig{Rule: nOfM(3, 5)}, withState(&cal),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"default: closed loop for another rule and the state term", EnergyConfig{Rule: nOfM(2, 3)}, withState(withCL("energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"default: cusum, the state term scaled by its std", EnergyConfig{Rule: RuleConfig{Kind: RuleCUSUM}}, withState(&cal),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Scale: 1.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"default: closed loop of the state score, watched once", EnergyConfig{Rule: nOfM(3, 5)}, withState(withCL("state_energy", 2, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"default: closed loop of the state score for another rule", EnergyConfig{Rule: nOfM(2, 3)}, withState(withCL("state_energy", 3, 5, bands)),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9] (closed_loop was fitted for n_of_m 3/5, the rule is n_of_m 2/5 for state_energy)"}}, ""},
		{"default: no state term, unchanged", EnergyConfig{Rule: nOfM(3, 5)}, withCL("energy", 3, 5, bands),
			[]Threshold{{Score: ScoreEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"default: diffusion, no calibration block", EnergyConfig{Rule: nOfM(3, 5)}, withState(nil),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9]"}}, ""},
		{"default: diffusion, closed loop of the state score", EnergyConfig{Rule: nOfM(3, 5)}, diffusionCL(2, 5),
			[]Threshold{{Score: ScoreStateEnergy, Value: 3, Source: "calibration.closed_loop", Bands: bands, BandUnit: calibration.BandFreshScores}}, ""},
		{"default: diffusion, closed loop for another rule", EnergyConfig{Rule: nOfM(2, 3)}, diffusionCL(3, 5),
			[]Threshold{{Score: ScoreStateEnergy, Value: 4.2, Source: "state_energy.calibration.quantiles[99.9] (closed_loop was fitted for n_of_m 3/5, the rule is n_of_m 2/5 for state_energy)"}}, ""},
		{"default: the state term without q99.9", EnergyConfig{Rule: nOfM(3, 5)}, withStats(&cal, &calibration.ScoreStats{Std: 1, Quantiles: map[string]float64{"99": 2.9}}), nil,
			`safety: state_energy.calibration: no threshold for score "state_energy": not set in the config and the bundle's state_energy.calibration has no quantile "99.9" — list "state_energy" in energy.scores with a threshold or quantile`},
		{"default: cusum, the state term without std", EnergyConfig{Rule: RuleConfig{Kind: RuleCUSUM}}, withStats(&cal, &calibration.ScoreStats{Quantiles: map[string]float64{"99.9": 4.2}}), nil,
			`safety: state_energy.calibration.scale: the cusum rule needs a scale for score "state_energy" and the bundle's state_energy.calibration has no std for it — list "state_energy" in energy.scores with a scale`},
		{"default: energy statistics without a recommendation, no state term", EnergyConfig{Rule: nOfM(3, 5)}, &Calibration{Block: calibration.Block{Scores: cal.Scores}}, nil,
			"energy.scores: empty and the bundle has no calibration to recommend a score"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveThresholds(&tc.e, tc.cal)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("got %v, want error with %q", err, tc.errHas)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v", got)
			}
			for i := range got {
				want := tc.want[i]
				if tc.e.Rule.Kind == RuleNOfM && want.NOfM == (NOfMConfig{}) {
					// the window: the rule's, 2 of 5 for the state score
					want.NOfM = tc.e.Rule.NOfM
					if want.Score == ScoreStateEnergy {
						want.NOfM = NOfMConfig{N: 2, M: 5}
					}
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Fatalf("got %+v, want %+v", got[i], want)
				}
			}
		})
	}
}

func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for k := Kind(0); k < NumKinds; k++ {
		s := k.String()
		if s == "" || seen[s] || strings.Contains(s, "Kind(") {
			t.Fatalf("kind %d name %q", k, s)
		}
		seen[s] = true
	}
	for l := Limit(0); l < NumLimits; l++ {
		if strings.Contains(l.String(), "Limit(") {
			t.Fatalf("limit %d unnamed", l)
		}
	}
	for s := Score(0); s < NumScores; s++ {
		if p, ok := ParseScore(s.String()); !ok || p != s {
			t.Fatalf("ParseScore(%q) = %v, %v", s.String(), p, ok)
		}
	}
	if s, ok := ParseScore("state_energy"); !ok || s != ScoreStateEnergy {
		t.Fatal("ParseScore(state_energy)")
	}
	if _, ok := ParseScore("vibes"); ok {
		t.Fatal("ParseScore accepted an unknown name")
	}
	if Kind(200).String() != "Kind(200)" || Stopped.String() != "STOPPED" || Running.String() != "RUNNING" {
		t.Fatal("String")
	}
}
