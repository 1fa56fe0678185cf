package runtime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

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
		calibration *engines.Calibration
		state       bool // the bundle has the state term
		warn        bool
	}{
		{name: "default K is the calibrated K", calibration: &engines.Calibration{Steps: 20}},
		{name: "same K set explicitly", policySteps: 20, calibration: &engines.Calibration{Steps: 20}},
		{name: "K = 10 on a K = 20 calibration", policySteps: 10, calibration: &engines.Calibration{Steps: 20}, warn: true},
		{name: "K = 10, calibrated threshold via quantile", policySteps: 10, calibration: &engines.Calibration{Steps: 20},
			scores: []safety.ScoreConfig{{Name: "energy", Quantile: "99"}}, warn: true},
		{name: "K = 10, own threshold", policySteps: 10, calibration: &engines.Calibration{Steps: 20},
			scores: []safety.ScoreConfig{{Name: "energy", Threshold: &thr}}},
		{name: "K = 10, energy stop off", policySteps: 10, calibration: &engines.Calibration{Steps: 20}, disabled: true},
		{name: "K = 10, the default watch is the state term", policySteps: 10, state: true,
			calibration: &engines.Calibration{Steps: 20, ClosedLoop: &engines.ClosedLoop{Score: "energy"}}},
		{name: "K = 10, energy listed beside the state term", policySteps: 10, state: true,
			calibration: &engines.Calibration{Steps: 20, ClosedLoop: &engines.ClosedLoop{Score: "state_energy"}},
			scores:      []safety.ScoreConfig{{Name: "state_energy"}, {Name: "energy"}}, warn: true},
		{name: "K = 10, energy's closed loop, no state term", policySteps: 10,
			calibration: &engines.Calibration{Steps: 20, ClosedLoop: &engines.ClosedLoop{Score: "energy"}}, warn: true},
		{name: "no calibration", policySteps: 10},
		{name: "calibration without K", policySteps: 10, calibration: &engines.Calibration{}},
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
