package engines_test

import (
	"encoding/json"
	"testing"

	"github.com/energyflow/edge/engines"
)

// FuzzParseManifest: any input is either a valid manifest or an error —
// never a panic (a bundle comes from a file the runtime does not control).
func FuzzParseManifest(f *testing.F) {
	good, _ := json.Marshal(quadManifest())
	f.Add(good)
	diffusion, _ := json.Marshal(ddimManifest(loadOracle(f)))
	f.Add(diffusion)
	f.Add([]byte(`{"format_version": 1}`))
	f.Add([]byte(`{"format_version": 1, "obs": [{"kind": "image", "shape": [3]}], "conditioning": {"items": [{"obs": ""}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := engines.ParseManifest("manifest.json", data)
		if err == nil {
			if _, err := engines.NewConditioner(m); err != nil {
				t.Fatalf("valid manifest, but no conditioner: %v", err)
			}
		}
	})
}
