package eval

import (
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
