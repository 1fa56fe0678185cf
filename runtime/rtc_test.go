package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/safety"
)

func TestChunkCommitted(t *testing.T) {
	period := 100 * time.Millisecond
	obs := time.Unix(50, 0)
	pred := make([]float32, 16*2) // action i is (i, −i)
	for i := range 16 {
		pred[2*i], pred[2*i+1] = float32(i), float32(-i)
	}
	for _, tc := range []struct {
		name      string
		take      int           // actions taken before (at their due times)
		from      time.Duration // the new observation's time after obs
		rows      int
		wantFirst int
		wantVals  []float32 // first component of each filled row
	}{
		{"aligned with the next action", 2, 2 * period, 16, 0, []float32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"a past action is skipped", 2, 3 * period, 16, 0, []float32{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"the chunk starts later", 0, -2 * period, 16, 2, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}},
		{"dst shorter than the chunk", 0, 0, 3, 0, []float32{1, 2, 3}},
		{"nothing due any more", 0, 40 * period, 16, 0, nil},
		{"rounds to the nearest period", 1, period + 40*time.Millisecond, 16, 0, []float32{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChunk(15, 2)
			c.Fill(pred, 1, 8, 7, obs, period, 1)
			for i := range tc.take {
				if _, _, ok := c.Take(obs.Add(time.Duration(i)*period), period); !ok {
					t.Fatal("take failed")
				}
			}
			dst := make([]float32, tc.rows*2)
			first, n := c.Committed(obs.Add(tc.from), period, dst)
			if first != tc.wantFirst || n != len(tc.wantVals) {
				t.Fatalf("first %d n %d, want %d and %d", first, n, tc.wantFirst, len(tc.wantVals))
			}
			for i, v := range tc.wantVals {
				if r := dst[(first+i)*2:]; r[0] != v || r[1] != -v {
					t.Errorf("row %d = %v, want (%v, %v)", first+i, r[:2], v, -v)
				}
			}
		})
	}
}

func TestJoinMeter(t *testing.T) {
	type tick struct {
		running bool
		v       []float64
		seq     int64
		fresh   bool
	}
	for _, tc := range []struct {
		name   string
		ticks  []tick
		want   Joins
		nanMax bool
	}{
		{"a jump at a boundary, smooth inside", []tick{
			{true, []float64{0, 0}, 1, true}, {true, []float64{0.1, 0}, 1, false}, {true, []float64{0.2, 0}, 1, false},
			{true, []float64{0.2, 0.3}, 2, true}, {true, []float64{0.3, 0.3}, 2, false},
		}, Joins{Boundaries: 1, MaxJump: 0.3, MedianJump: 0.3, Inside: 3, InsideMedian: 0.1}, false},
		{"a stopped tick breaks the sequence", []tick{
			{true, []float64{0, 0}, 1, false}, {false, []float64{0, 0}, 1, false}, {true, []float64{1, 0}, 2, true},
		}, Joins{Boundaries: 0, Inside: 0}, true},
		{"a hold is neither", []tick{
			{true, []float64{0.5}, 1, false}, {true, []float64{0}, -1, false}, {true, []float64{0.4}, 2, true},
		}, Joins{Boundaries: 1, MaxJump: 0.4, MedianJump: 0.4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m joinMeter
			for _, k := range tc.ticks {
				m.observe(k.running, k.v, k.seq, k.fresh, math.NaN())
			}
			got := m.joins()
			near := func(a, b float64) bool { return (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) < 1e-12 }
			wantMax, wantMed := tc.want.MaxJump, tc.want.MedianJump
			if tc.nanMax || tc.want.Boundaries == 0 {
				wantMax, wantMed = math.NaN(), math.NaN()
			}
			wantIn := tc.want.InsideMedian
			if tc.want.Inside == 0 {
				wantIn = math.NaN()
			}
			if got.Boundaries != tc.want.Boundaries || got.Inside != tc.want.Inside || !near(got.MaxJump, wantMax) ||
				!near(got.MedianJump, wantMed) || !near(got.InsideMedian, wantIn) {
				t.Errorf("joins %+v, want %+v", got, tc.want)
			}
		})
	}
}

// numberedSampler plans action j of plan p as (100·p + j) on every axis,
// each plan taking latency on the fake clock, and records the guides.
type numberedSampler struct {
	*fakeSampler
	plans atomic.Int64
	dim   int
}

func (s *numberedSampler) Sample(cond []float32, dst *engines.Result) error {
	p := s.plans.Add(1)
	for i := range s.actions {
		s.actions[i] = float32(100*p) + float32(i/s.dim)
	}
	return s.fakeSampler.Sample(cond, dst)
}

func (s *numberedSampler) SampleGuided(cond []float32, g *engines.Guide, dst *engines.Result) error {
	if g != nil {
		s.mu.Lock()
		s.guides = append(s.guides, engines.Guide{Mode: g.Mode, Strength: g.Strength, Actions: append([]float32(nil), g.Actions...),
			Weights: append([]float32(nil), g.Weights...)})
		s.mu.Unlock()
	}
	return s.Sample(cond, dst)
}

// With real-time chunking on, each plan is sampled with the committed
// chunk's actions aligned to its own prediction (action start+i due at the
// new observation's time + i periods), weight 1 on the actions that run
// during the plan's measured latency and decaying weights after; off, no
// guide reaches the sampler.
func TestLoopGuidesPlansWithTheCommittedChunk(t *testing.T) {
	for _, tc := range []struct {
		mode string
		soft int // loop.realtime_chunking.soft; wantSoft: at most that many decaying weights (−1: any)
	}{{"off", -1}, {"denoised", -1}, {"denoised", 1}, {"denoised", 0}} {
		mode := tc.mode
		t.Run(fmt.Sprintf("%s soft %d", mode, tc.soft), func(t *testing.T) {
			var ns *numberedSampler
			h := newLoopHarness(t, harnessOptions{bundle: testBundle(t), latency: func() time.Duration { return 2 * 100 * time.Millisecond },
				chunking: ChunkingConfig{Mode: mode, Strength: 1, Soft: tc.soft}, sampler: func(f *fakeSampler, dim int) PolicySampler {
					ns = &numberedSampler{fakeSampler: f, dim: dim}
					return ns
				}})
			if h.l.period != 100*time.Millisecond {
				t.Fatalf("period %v", h.l.period)
			}
			h.armGate(t)
			for range 60 {
				h.step()
			}
			ns.mu.Lock()
			defer ns.mu.Unlock()
			if mode == "off" {
				if len(ns.guides) != 0 {
					t.Fatalf("%d guides with real-time chunking off", len(ns.guides))
				}
				return
			}
			l := h.l
			checked := 0
			for gi, g := range ns.guides {
				if !g.Active() {
					continue
				}
				checked++
				if g.Mode != engines.GuideDenoised || g.Strength != 1 {
					t.Fatalf("guide %d: mode %v strength %v", gi, g.Mode, g.Strength)
				}
				// The held rows are consecutive actions of one earlier plan.
				var plan, offset int
				var hard, held int
				for j, w := range g.Weights {
					if w == 0 {
						continue
					}
					if j < l.start {
						t.Fatalf("guide %d: weight %v on past action %d", gi, w, j)
					}
					v := g.Actions[j*l.dim]
					p, k := int(v)/100, int(v)%100
					if held == 0 {
						plan, offset = p, k-j
					} else if p != plan || k-j != offset {
						t.Fatalf("guide %d: row %d holds action %d of plan %d, want action %d of plan %d", gi, j, k, p, j+offset, plan)
					}
					for d := 1; d < l.dim; d++ {
						if g.Actions[j*l.dim+d] != v {
							t.Fatalf("guide %d: row %d not one action: %v", gi, j, g.Actions[j*l.dim:(j+1)*l.dim])
						}
					}
					if w == 1 {
						hard++
					} else if hard == 0 {
						t.Fatalf("guide %d: a soft weight before the hard prefix: %v", gi, g.Weights)
					}
					held++
				}
				if offset < 1 {
					t.Errorf("guide %d: row j holds action j%+d of the committed plan; the new plan starts later", gi, offset)
				}
				if hard != 2 {
					t.Errorf("guide %d: %d hard weights, want the 2 periods a plan takes: %v", gi, hard, g.Weights)
				}
				if soft := held - hard; tc.soft >= 0 && soft != tc.soft || tc.soft < 0 && soft < 3 {
					t.Errorf("guide %d: %d decaying weights with soft %d: %v", gi, soft, tc.soft, g.Weights)
				}
			}
			if checked < 5 {
				t.Fatalf("only %d active guides in 60 ticks", checked)
			}
			if j := l.Joins(); j.Boundaries < 5 || j.Inside < 20 {
				t.Errorf("joins %+v: want boundaries and inside steps measured", j)
			}
		})
	}
}

func TestNewLoopRefusesBadChunking(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ChunkingConfig
		want string
	}{
		{"unknown mode", ChunkingConfig{Mode: "on", Strength: 1}, `real-time chunking mode "on"`},
		{"negative strength", ChunkingConfig{Mode: "noisy", Strength: -1}, "strength -1"},
		{"NaN strength", ChunkingConfig{Mode: "noisy", Strength: math.NaN()}, "strength NaN"},
		{"denoised strength above 1", ChunkingConfig{Mode: "denoised", Strength: 1.5}, "strength 1.5 with mode denoised"},
		{"delay past the chunk", ChunkingConfig{Mode: "noisy", Strength: 1, Delay: 9}, "delay 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newLoop(t, harnessOptions{bundle: testBundle(t), chunking: tc.c})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

// A loop watchdog stop logs where the late tick's time went: the previous
// tick's duration and arm read beside this tick's.
func TestLoopLateStopSaysWhereTheTimeWent(t *testing.T) {
	var buf strings.Builder
	h := newLoopHarness(t, harnessOptions{bundle: testBundle(t), logger: slog.New(slog.NewTextHandler(&buf, nil))})
	h.armGate(t)
	h.step()
	h.clk.Advance(h.l.period)
	now := h.clk.Now()
	late := now.Add(-time.Second) // due a second ago: three deadlines skipped
	h.n++
	h.l.tick(context.Background(), Tick{N: h.n, Deadline: late, Due: late, Woke: now, Jitter: time.Second, Missed: 3})
	if st := h.l.d.Guard.Status(); st.State != safety.Stopped {
		t.Fatalf("gate %v after a tick a second late, want stopped", st.State)
	}
	log := buf.String()
	for _, want := range []string{"the loop fell behind: the previous tick took", "previous_arm_read=", "previous_gate_and_write=", "previous_telemetry=", "this_arm_read=", "missed=3"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}
