package runtime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

// The energy threshold is calibrated at one K; a run at another K is told so
// when the threshold in use is the calibrated one.
func TestWarnCalibrationSteps(t *testing.T) {
	thr := 400.0
	cases := []struct {
		name        string
		policySteps int // 0 = the bundle's sampler steps (20)
		scores      []safety.ScoreConfig
		disabled    bool
		calibration *calibration.Block
		state       bool // the bundle has the state term
		warn        bool
	}{
		{name: "default K is the calibrated K", calibration: &calibration.Block{Steps: 20}},
		{name: "same K set explicitly", policySteps: 20, calibration: &calibration.Block{Steps: 20}},
		{name: "K = 10 on a K = 20 calibration", policySteps: 10, calibration: &calibration.Block{Steps: 20}, warn: true},
		{name: "K = 10, calibrated threshold via quantile", policySteps: 10, calibration: &calibration.Block{Steps: 20},
			scores: []safety.ScoreConfig{{Name: "energy", Quantile: "99"}}, warn: true},
		{name: "K = 10, own threshold", policySteps: 10, calibration: &calibration.Block{Steps: 20},
			scores: []safety.ScoreConfig{{Name: "energy", Threshold: &thr}}},
		{name: "K = 10, energy stop off", policySteps: 10, calibration: &calibration.Block{Steps: 20}, disabled: true},
		{name: "K = 10, the default watch is the state term", policySteps: 10, state: true,
			calibration: &calibration.Block{Steps: 20, ClosedLoop: &calibration.ClosedLoop{Score: "energy"}}},
		{name: "K = 10, energy listed beside the state term", policySteps: 10, state: true,
			calibration: &calibration.Block{Steps: 20, ClosedLoop: &calibration.ClosedLoop{Score: "state_energy"}},
			scores:      []safety.ScoreConfig{{Name: "state_energy"}, {Name: "energy"}}, warn: true},
		{name: "K = 10, energy's closed loop, no state term", policySteps: 10,
			calibration: &calibration.Block{Steps: 20, ClosedLoop: &calibration.ClosedLoop{Score: "energy"}}, warn: true},
		{name: "no calibration", policySteps: 10},
		{name: "calibration without K", policySteps: 10, calibration: &calibration.Block{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			cfg := Config{}
			cfg.Policy.Steps = tc.policySteps
			cfg.Safety.Energy.Scores = tc.scores
			cfg.Safety.Energy.Disabled = tc.disabled
			m := &engines.Manifest{Name: "b", Sampler: engines.SamplerSpec{Steps: 20}, Calibration: tc.calibration}
			if tc.state {
				m.StateEnergy = &engines.StateEnergySpec{}
			}
			warnCalibrationSteps(&cfg, m, log)
			got := strings.Contains(buf.String(), "calibrated at another number of sampler steps")
			if got != tc.warn {
				t.Fatalf("warned = %v, want %v; log: %q", got, tc.warn, buf.String())
			}
			if got && !strings.Contains(buf.String(), "policy_steps=10 calibration_steps=20") {
				t.Errorf("the warning should name both K: %q", buf.String())
			}
		})
	}
}

// A closed-loop threshold is certified for the rate and K its episodes were
// driven at; a run at another rate or K is told so when it uses it.
func TestWarnClosedLoopConditions(t *testing.T) {
	cl := &calibration.ClosedLoop{Score: "state_energy", RateHz: 20, StepsK: 10}
	at10 := []*calibration.ClosedLoop{{Score: "state_energy", RateHz: 10, StepsK: 10}}
	used := []safety.Threshold{{Score: safety.ScoreStateEnergy, Source: "calibration.closed_loop"}}
	heldOut := []safety.Threshold{{Score: safety.ScoreStateEnergy, Source: "state_energy.calibration.quantiles[99.9]"}}
	cases := []struct {
		name        string
		rate        float64
		policySteps int // 0 = the bundle's sampler steps (10)
		closedLoop  *calibration.ClosedLoop
		others      []*calibration.ClosedLoop // calibration.closed_loop_others
		th          []safety.Threshold
		warn        bool
		useRate     float64 // the rate of the closed loop useClosedLoopFor leaves in closed_loop (0: none)
	}{
		{name: "same rate and K", rate: 20, closedLoop: cl, th: used},
		{name: "same rate, K set explicitly", rate: 20, policySteps: 10, closedLoop: cl, th: used},
		{name: "the runtime's default 10 Hz on a 20 Hz calibration", rate: 10, closedLoop: cl, th: used, warn: true},
		{name: "another K", rate: 20, policySteps: 20, closedLoop: cl, th: used, warn: true},
		{name: "another rate, but the closed loop is not used", rate: 10, closedLoop: cl, th: heldOut},
		{name: "no closed loop", rate: 10, th: heldOut},
		{name: "closed loop without rate or K", rate: 10, policySteps: 20, closedLoop: &calibration.ClosedLoop{Score: "state_energy"}, th: used},
		{name: "10 Hz with a 10 Hz calibration beside the 20 Hz one", rate: 10, closedLoop: cl, others: at10, th: used, useRate: 10},
		{name: "20 Hz with a 10 Hz calibration beside", rate: 20, closedLoop: cl, others: at10, th: used, useRate: 20},
		{name: "5 Hz: neither fits, closed_loop is used", rate: 5, closedLoop: cl, others: at10, th: used, warn: true, useRate: 20},
		{name: "10 Hz at another K: neither fits", rate: 10, policySteps: 20, closedLoop: cl, others: at10, th: used, warn: true, useRate: 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			cfg := Config{}
			cfg.Loop.RateHz = tc.rate
			cfg.Policy.Steps = tc.policySteps
			m := &engines.Manifest{Name: "b", Sampler: engines.SamplerSpec{Steps: 10},
				Calibration: &calibration.Block{ClosedLoop: tc.closedLoop, ClosedLoopOthers: tc.others}}
			useClosedLoopFor(&cfg, m, log)
			if tc.useRate != 0 && m.Calibration.ClosedLoop.RateHz != tc.useRate {
				t.Errorf("closed_loop in use is the %g Hz one, want %g Hz", m.Calibration.ClosedLoop.RateHz, tc.useRate)
			}
			warnClosedLoopConditions(&cfg, m, tc.th, log)
			got := strings.Contains(buf.String(), "certified at another control rate")
			if got != tc.warn {
				t.Fatalf("warned = %v, want %v; log: %q", got, tc.warn, buf.String())
			}
			if got && !strings.Contains(buf.String(), "calibration_rate_hz=20") {
				t.Errorf("the warning should name the calibration's rate: %q", buf.String())
			}
		})
	}
}
