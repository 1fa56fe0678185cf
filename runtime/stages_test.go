package runtime

import (
	"slices"
	"testing"
	"time"

	"github.com/energyflow/edge/telemetry"
)

// msN is n milliseconds.
func msN(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// The quantiles are the nearest-rank p50 and p90 of the last StageWindow
// durations of a stage, whatever order they came in; the count is every
// duration since the start.
func TestStageTimesQuantiles(t *testing.T) {
	seq := func(from, to int) []time.Duration { // from..to ms
		var d []time.Duration
		for i := from; i <= to; i++ {
			d = append(d, msN(i))
		}
		return d
	}
	shuffled := seq(1, 10)
	slices.Reverse(shuffled)
	shuffled[2], shuffled[7] = shuffled[7], shuffled[2]
	cases := []struct {
		name     string
		record   []time.Duration
		count    uint64
		p50, p90 time.Duration
	}{
		{"empty", nil, 0, 0, 0},
		{"one sample", []time.Duration{msN(7)}, 1, msN(7), msN(7)},
		{"three", []time.Duration{msN(3), msN(1), msN(2)}, 3, msN(2), msN(3)},
		{"ten, out of order", shuffled, 10, msN(5), msN(9)},
		{"a full window", seq(1, StageWindow), StageWindow, msN(256), msN(461)},
		// 612 durations: the window keeps the last 512 (101..612 ms).
		{"wrapped around", seq(1, StageWindow+100), StageWindow + 100, msN(100 + 256), msN(100 + 461)},
		// The old slow ones have left the window: the new fast ones alone count.
		{"wrapped past a slow spell", append(seq(1000, 1000+StageWindow), seq(1, StageWindow)...), 2*StageWindow + 1, msN(256), msN(461)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st StageTimes
			for _, d := range tc.record {
				st.Record(StageSample, d)
			}
			got := st.Stats(StageSample)
			want := StageStats{Stage: StageSample, Count: tc.count, P50: tc.p50, P90: tc.p90}
			if got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
			if other := st.Stats(StageEncoder); other != (StageStats{Stage: StageEncoder}) {
				t.Errorf("another stage's stats %+v, want none", other)
			}
		})
	}
}

// stageLog is a StageObserver that keeps what it gets.
type stageLog struct {
	stages []string
	d      []time.Duration
}

func (l *stageLog) ObserveStage(stage string, d time.Duration) {
	l.stages = append(l.stages, stage)
	l.d = append(l.d, d)
}

// The live view gets the recorded stages only, in pipeline order; the
// observer gets every duration as it is recorded, by the stage's name.
func TestStageTimesLatenciesAndObserver(t *testing.T) {
	var st StageTimes
	st.Record(StageCommandWrite, msN(1)) // before the observer: not passed on
	var obs stageLog
	st.SetObserver(&obs)
	st.Record(StageSample, msN(40))
	st.Record(StageCameraDecode, msN(2))
	st.Record(StageSample, msN(60))
	st.Record(numStages, msN(9)) // not a stage: ignored
	got := st.StageLatencies()
	want := []telemetry.StageLatency{
		{Stage: "camera_decode", Count: 1, P50: msN(2), P90: msN(2)},
		{Stage: "sample", Count: 2, P50: msN(40), P90: msN(60)},
		{Stage: "command_write", Count: 1, P50: msN(1), P90: msN(1)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("StageLatencies = %+v, want %+v", got, want)
	}
	if !slices.Equal(obs.stages, []string{"sample", "camera_decode", "sample"}) || !slices.Equal(obs.d, []time.Duration{msN(40), msN(2), msN(60)}) {
		t.Errorf("observer got %v %v", obs.stages, obs.d)
	}
	var none StageTimes
	if l := none.StageLatencies(); len(l) != 0 {
		t.Errorf("nothing recorded, but StageLatencies = %+v", l)
	}
}

// Every stage has its own name; a nil *StageTimes records nothing; Record
// allocates nothing, with an observer or not.
func TestStageTimesNamesNilAndAllocations(t *testing.T) {
	seen := map[string]bool{}
	for s := range numStages {
		n := s.String()
		if n == "unknown" || seen[n] {
			t.Errorf("stage %d is named %q", s, n)
		}
		seen[n] = true
	}
	var nilTimes *StageTimes
	nilTimes.Record(StageSample, time.Second)
	nilTimes.Since(StageSample, time.Now())
	if s := nilTimes.Stats(StageSample); s.Count != 0 {
		t.Errorf("a nil StageTimes has stats %+v", s)
	}

	var st StageTimes
	if n := testing.AllocsPerRun(1000, func() { st.Record(StageSample, time.Millisecond) }); n != 0 {
		t.Errorf("Record: %v allocations, want 0", n)
	}
	st.SetObserver(telemetry.NewMetrics())
	if n := testing.AllocsPerRun(1000, func() { st.Since(StageRescore, time.Now()) }); n != 0 {
		t.Errorf("Record with the metrics: %v allocations, want 0", n)
	}
}
