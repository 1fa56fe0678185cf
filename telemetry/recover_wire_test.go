package telemetry

import (
	"encoding/json"
	"testing"
	"time"
)

// The sample carries what the page's Recovery panel needs: the recovery
// mode and seconds left (null when not recovering) and what a reset would
// be refused for.
func TestSampleJSONRecovery(t *testing.T) {
	cases := []struct {
		s    Sample
		want map[string]any
	}{
		{Sample{State: StateStopped, ResetBlock: "energy: state_energy 7.61 > 5.7"},
			map[string]any{"state": "STOPPED", "reset_block": "energy: state_energy 7.61 > 5.7", "recovery": "", "recovery_left": nil}},
		{Sample{State: StateRecovering, ResetBlock: "energy: state_energy 6 > 5.7", Recovery: "retrace", RecoveryLeft: 12500 * time.Millisecond},
			map[string]any{"state": "RECOVERING", "recovery": "retrace", "recovery_left": 12.5}},
		{Sample{State: StateRunning}, map[string]any{"reset_block": "", "recovery": "", "recovery_left": nil}},
	}
	for _, tc := range cases {
		var got map[string]any
		if err := json.Unmarshal(appendSampleJSON(nil, &tc.s), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", tc.s.State, k, got[k], v)
			}
		}
	}
}
