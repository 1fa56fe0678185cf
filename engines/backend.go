package engines

// TensorInfo describes one named float32 input or output of a graph.
// Shape uses -1 for the dynamic batch dimension (always the first).
type TensorInfo struct {
	Name  string
	Shape []int64
}

// GraphSpec says which graph to open and what the bundle manifest expects of
// it. A backend validates the graph against Inputs and Outputs (names, rank,
// static dimensions) and refuses a mismatch with an error naming the tensor.
type GraphSpec struct {
	Path     string       // ONNX file (ORT) or the bundle directory (TensorRT picks its plan)
	Name     string       // graph name in the manifest, e.g. "energy_grad"
	Inputs   []TensorInfo // expected inputs, in the order the caller binds them
	Outputs  []TensorInfo // expected outputs, in the order the caller reads them
	MaxBatch int          // largest batch the caller will bind
	Plans    []PlanInfo   // TensorRT plans the manifest lists for this graph (ORT ignores them)
}

// PlanInfo is one entry of the manifest's "plans": a TensorRT plan built on
// a target for one graph. Plans are tied to a TensorRT version and a GPU.
type PlanInfo struct {
	Graph      string `json:"graph"`       // "energy_grad" or "vision"
	File       string `json:"file"`        // relative to the bundle, e.g. "plans/10.3.0_Orin_fp16.plan"
	TRTVersion string `json:"trt_version"` // e.g. "10.3.0"
	GPU        string `json:"gpu"`         // device name as CUDA reports it, e.g. "Orin"
	Precision  string `json:"precision"`   // "fp16" or "fp32"
}

// Backend opens graphs on one kind of executor (ONNX Runtime on the CPU,
// TensorRT on the GPU).
type Backend interface {
	Name() string
	Open(spec GraphSpec) (Session, error)
	// Close releases the backend; sessions must be closed first. Idempotent.
	Close() error
}

// Session is one loaded graph with session-owned float32 buffers.
//
// A Session is not safe for concurrent use: it has one owner (in the runtime,
// the inference goroutine). After warm-up, Bind with an unchanged batch size
// and Run allocate nothing.
type Session interface {
	Inputs() []TensorInfo
	Outputs() []TensorInfo
	// Bind prepares the session for batch size n (1 ≤ n ≤ MaxBatch) and
	// returns its input and output buffers in the order of GraphSpec.Inputs
	// and GraphSpec.Outputs, each n×(product of the other dimensions) long.
	// The buffers stay valid until the next Bind with another n, or Close.
	Bind(n int) (in, out [][]float32, err error)
	// Run executes the graph on the buffers of the last Bind.
	Run() error
	// Close releases the session. Idempotent.
	Close() error
}

// FusedSampler is an optional ability of a Session opened on the energy
// gradient graph: it runs all K Euler steps of Algorithm 2 and the final
// energy evaluation on the device, with no host round trip per step.
// Callers discover it with a type assertion and fall back to Run per step.
type FusedSampler interface {
	// SampleFused integrates n rows. a holds the initial standardized noise
	// (n×T_p×D_a) and receives the final standardized actions; cond is
	// n×cond_dim; ts[k] is t_k and scales[k] is Δt·½·dσ²/dt(t_k) for each of
	// the K steps; energy (n) receives E(a_K, cond, gamma).
	SampleFused(n int, a, cond, ts, scales []float32, gamma float32, energy []float32) error
}
