package eval

import (
	"fmt"
	"sort"

	"github.com/energyflow/edge/sim/harness"
)

// Summary is the evaluation's result: the summary line (String) and the
// --json file.
type Summary struct {
	Task      string  `json:"task"`
	Level     string  `json:"level"`
	Bundle    string  `json:"bundle"`
	RateHz    float64 `json:"rate_hz"` // the control rate (--rate)
	Steps     int     `json:"steps_k"`
	MaxSteps  int     `json:"max_steps"` // the episode step limit (--max-steps)
	Episodes  int     `json:"episodes"`
	Successes int     `json:"successes"`
	Rate      float64 `json:"success_rate"`
	Low       float64 `json:"ci95_low"`
	High      float64 `json:"ci95_high"`
	MeanLen   float64 `json:"mean_length"`
	// Steps to success over the successful episodes only (success_step);
	// nil: no success.
	MeanToSuccess   *float64       `json:"mean_steps_to_success"`
	MedianToSuccess *float64       `json:"median_steps_to_success"`
	InferP50        *float64       `json:"inference_p50_ms"` // over every inference of every episode; nil: none
	InferP90        *float64       `json:"inference_p90_ms"`
	Trips           map[string]int `json:"trips"`
	// PlanLateLimit is the loop's lateness limit in control periods
	// (loop.plan_late_limit, or the calibration's plan p90 + margin; nil:
	// none), InferP90Periods the cell's inference p90 in periods, and
	// LateEpisodes the episodes in which the loop warned that its plans'
	// p90 had passed the limit.
	PlanLateLimit   *float64 `json:"plan_late_limit_periods"`
	InferP90Periods *float64 `json:"inference_p90_periods"`
	LateEpisodes    int      `json:"late_episodes"`
	// Watch is what the energy stop watched, as the gate resolved it:
	// --watch, or without it the bundle's default watch set (state_energy
	// alone with the state term, else its calibration's score). Every
	// episode watches the same; empty: the energy stop was off (a policy
	// without an energy).
	Watch []string `json:"watch,omitempty"`
	// ObserveOnly says the energy stop only observed (--observe-only): the
	// success is the policy's alone.
	ObserveOnly bool `json:"observe_only,omitempty"`
	// Camera is the simulator's camera the runtime was fed (--camera, or
	// the bundle's).
	Camera string `json:"camera,omitempty"`
	// NeverArmed counts episodes in which auto-start was refused on every
	// tick (end never_armed): the arm never moved, which is not a trip.
	NeverArmed int `json:"never_armed"`
	// Chunking is the runtime's real-time chunking mode (--chunking) and
	// Delay the added plan delay in periods (--delay).
	Chunking         string  `json:"chunking"`
	ChunkingStrength float64 `json:"chunking_strength,omitempty"`
	ChunkingSoft     *int    `json:"chunking_soft,omitempty"` // −1: the whole overlap
	Delay            float64 `json:"delay_periods"`
	// WarmSigma and WarmSteps are the warm start (--warm-sigma,
	// --warm-steps; sigma 0: off).
	WarmSigma float64 `json:"warm_sigma,omitempty"`
	WarmSteps int     `json:"warm_steps,omitempty"`
	// JoinMax is the median over episodes of each episode's largest
	// change of the commanded velocity at a chunk boundary, JoinInside the
	// median over episodes of the median change inside a chunk, and
	// JoinRatio their ratio (issue 51's target: at most 1.5); nil: none
	// measured.
	JoinMax    *float64 `json:"join_max_median"`
	JoinInside *float64 `json:"join_inside_median"`
	JoinRatio  *float64 `json:"join_ratio"`
	// SwitchMax and SwitchMedian are the medians over episodes of each
	// episode's largest and median plan switch (Result.SwitchMax).
	SwitchMax    *float64 `json:"switch_max_median"`
	SwitchMedian *float64 `json:"switch_median_median"`
	Results      []Result `json:"results"`
}

// String is the summary line sim eval prints.
func (s Summary) String() string {
	kinds := make([]string, 0, len(s.Trips))
	for k := range s.Trips {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	trips := ""
	for _, k := range kinds {
		trips += fmt.Sprintf(" %s=%d", k, s.Trips[k])
	}
	if trips == "" {
		trips = " none"
	}
	if s.NeverArmed > 0 {
		trips += fmt.Sprintf(", never armed (auto-start refused all episode): %d", s.NeverArmed)
	}
	toSuccess := "steps to success: no success"
	if s.MeanToSuccess != nil {
		toSuccess = fmt.Sprintf("steps to success mean %.1f median %.0f", *s.MeanToSuccess, *s.MedianToSuccess)
	}
	inference := "inference p50: none"
	if s.InferP50 != nil {
		inference = fmt.Sprintf("inference p50 %.1f ms p90 %.1f ms", *s.InferP50, *s.InferP90)
	}
	if s.InferP90Periods != nil {
		inference += fmt.Sprintf(" (%.2f periods)", *s.InferP90Periods)
	}
	if s.JoinRatio != nil {
		inference += fmt.Sprintf(", chunk joins %.3f vs %.3f inside (×%.2f)", *s.JoinMax, *s.JoinInside, *s.JoinRatio)
		if s.SwitchMax != nil {
			inference += fmt.Sprintf(", plan switch max %.3f median %.3f", *s.SwitchMax, *s.SwitchMedian)
		}
	}
	late := ""
	if s.PlanLateLimit != nil {
		late = fmt.Sprintf(", plans late past %.2f periods (p90): %d episodes", *s.PlanLateLimit, s.LateEpisodes)
	}
	return fmt.Sprintf("task %s level %s K=%d: success %d/%d = %.1f%% (95%% CI %.1f–%.1f%%), mean length %.1f steps, %s, %s%s, safety stops:%s",
		s.Task, s.Level, s.Steps, s.Successes, s.Episodes, 100*s.Rate, 100*s.Low, 100*s.High, s.MeanLen, toSuccess, inference, late, trips)
}

// Summarize is the summary of the episodes rs driven with f; its Trips
// counts their stops by kind (Result.StopKind).
func Summarize(f harness.Flags, rs []Result) Summary {
	trips := map[string]int{}
	for _, r := range rs {
		if r.StopKind != "" {
			trips[r.StopKind]++
		}
	}
	s := Summary{Task: f.Task, Level: f.Level, Bundle: f.Bundle, RateHz: f.Rate, Steps: f.Steps, Episodes: len(rs), Trips: trips, Results: rs,
		Camera: f.CameraName, Chunking: f.Chunking, WarmSigma: f.WarmSigma, WarmSteps: f.WarmSteps}
	if s.Chunking == "" {
		s.Chunking = "off"
	}
	if s.Chunking != "off" {
		soft := f.ChunkingSoft
		s.ChunkingStrength, s.ChunkingSoft = f.ChunkingStrength, &soft
	}
	if len(rs) > 0 {
		s.Watch = rs[0].watch
	}
	total := 0
	var toSuccess, inferMs, joinMax, joinIn, swMax, swMed []float64
	for _, r := range rs {
		if r.SwitchMax != nil && r.SwitchMedian != nil {
			swMax, swMed = append(swMax, *r.SwitchMax), append(swMed, *r.SwitchMedian)
		}
		if r.JoinMax != nil && r.JoinInside != nil {
			joinMax, joinIn = append(joinMax, *r.JoinMax), append(joinIn, *r.JoinInside)
		}
		if r.Success {
			s.Successes++
			if r.SuccessStep != nil {
				toSuccess = append(toSuccess, float64(*r.SuccessStep))
			}
		}
		if r.End == "never_armed" {
			s.NeverArmed++
		}
		total += r.Steps
		inferMs = append(inferMs, r.inferMs...)
		if r.LateSpells > 0 {
			s.LateEpisodes++
		}
		if r.lateLimit != nil {
			s.PlanLateLimit = r.lateLimit
		}
	}
	if len(rs) > 0 {
		s.Rate = float64(s.Successes) / float64(len(rs))
		s.MeanLen = float64(total) / float64(len(rs))
	}
	if len(toSuccess) > 0 {
		m := mean(toSuccess)
		s.MeanToSuccess, s.MedianToSuccess = &m, median(toSuccess)
	}
	s.InferP50, s.InferP90 = Quantile(inferMs, 0.5), Quantile(inferMs, 0.9)
	if s.InferP90 != nil && f.Rate > 0 {
		p := *s.InferP90 / 1000 * f.Rate
		s.InferP90Periods = &p
	}
	s.JoinMax, s.JoinInside = median(joinMax), median(joinIn)
	s.SwitchMax, s.SwitchMedian = median(swMax), median(swMed)
	if s.JoinMax != nil && *s.JoinInside > 0 {
		r := *s.JoinMax / *s.JoinInside
		s.JoinRatio = &r
	}
	s.Low, s.High = wilson(s.Successes, len(rs))
	return s
}
