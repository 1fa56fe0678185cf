package telemetry_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/energyflow/edge/telemetry"
)

// fixedStages is a StageSource with fixed latencies.
type fixedStages []telemetry.StageLatency

func (f fixedStages) StageLatencies() []telemetry.StageLatency { return f }

// The stats message carries the stage latencies in ms, in the source's
// order; without a source it has no "stages" key at all, as before.
func TestStatsCarryStageLatencies(t *testing.T) {
	stages := fixedStages{
		{Stage: "camera_decode", Count: 30, P50: 1200 * time.Microsecond, P90: 1900 * time.Microsecond},
		{Stage: "sample", Count: 4, P50: 48 * time.Millisecond, P90: 61 * time.Millisecond},
	}
	type stage struct {
		Stage string  `json:"stage"`
		Count uint64  `json:"count"`
		P50   float64 `json:"p50_ms"`
		P90   float64 `json:"p90_ms"`
	}
	cases := []struct {
		name   string
		source telemetry.StageSource
		want   []stage // nil: no "stages" key
	}{
		{"with stages", stages, []stage{{"camera_decode", 30, 1.2, 1.9}, {"sample", 4, 48, 61}}},
		{"none recorded yet", fixedStages{}, nil},
		{"no source", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := telemetry.DefaultConfig()
			cfg.Video.Width, cfg.Video.Height = 160, 120
			cfg.ICE.Mode = telemetry.ICELoopback
			cfg.Auth = telemetry.AuthConfig{ViewToken: viewTok, ResetToken: resetTok}
			srv, err := telemetry.New(cfg, telemetry.Options{Stages: tc.source})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(func() { hs.Close(); srv.Close() })
			code, body := do(t, "GET", hs.URL+"/api/stats", viewTok, "")
			if code != 200 {
				t.Fatalf("GET /api/stats: %d %s", code, body)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &raw); err != nil {
				t.Fatal(err)
			}
			if _, has := raw["stages"]; has != (tc.want != nil) {
				t.Fatalf("stats %s: \"stages\" present %v, want %v", body, has, tc.want != nil)
			}
			if tc.want == nil {
				return
			}
			var got []stage
			if err := json.Unmarshal(raw["stages"], &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("stages %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("stage %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// ObserveStage feeds energyflow_stage_latency_seconds, one series per stage,
// without allocating.
func TestObserveStage(t *testing.T) {
	m := telemetry.NewMetrics()
	m.ObserveStage("sample", 40*time.Millisecond)
	m.ObserveStage("sample", 60*time.Millisecond)
	m.ObserveStage("command_write", 300*time.Microsecond)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		n   uint64
		sum float64
	}
	got := map[string]series{}
	for _, f := range fams {
		if f.GetName() != "energyflow_stage_latency_seconds" {
			continue
		}
		for _, mm := range f.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == "stage" {
					got[l.GetValue()] = series{mm.GetHistogram().GetSampleCount(), mm.GetHistogram().GetSampleSum()}
				}
			}
		}
	}
	want := map[string]series{"sample": {2, 0.1}, "command_write": {1, 0.0003}}
	for k, w := range want {
		if g := got[k]; g.n != w.n || g.sum < w.sum*0.999 || g.sum > w.sum*1.001 {
			t.Errorf("stage %s: %+v, want %+v", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { m.ObserveStage("sample", time.Millisecond) }); n != 0 {
		t.Errorf("ObserveStage: %v allocations, want 0", n)
	}
}
