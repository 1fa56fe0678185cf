package engines_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/enginestest"
)

func TestORTMatchesAnalyticEnergy(t *testing.T) {
	be := newORT(t)
	if path, ver := be.Library(); !filepath.IsAbs(path) || ver == "" {
		t.Fatalf("Library() = %q, %q", path, ver)
	}
	b := loadQuad(t)
	spec, err := b.GraphSpec(engines.GraphEnergyGrad, 3)
	if err != nil {
		t.Fatal(err)
	}
	s, err := be.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := enginestest.Weights(quadCond, quadTp*quadDa)
	p := quadTp * quadDa
	for _, n := range []int{3, 1, 3} { // switching batch sizes keeps both bindings
		in, out, err := s.Bind(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in[0] {
			in[0][i] = float32(math.Sin(float64(i)))
		}
		for i := range in[1] {
			in[1][i] = float32(math.Cos(float64(i)))
		}
		for i := range in[2] {
			in[2][i] = float32(i) * 0.3
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		grad := make([]float32, p)
		for r := 0; r < n; r++ {
			e := enginestest.Energy(w, in[0][r*p:(r+1)*p], in[1][r*quadCond:(r+1)*quadCond], in[2][r], grad)
			if d := math.Abs(float64(e - out[1][r])); d > 1e-5*math.Abs(float64(e)) {
				t.Errorf("batch %d row %d: energy %v, want %v", n, r, out[1][r], e)
			}
			for i := range grad {
				if d := math.Abs(float64(grad[i] - out[0][r*p+i])); d > 1e-5 {
					t.Fatalf("batch %d row %d: grad[%d] %v, want %v", n, r, i, out[0][r*p+i], grad[i])
				}
			}
		}
	}
	if _, _, err := s.Bind(4); err == nil {
		t.Error("Bind beyond MaxBatch accepted")
	}
}

func TestORTBindRunAllocatesNothing(t *testing.T) {
	be := newORT(t)
	spec, _ := loadQuad(t).GraphSpec(engines.GraphEnergyGrad, 2)
	s, err := be.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Bind(2); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, _, err := s.Bind(2); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Bind+Run allocate %v times per call, want 0", allocs)
	}
}

func TestORTRefusesMismatchedGraph(t *testing.T) {
	be := newORT(t)
	spec, _ := loadQuad(t).GraphSpec(engines.GraphEnergyGrad, 1)
	spec.Inputs[1].Shape = []int64{-1, 9}
	spec.Outputs[1].Name = "score"
	_, err := be.Open(spec)
	if err == nil {
		t.Fatal("Open accepted a graph that does not match the spec")
	}
	for _, w := range []string{"energy_grad.onnx", `input "cond"`, "[-1 9]", `"score"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestORTLibraryErrors(t *testing.T) {
	// A configured path is authoritative. The library is already loaded by
	// other tests or not, so exercise both entry points.
	be := newORT(t)
	_ = be
	_, err := engines.NewORT(engines.ORTOptions{LibraryPath: "/nonexistent/libonnxruntime.so.1"})
	if err == nil {
		t.Fatal("NewORT accepted a second, different library")
	}
	err = engines.CheckORTLibrary("/nonexistent/libonnxruntime.so.1")
	if !errors.Is(err, engines.ErrNoORT) || !strings.Contains(err.Error(), "/nonexistent/libonnxruntime.so.1") || !strings.Contains(err.Error(), "make deps") {
		t.Fatalf("CheckORTLibrary(missing) = %v", err)
	}
	if err := engines.CheckORTLibrary("/bin/sh"); err == nil {
		t.Fatal("CheckORTLibrary accepted /bin/sh")
	}
}

func TestORTOptions(t *testing.T) {
	be, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: 2, DisableSpinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	s, err := engines.NewSampler(loadQuad(t), be, engines.SamplerOptions{Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sample(make([]float32, quadCond), &engines.Result{}); err != nil {
		t.Fatal(err)
	}
	// Closing the backend closes sessions left open; both Close calls are idempotent.
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Open(engines.GraphSpec{}); err == nil {
		t.Fatal("Open on a closed backend accepted")
	}
	if _, err := engines.NewORT(engines.ORTOptions{IntraOpThreads: -1}); err == nil {
		t.Fatal("negative thread count accepted")
	}
}
