package trt

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/energyflow/edge/engines"
)

// FormatTRTVersion turns getInferLibVersion's integer (major·10000 +
// minor·100 + patch) into "major.minor.patch".
func FormatTRTVersion(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/10000, (v/100)%100, v%100)
}

// PlanKey is the file-name-safe form of a GPU name: every rune outside
// [A-Za-z0-9.-] becomes '-' ("NVIDIA A100-SXM4-40GB" → "NVIDIA-A100-SXM4-40GB").
func PlanKey(gpu string) string {
	var b strings.Builder
	for _, r := range gpu {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// StatePlanPrecision is the precision of every plan of the state graph
// (engines.GraphStateEnergy): its reading subtracts per-σ means from values
// of similar size and divides by small standard deviations, which FP16
// would spoil, and the graph is a few small layers, so FP16 would save
// nothing measurable.
const StatePlanPrecision = "fp32"

// PlanFile is the bundle-relative path of a plan:
// plans/<trt-version>_<gpu>_<precision>.plan, with the graph name prefixed
// for graphs other than energy_grad (plans/vision_10.3.0_Orin_fp16.plan).
func PlanFile(graph, trtVersion, gpu, precision string) string {
	name := fmt.Sprintf("%s_%s_%s.plan", trtVersion, PlanKey(gpu), precision)
	if graph != "" && graph != "energy_grad" {
		name = graph + "_" + name
	}
	return path.Join("plans", name)
}

// SelectPlan picks the plan for graph built with trtVersion on gpu. With
// precision "" it prefers fp16, then fp32. The state graph
// (engines.GraphStateEnergy) ignores precision: `energyflow engine build`
// always builds it in FP32 (StatePlanPrecision). When no plan fits it says
// why each listed plan was refused and how to build one (errors wrap
// ErrNoPlan or ErrPlanMismatch).
func SelectPlan(plans []engines.PlanInfo, graph, trtVersion, gpu, precision string) (engines.PlanInfo, error) {
	if graph == engines.GraphStateEnergy {
		precision = ""
	}
	var reasons []string
	var match []engines.PlanInfo
	for _, p := range plans {
		if p.Graph != graph && !(p.Graph == "" && graph == "energy_grad") {
			continue
		}
		switch {
		case p.TRTVersion != trtVersion && p.GPU != gpu:
			reasons = append(reasons, fmt.Sprintf("%s was built with TensorRT %s for GPU %q", p.File, p.TRTVersion, p.GPU))
		case p.TRTVersion != trtVersion:
			reasons = append(reasons, fmt.Sprintf("%s was built with TensorRT %s", p.File, p.TRTVersion))
		case p.GPU != gpu:
			reasons = append(reasons, fmt.Sprintf("%s was built for GPU %q", p.File, p.GPU))
		case precision != "" && p.Precision != precision:
			reasons = append(reasons, fmt.Sprintf("%s has precision %s, %s was asked for", p.File, p.Precision, precision))
		default:
			match = append(match, p)
		}
	}
	for _, want := range []string{"fp16", "fp32"} {
		for _, p := range match {
			if p.Precision == want {
				return p, nil
			}
		}
	}
	if len(match) > 0 {
		return match[0], nil
	}
	prec := precision
	if prec == "" {
		prec = "fp16"
	}
	how := fmt.Sprintf("build one on this machine: energyflow engine build --bundle BUNDLE --precision %s (docs/jetson.md)", prec)
	if len(reasons) == 0 {
		return engines.PlanInfo{}, fmt.Errorf("%w: bundle lists no plan for graph %s (running TensorRT %s on GPU %q); %s",
			ErrNoPlan, graph, trtVersion, gpu, how)
	}
	return engines.PlanInfo{}, fmt.Errorf("%w: graph %s, running TensorRT %s on GPU %q: %s; %s",
		ErrPlanMismatch, graph, trtVersion, gpu, strings.Join(reasons, "; "), how)
}

// bundleDir finds the bundle directory from a GraphSpec path: the path
// itself when it is a directory, else the nearest enclosing directory (up
// to three levels) that holds manifest.json, else the path's directory.
func bundleDir(p string) string {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p
	}
	dir := filepath.Dir(p)
	for d, i := dir, 0; i < 3; d, i = filepath.Dir(d), i+1 {
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err == nil {
			return d
		}
	}
	return dir
}
