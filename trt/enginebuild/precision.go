package enginebuild

import (
	"sort"
	"strings"
)

// FP32 layer selection for FP16 engines.
//
// trtexec's --layerPrecisions matches TensorRT layer names exactly (or with
// one '*' wildcard: prefix*suffix), and the ONNX parser names each layer
// after its ONNX node. Exporters append counters to node names
// ("/down.0/norm/ReduceMean_1"), so patterns alone miss layers; instead the
// builder reads the ONNX graph and lists the exact names of the nodes that
// must stay FP32:
//
//   - reductions: every Reduce* op;
//   - normalization: *Normalization ops, Sqrt, Reciprocal, Pow and Div (the
//     variance and rsqrt arithmetic of a hand-written GroupNorm and its
//     backward pass), and every node whose name has a path component
//     containing "norm" (the exporter's module path, e.g. "/mid/gn1/..." is
//     not matched, "/mid/norm1/..." is);
//   - time embedding: Sin and Cos nodes and what follows them up to and
//     including the first MatMul/Gemm and its bias Add, and every node whose
//     name has a component containing "time", "temb", "t_emb", "sinusoidal",
//     "pos_emb" or "step_enc" (Diffusion Policy's diffusion_step_encoder);
//   - energy head: every node with a component containing "head" or
//     "energy", and the last 3 nodes of the chain producing the graph output
//     "energy" (reductions, products, sums, reshapes).
//
// Constant and Shape nodes are left out (TensorRT ignores precision on them).
// docs/jetson.md lists these rules for the training side, which names the
// modules.

var (
	normOps      = map[string]bool{"GroupNormalization": true, "InstanceNormalization": true, "LayerNormalization": true, "BatchNormalization": true, "LpNormalization": true, "MeanVarianceNormalization": true, "Sqrt": true, "Reciprocal": true, "Pow": true, "Div": true}
	skipOps      = map[string]bool{"Constant": true, "Shape": true, "ConstantOfShape": true}
	passThrough  = map[string]bool{"Concat": true, "Unsqueeze": true, "Squeeze": true, "Reshape": true, "Flatten": true, "Transpose": true, "Cast": true, "Mul": true, "Add": true, "Identity": true}
	headChainOps = map[string]bool{"ReduceSum": true, "ReduceMean": true, "Mul": true, "Add": true, "Sub": true, "MatMul": true, "Gemm": true, "Squeeze": true, "Unsqueeze": true, "Reshape": true, "Flatten": true, "Neg": true, "Pow": true, "Sum": true, "Identity": true}
	timeWords    = []string{"time", "temb", "t_emb", "sinusoidal", "pos_emb", "step_enc"}
	headWords    = []string{"head", "energy"}
)

// nameHas reports whether a path component of a node name contains one of
// words (case-insensitive).
func nameHas(name string, words ...string) bool {
	for _, part := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '/' || r == '.' }) {
		for _, w := range words {
			if strings.Contains(part, w) {
				return true
			}
		}
	}
	return false
}

// FP32Layers returns the sorted names of the nodes to keep in FP32, and
// how many selected nodes have no name (TensorRT then invents one and
// they cannot be targeted; the exporter normally names every node).
func FP32Layers(g *Graph, energyOutput string) (names []string, unnamed int) {
	sel := make([]bool, len(g.Nodes))
	consumers := map[string][]int{}
	producer := map[string]int{}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			consumers[in] = append(consumers[in], i)
		}
		for _, out := range n.Outputs {
			producer[out] = i
		}
	}
	for i, n := range g.Nodes {
		switch {
		case strings.HasPrefix(n.OpType, "Reduce"), normOps[n.OpType]:
			sel[i] = true
		case nameHas(n.Name, "norm"), nameHas(n.Name, timeWords...), nameHas(n.Name, headWords...):
			sel[i] = true
		}
	}
	// Time embedding: forward from Sin/Cos to the first MatMul/Gemm (+ bias Add).
	visited := make([]bool, len(g.Nodes))
	for i, n := range g.Nodes {
		if n.OpType != "Sin" && n.OpType != "Cos" {
			continue
		}
		sel[i] = true
		frontier := []int{i}
		for depth := 0; depth < 6 && len(frontier) > 0; depth++ {
			var next []int
			for _, j := range frontier {
				for _, out := range g.Nodes[j].Outputs {
					for _, c := range consumers[out] {
						op := g.Nodes[c].OpType
						switch {
						case op == "MatMul" || op == "Gemm":
							sel[c] = true
							for _, o2 := range g.Nodes[c].Outputs {
								for _, c2 := range consumers[o2] {
									if g.Nodes[c2].OpType == "Add" {
										sel[c2] = true
									}
								}
							}
						case passThrough[op] && !visited[c]:
							visited[c] = true
							sel[c] = true
							next = append(next, c)
						}
					}
				}
			}
			frontier = next
		}
	}
	// Energy head: backward from the energy output.
	if p, ok := producer[energyOutput]; ok {
		frontier := []int{p}
		seenHead := map[int]bool{p: true}
		for depth := 0; depth < 3 && len(frontier) > 0; depth++ {
			var next []int
			for _, j := range frontier {
				if !headChainOps[g.Nodes[j].OpType] {
					continue
				}
				sel[j] = true
				for _, in := range g.Nodes[j].Inputs {
					if q, ok := producer[in]; ok && !seenHead[q] {
						seenHead[q] = true
						next = append(next, q)
					}
				}
			}
			frontier = next
		}
	}
	seen := map[string]bool{}
	for i, n := range g.Nodes {
		if !sel[i] || skipOps[n.OpType] {
			continue
		}
		if n.Name == "" {
			unnamed++
			continue
		}
		if !seen[n.Name] {
			seen[n.Name] = true
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	return names, unnamed
}
