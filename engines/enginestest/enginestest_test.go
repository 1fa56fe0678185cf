package enginestest_test

import (
	"math"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

// The analytic gradient matches central finite differences of the energy.
func TestEnergyGradient(t *testing.T) {
	w := enginestest.Weights(4, 6)
	a := []float32{0.3, -1, 2, 0.5, 0, -0.7}
	cond := []float32{1, -0.5, 0.25, 2}
	grad := make([]float32, len(a))
	enginestest.Energy(w, a, cond, 0.4, grad)
	for i := range a {
		const h = 1e-2
		ap, am := append([]float32(nil), a...), append([]float32(nil), a...)
		ap[i] += h
		am[i] -= h
		fd := (enginestest.Energy(w, ap, cond, 0.4, nil) - enginestest.Energy(w, am, cond, 0.4, nil)) / (2 * h)
		if math.Abs(float64(fd-grad[i])) > 1e-3 {
			t.Errorf("grad[%d] = %v, finite difference %v", i, grad[i], fd)
		}
	}
}

func TestBackendContract(t *testing.T) {
	be := &enginestest.Backend{Fused: true}
	spec := engines.GraphSpec{Name: "energy_grad", MaxBatch: 2,
		Inputs:  []engines.TensorInfo{{Name: "a_t", Shape: []int64{-1, 2, 3}}, {Name: "cond", Shape: []int64{-1, 4}}, {Name: "t", Shape: []int64{-1}}},
		Outputs: []engines.TensorInfo{{Name: "grad_a", Shape: []int64{-1, 2, 3}}, {Name: "energy", Shape: []int64{-1}}}}
	s, err := be.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(engines.FusedSampler); !ok {
		t.Fatal("Fused backend session is not a FusedSampler")
	}
	in, out, err := s.Bind(2)
	if err != nil || len(in[0]) != 12 || len(in[1]) != 8 || len(out[1]) != 2 {
		t.Fatalf("Bind(2) = %v %v %v", in, out, err)
	}
	if _, _, err := s.Bind(3); err == nil {
		t.Fatal("Bind beyond MaxBatch accepted")
	}
	if err := s.Run(); err != nil || be.Runs() != 1 {
		t.Fatalf("Run: %v, runs %d", err, be.Runs())
	}
	s.Close()
	if err := s.Run(); err == nil {
		t.Fatal("Run after Close accepted")
	}
	be.Close()
	if _, err := be.Open(spec); err == nil {
		t.Fatal("Open after Close accepted")
	}
}
