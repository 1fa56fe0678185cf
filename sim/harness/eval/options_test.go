package eval

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/sim/harness"
	"github.com/energyflow/edge/sim/harness/harnesstest"
)

// TestEpisodeConfigSeedsTheSampler: every episode samples with its own
// noise seed, --seed + episode index, as its scene does.
func TestEpisodeConfigSeedsTheSampler(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	o := Options{Flags: harness.Flags{Task: "button-press", Level: "0", Seed: 1000, Rate: 20, Camera: "96x96"}, Episodes: 3, MaxSteps: 500}
	if err := o.Prepare(root); err != nil {
		t.Fatal(err)
	}
	addr := &harness.Bridge{Modbus: "127.0.0.1:5020", HTTP: "127.0.0.1:8090"} // addresses only: nothing is contacted
	seen := map[uint64]int{}
	for idx, want := range []uint64{1000, 1001, 1002} {
		cfg, err := o.episodeConfig(root, addr, idx)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Policy.Seed != want {
			t.Errorf("episode %d: policy.seed %d, want %d", idx, cfg.Policy.Seed, want)
		}
		if prev, dup := seen[cfg.Policy.Seed]; dup {
			t.Errorf("episodes %d and %d share sampler seed %d", prev, idx, cfg.Policy.Seed)
		}
		seen[cfg.Policy.Seed] = idx
	}
}

// TestObjectFaultOnHammerNeedsACamera: hammer's second object slot holds the
// nail, so its object fault is drawn into the frames only; a bundle without a
// camera would meet nothing and is refused in one line.
func TestObjectFaultOnHammerNeedsACamera(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		task, bundle, fault string
		refused             bool
	}{
		{"hammer", "", "object", true},
		{"hammer", "metaworld-hammer-camera", "object", false},
		{"hammer", "", "push", false},
		{"drawer-open", "", "object", false},
	} {
		o := Options{Flags: harness.Flags{Task: tc.task, Level: "0", Seed: 1000, Rate: 20, Camera: "96x96"}, Episodes: 1, MaxSteps: 80, Fault: tc.fault}
		if tc.bundle != "" {
			o.Bundle = filepath.Join(root, "bundles", tc.bundle)
		}
		err := o.Prepare(root)
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), "nail") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s %s %q: got %v, want a one-line refusal naming the nail", tc.task, tc.fault, tc.bundle, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s %q: %v", tc.task, tc.fault, tc.bundle, err)
		}
	}
}

// TestWatchShiftNeedsAWatchCamera: --fault watch_shift knocks the watch
// camera, so a bundle that runs none (it names none, or --watch-camera off)
// is refused in one line.
func TestWatchShiftNeedsAWatchCamera(t *testing.T) {
	root := harnesstest.ModuleRoot(t)
	for _, tc := range []struct {
		name    string
		args    []string
		refused bool
	}{
		{"state bundle", []string{"--task", "drawer-open"}, true},
		{"camera bundle with its watch camera", []string{"--task", "drawer-open", "--bundle", filepath.Join(root, "bundles", "metaworld-drawer-open-camera")}, false},
		{"watch camera off", []string{"--task", "hammer", "--bundle", filepath.Join(root, "bundles", "metaworld-hammer-camera"), "--watch-camera", "off"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("eval", flag.ContinueOnError)
			o.Register(fs)
			if err := fs.Parse(append([]string{"--fault", "watch_shift"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			err := o.Prepare(root)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "--fault watch_shift") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want a one-line refusal naming --fault watch_shift", err)
			}
		})
	}
}
