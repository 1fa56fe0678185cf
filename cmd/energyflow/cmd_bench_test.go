package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// bench's stage table: for an image bundle camera_decode, preprocess and
// encoder per frame of each image input (a synthetic JPEG of the size the
// input is resized from), then sample and sample_step, then rescore for a
// policy with an energy and state_term for a bundle with a state term. In
// the text output and in --json.
func TestBenchStages(t *testing.T) {
	cases := []struct {
		name   string
		dir    string
		want   []string // stage/obs, in order
		detail map[string]string
	}{
		{"image bundle", filepath.Join("..", "..", "runtime", "testdata", "simarm-vision-bundle"),
			[]string{"camera_decode/camera", "preprocess/camera", "encoder/camera", "sample/", "sample_step/", "rescore/"},
			map[string]string{"camera_decode": "40×40 JPEG → RGB", "preprocess": "→ 3×32×32", "encoder": "vision graph, 32 features", "sample_step": "sample / 3",
				"rescore": "the committed chunk's energy at γ and 16 reference energies"}},
		{"state-only bundle", writeTestBundle(t), []string{"sample/", "sample_step/", "rescore/"}, map[string]string{"sample": "one sample call, 3 steps, batch 1"}},
		{"bundle with a state term", filepath.Join("..", "..", "engines", "testdata", "parity-state", "bundle"),
			[]string{"sample/", "sample_step/", "rescore/", "state_term/"},
			map[string]string{"rescore": "the committed chunk's energy at γ and 16 reference energies, and the state term", "state_term": "the state graph on the newest observation"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := realMain([]string{"bench", "--bundle", tc.dir, "--steps", "3", "--n", "5", "--warmup", "1", "--threads", "1", "--json"}, &out, &errb); code != exitOK {
				t.Fatalf("bench exit %d: %s", code, errb.String())
			}
			var rep benchReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("json report %q: %v", out.String(), err)
			}
			var got []string
			for _, s := range rep.Stages {
				got = append(got, s.Stage+"/"+s.Obs)
				if s.P90ms < s.P50ms {
					t.Errorf("%s: p90 %v below p50 %v", s.Stage, s.P90ms, s.P50ms)
				}
				if d, ok := tc.detail[s.Stage]; ok && s.Detail != d {
					t.Errorf("%s: detail %q, want %q", s.Stage, s.Detail, d)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("stages %v, want %v", got, tc.want)
			}

			out.Reset()
			if code := realMain([]string{"bench", "--bundle", tc.dir, "--steps", "3", "--n", "5", "--warmup", "1", "--threads", "1"}, &out, &errb); code != exitOK {
				t.Fatalf("bench exit %d: %s", code, errb.String())
			}
			if !strings.Contains(out.String(), "stages    stage ") {
				t.Errorf("no stage table:\n%s", out.String())
			}
			for _, w := range tc.want {
				stage, obs, _ := strings.Cut(w, "/")
				line := "          " + stage + strings.Repeat(" ", 15-len(stage)) + obs
				if !strings.Contains(out.String(), line) {
					t.Errorf("stage table lacks %q:\n%s", line, out.String())
				}
			}
		})
	}
}
