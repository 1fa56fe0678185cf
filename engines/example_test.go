package engines_test

import (
	"fmt"
	"log"

	"github.com/energyflow/edge/engines"
)

// A runtime loads a bundle, opens ONNX Runtime, and samples action chunks
// from the observation history; the safety monitor re-scores the committed
// chunk every tick.
func Example() {
	b, err := engines.LoadBundle("testdata/parity/bundle")
	if err != nil {
		log.Fatal(err) // names the file and the field, e.g. a sha256 mismatch
	}
	be, err := engines.NewORT(engines.ORTOptions{}) // config → $ONNXRUNTIME_LIB → system → .deps/
	if err != nil {
		log.Fatal(err) // wraps engines.ErrNoORT with an install hint
	}
	defer be.Close()
	s, err := engines.NewSampler(b, be, engines.SamplerOptions{Seed: 1}) // K from the manifest
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// One ObsFrame per history step, oldest first; entry i is Manifest.Obs[i].
	hist := make([]engines.ObsFrame, b.Manifest.ObsHorizon)
	for i := range hist {
		hist[i] = engines.ObsFrame{make([]float32, b.Manifest.Obs[0].Width())}
	}
	var r engines.Result // reused: no allocation after the first call
	if err := s.SampleObs(hist, &r); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(r.Actions) == b.Manifest.PredHorizon*b.Manifest.ActionDim, r.CenteredReward == -r.CenteredEnergy)

	// Next tick: a fresh score of the committed chunk under the new history.
	sc, err := s.ScoreObs(r.Actions, hist)
	if err != nil {
		log.Fatal(err)
	}
	_ = sc.CenteredEnergy
}
