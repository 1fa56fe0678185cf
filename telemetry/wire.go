package telemetry

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Data-channel messages are JSON objects with a "type":
//
//	hello   {type, scope, can_reset, video:{width,height,fps}, events:[…], stats}
//	sample  {type, tick, t (unix ms), energy, threshold, watch, state_energy,
//	         reward, scores, state, reason, reset_block, recovery,
//	         recovery_left, loop_hz, tick_ms, inference_ms,
//	         plan_late, plan_late_limit,
//	         joints, velocities, ee, gripper, planned:[[…]…]}
//	event   {type, t, tick, kind, reason, actor, energy, threshold, score, trace}
//
// "energy" is the value of the score the stop watches, named by "watch"
// ("energy", "centered_energy" or "state_energy"); "state_energy" is the
// bundle's state term whether watched or not (null without one).
// "reset_block" is what a reset would be refused for ("" when it would
// pass), "recovery" the recovery mode while RECOVERING ("" otherwise) and
// "recovery_left" the seconds until it times out (null when not recovering).
//	stats   {type, t, cpu:{…}, gpu:[…], gpu_source, gpu_error, video:{…},
//	         stages:[{stage, count, p50_ms, p90_ms}…]}
//
// "stages" (absent when the runtime gives none) are the control path's
// stage latencies over their recent runs, in pipeline order (StageSource);
// a page that does not know it ignores it.
//
// Non-finite numbers are sent as null.

// sampleCopy copies s into dst, reusing dst's slices (no allocation once
// their capacity suffices).
func sampleCopy(dst *Sample, s *Sample) {
	scores, joints, vel, ee, planned := dst.Scores, dst.Joints, dst.Velocities, dst.EndEffector, dst.Planned
	*dst = *s
	dst.Scores = appendCapped(scores[:0], s.Scores)
	dst.Joints = appendCapped(joints[:0], s.Joints)
	dst.Velocities = appendCapped(vel[:0], s.Velocities)
	dst.EndEffector = appendCapped(ee[:0], s.EndEffector)
	n := min(len(s.Planned), MaxPlanSteps)
	if cap(planned) < n {
		planned = append(planned[:cap(planned)], make([][]float64, n-cap(planned))...)
	}
	planned = planned[:n]
	for i := 0; i < n; i++ {
		planned[i] = appendCapped(planned[i][:0], s.Planned[i])
	}
	dst.Planned = planned
}

func appendCapped(dst, src []float64) []float64 {
	return append(dst, src[:min(len(src), MaxVector)]...)
}

func appendNum(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', 7, 64)
}

func appendNums(b []byte, v []float64) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNum(b, x)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// watchedName is the name of a watched score on the wire: "" is the energy.
func watchedName(s string) string {
	if s == "" {
		return "energy"
	}
	return s
}

func unixMillis(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e6
}

// appendTime writes t as integer Unix milliseconds (null for the zero
// time). Not through appendNum: its 7 significant digits turn today's
// 13-digit timestamps into multiples of 10⁶ ms, and every event of a
// quarter of an hour showed the same time on the page.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, t.UnixMilli(), 10)
}

func durMillis(d time.Duration) float64 { return float64(d) / 1e6 }

// appendSampleJSON writes s as a "sample" message.
func appendSampleJSON(b []byte, s *Sample) []byte {
	b = append(b, `{"type":"sample","tick":`...)
	b = strconv.AppendUint(b, s.Tick, 10)
	b = append(b, `,"t":`...)
	b = appendTime(b, s.Time)
	b = append(b, `,"energy":`...)
	b = appendNum(b, s.Energy)
	b = append(b, `,"threshold":`...)
	b = appendNum(b, s.Threshold)
	b = append(b, `,"watch":`...)
	b = appendString(b, watchedName(s.Watched))
	b = append(b, `,"state_energy":`...)
	b = appendNum(b, s.StateEnergy)
	b = append(b, `,"reward":`...)
	b = appendNum(b, s.Reward)
	b = append(b, `,"scores":`...)
	b = appendNums(b, s.Scores)
	b = append(b, `,"state":`...)
	b = appendString(b, s.State)
	b = append(b, `,"reason":`...)
	b = appendString(b, s.Reason)
	b = append(b, `,"reset_block":`...)
	b = appendString(b, s.ResetBlock)
	b = append(b, `,"recovery":`...)
	b = appendString(b, s.Recovery)
	b = append(b, `,"recovery_left":`...)
	if s.Recovery == "" {
		b = append(b, "null"...)
	} else {
		b = appendNum(b, s.RecoveryLeft.Seconds())
	}
	b = append(b, `,"loop_hz":`...)
	b = appendNum(b, s.LoopRateHz)
	b = append(b, `,"tick_ms":`...)
	b = appendNum(b, durMillis(s.TickDuration))
	b = append(b, `,"inference_ms":`...)
	b = appendNum(b, durMillis(s.InferenceLatency))
	b = append(b, `,"plan_late":`...)
	b = appendNum(b, s.PlanLateP90)
	b = append(b, `,"plan_late_limit":`...)
	b = appendNum(b, s.PlanLateLimit)
	b = append(b, `,"joints":`...)
	b = appendNums(b, s.Joints)
	b = append(b, `,"velocities":`...)
	b = appendNums(b, s.Velocities)
	b = append(b, `,"ee":`...)
	b = appendNums(b, s.EndEffector)
	b = append(b, `,"gripper":`...)
	b = appendNum(b, s.Gripper)
	b = append(b, `,"planned":[`...)
	for i, step := range s.Planned {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNums(b, step)
	}
	return append(b, "]}"...)
}

// appendEventJSON writes e as an "event" message (or, with typ "", as a
// bare object for lists).
func appendEventJSON(b []byte, e *Event, typed bool) []byte {
	b = append(b, '{')
	if typed {
		b = append(b, `"type":"event",`...)
	}
	b = append(b, `"t":`...)
	b = appendTime(b, e.Time)
	b = append(b, `,"tick":`...)
	b = strconv.AppendUint(b, e.Tick, 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"reason":`...)
	b = appendString(b, e.Reason)
	b = append(b, `,"actor":`...)
	b = appendString(b, e.Actor)
	b = append(b, `,"energy":`...)
	b = appendNum(b, e.Energy)
	b = append(b, `,"threshold":`...)
	b = appendNum(b, e.Threshold)
	b = append(b, `,"score":`...)
	b = appendString(b, watchedName(e.Score))
	b = append(b, `,"trace":`...)
	b = appendNums(b, e.Trace)
	return append(b, '}')
}
