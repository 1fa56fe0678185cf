package lograte

import (
	"testing"
	"time"
)

func TestRepeat(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type step struct {
		at         time.Duration // since t0
		key        string        // "": End
		log        bool
		suppressed int
	}
	cases := []struct {
		name  string
		every time.Duration
		steps []step
	}{
		{"first occurrence logs", 0, []step{{0, "a", true, 0}}},
		{"repeats within the interval are counted", 0, []step{
			{0, "a", true, 0}, {time.Second, "a", false, 0}, {2 * time.Second, "a", false, 0},
			{5 * time.Second, "a", true, 2}, {6 * time.Second, "a", false, 0}, {10 * time.Second, "a", true, 1}}},
		{"a changed key logs at once, with the previous count", 0, []step{
			{0, "a", true, 0}, {time.Second, "a", false, 0}, {2 * time.Second, "b", true, 1}, {3 * time.Second, "b", false, 0}}},
		{"after End the next occurrence logs at once", 0, []step{
			{0, "a", true, 0}, {time.Second, "a", false, 0}, {2 * time.Second, "", false, 1}, {3 * time.Second, "a", true, 0}}},
		{"custom interval", time.Second, []step{
			{0, "a", true, 0}, {500 * time.Millisecond, "a", false, 0}, {time.Second, "a", true, 1}}},
		{"clock going backwards logs", 0, []step{{10 * time.Second, "a", true, 0}, {time.Second, "a", true, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Repeat[string]{Every: tc.every}
			for i, s := range tc.steps {
				if s.key == "" {
					if was, n := r.End(); !was || n != s.suppressed {
						t.Fatalf("step %d: End() = %v, %d; want true, %d", i, was, n, s.suppressed)
					}
					continue
				}
				log, n := r.Observe(t0.Add(s.at), s.key)
				if log != s.log || n != s.suppressed {
					t.Fatalf("step %d: Observe(%v, %q) = %v, %d; want %v, %d", i, s.at, s.key, log, n, s.log, s.suppressed)
				}
			}
		})
	}
}

// A condition that repeats every tick for 10 s at 10 Hz logs three lines.
func TestRepeatEveryTick(t *testing.T) {
	var r Repeat[int]
	t0 := time.Unix(1000, 0)
	lines, total := 0, 0
	for i := range 100 {
		if log, n := r.Observe(t0.Add(time.Duration(i)*100*time.Millisecond), 7); log {
			lines++
			total += 1 + n
		}
	}
	_, rest := r.End()
	if lines != 2 || total+rest != 100 {
		t.Fatalf("%d lines covering %d occurrences (+%d at End), want 2 lines covering all 100", lines, total, rest)
	}
	if n := testing.AllocsPerRun(100, func() { r.Observe(t0, 7) }); n != 0 {
		t.Fatalf("%v allocations per Observe", n)
	}
}
