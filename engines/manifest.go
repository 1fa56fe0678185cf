package engines

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/energyflow/edge/calibration"
)

// FormatVersion is the only bundle format this runtime reads (docs/bundle.md).
const FormatVersion = 1

// Policy kinds (the manifest's "policy").
const (
	// PolicyEnergyFlow samples with Algorithm 2 (Euler steps of the
	// probability-flow ODE on the energy-gradient graph) and has an energy.
	PolicyEnergyFlow = "energyflow"
	// PolicyDiffusion is the Diffusion Policy baseline: DDIM on the
	// noise-prediction graph "eps". It has no energy.
	PolicyDiffusion = "diffusion"
)

// Schedule and sampler kinds.
const (
	ScheduleGeometric = "geometric" // energyflow: σ(t) geometric in t
	ScheduleDDPM      = "ddpm"      // diffusion: discrete DDPM timesteps
	SamplerDDIM       = "ddim"      // diffusion: deterministic DDIM (eta = 0)
)

// Graph names and tensor names fixed by the bundle contract.
const (
	GraphEnergyGrad = "energy_grad"
	GraphEps        = "eps"
	GraphVision     = "vision"
	// GraphStateEnergy is the optional state term g(s) (state_energy.onnx),
	// named by the manifest's "state_energy" block rather than "graphs".
	GraphStateEnergy = "state_energy"
	// GraphEnergyGradLate is the optional late network's energy-gradient
	// graph (the "late_policy" block): the same I/O as GraphEnergyGrad.
	GraphEnergyGradLate = "energy_grad_late"

	InputActions  = "a_t"
	InputCond     = "cond"
	InputTime     = "t"
	OutputGrad    = "grad_a"
	OutputEnergy  = "energy"
	OutputEps     = "eps"
	InputImage    = "image"
	OutputFeature = "features"
	// OutputStateEnergy is the state graph's output: state_energy [B].
	OutputStateEnergy = "state_energy"
)

// Observation kinds.
const (
	ObsState = "state"
	ObsImage = "image"
)

// LayoutHistoryFlat is the conditioning layout of format 1: for each history
// step, oldest first, the items in order, concatenated.
const LayoutHistoryFlat = "history_flat"

// Score names of the calibration and of Sampler results.
const (
	ScoreEnergy         = calibration.ScoreEnergy
	ScoreCenteredEnergy = calibration.ScoreCenteredEnergy
	// ScoreStateEnergy is the state term's reading of the observation alone
	// (the manifest's "state_energy" block): higher = the state is further
	// from every demonstration step.
	ScoreStateEnergy = calibration.ScoreStateEnergy
)

// Readings of the state term this runtime knows, both computed inside the
// state graph (the runtime only compares the graph's output with a
// threshold):
//   - ReadingMaxSigmaZ: the maximum over the noise levels σ_j of the
//     z-scores (g(cond, σ_j) − mean_j)/std_j;
//   - ReadingMaxZ: the maximum of those and the z-scores of the extra
//     components the block lists in "components" (StateComponents).
const (
	ReadingMaxSigmaZ = "max_sigma_z"
	ReadingMaxZ      = "max_z"
)

// isStateComponent reports whether c is a part a ReadingMaxZ state term may
// combine: "g" (the DSM network), "transition" (the newest frame of cond
// against its linear prediction from the earlier frames) or "rnd" (random
// network distillation on cond).
func isStateComponent(c string) bool {
	switch c {
	case "g", "transition", "rnd":
		return true
	}
	return false
}

// Manifest is a parsed manifest.json (docs/bundle.md). LoadBundle validates
// every field; a Manifest obtained otherwise should be checked with Validate.
type Manifest struct {
	FormatVersion    int                   `json:"format_version"`
	Policy           string                `json:"policy"`
	Name             string                `json:"name"`
	Created          string                `json:"created"`
	SourceCommit     string                `json:"source_commit"`
	ActionDim        int                   `json:"action_dim"`
	PredHorizon      int                   `json:"pred_horizon"`
	ObsHorizon       int                   `json:"obs_horizon"`
	ActionHorizon    int                   `json:"action_horizon"`
	ActionNorm       Norm                  `json:"action_norm"`
	Obs              []ObsSpec             `json:"obs"`
	Conditioning     Conditioning          `json:"conditioning"`
	CondDim          int                   `json:"cond_dim"`
	Schedule         Schedule              `json:"schedule"`
	Sampler          SamplerSpec           `json:"sampler"`
	ReferenceActions [][][]float32         `json:"reference_actions"`
	Graphs           map[string]GraphEntry `json:"graphs"`
	Calibration      *calibration.Block    `json:"calibration"`
	Plans            []PlanInfo            `json:"plans,omitempty"`
	Files            map[string]string     `json:"files"`
	Model            json.RawMessage       `json:"model,omitempty"`
	// StateEnergy is the optional state term (nil: the bundle has none and
	// works exactly as without the key).
	StateEnergy *StateEnergySpec `json:"state_energy,omitempty"`
	// WatchCamera is an optional second fixed camera that the policy does
	// not read and the stop watches (nil: none).
	WatchCamera *WatchCameraSpec `json:"watch_camera,omitempty"`
	// LatePolicy is an optional second network for plans that land late
	// (nil: none; every plan samples the main graph).
	LatePolicy *LatePolicySpec `json:"late_policy,omitempty"`
}

// LatePolicySpec is the manifest's optional "late_policy" block, written
// by the toolkit's `python -m energyflow.late_network` (docs/bundle.md): a
// network fine-tuned on chunks that are right when they start executing
// some periods after the observation they were sampled from (the
// demonstrator simulated forward over the delay), for hosts whose plans
// land that late. The runtime samples a plan on it when the plans before
// it took FromPeriods control periods or more (loop.late_policy); every
// energy the runtime scores, and the state term, stay the main graph's.
type LatePolicySpec struct {
	// Graph names the late network's entry in "graphs": GraphEnergyGradLate.
	Graph string `json:"graph"`
	// FromPeriods is the measured plan latency, in whole control periods
	// rounded up, from which plans sample on the late network (≥ 1).
	FromPeriods int `json:"from_periods"`
	// Trained is the toolkit's informational record (labels, steps).
	Trained json.RawMessage `json:"trained,omitempty"`
}

// WatchCameraSpec is the manifest's optional "watch_camera" block, written
// by the toolkit's `python -m energyflow.palette --watch` (docs/bundle.md):
// a second fixed camera, mounted where it sees what the policy's own camera
// cannot (a top view looks down on the arm, which hides what lies beside
// the hand). No graph reads it. The runtime counts each of its frames'
// pixels outside Palette for the unseen-colour stop (safety
// watchdog.camera_unseen) and holds it to the camera watchdog, as it does
// the policy's camera.
type WatchCameraSpec struct {
	// Camera is the camera its demonstration frames were recorded with; the
	// runtime's camera_watch must name it and deliver frames of its size.
	Camera CameraSpec `json:"camera"`
	// Palette is the colours those frames showed.
	Palette Palette `json:"palette"`
}

// StateEnergySpec is the manifest's optional "state_energy" block, written
// by the toolkit's `energyflow state-term` (docs/bundle.md): a separate
// graph that maps cond [B, cond_dim] to state_energy [B], a score of the
// observation alone (higher = further from every demonstration step). The
// runtime evaluates the graph; the other fields document it, and
// Calibration gives the default stop threshold when the score is watched.
type StateEnergySpec struct {
	Graph   string `json:"graph"`   // bundle-relative file, listed in "files"
	Input   string `json:"input"`   // InputCond
	Output  string `json:"output"`  // OutputStateEnergy
	Reading string `json:"reading"` // ReadingMaxSigmaZ or ReadingMaxZ
	// Components lists what a ReadingMaxZ graph takes the maximum over
	// ("g" first, then "transition" and/or "rnd"); empty for ReadingMaxSigmaZ.
	Components []string `json:"components,omitempty"`
	// Sigmas, Mean and Std are the noise levels σ_j and the per-σ held-out
	// mean and std of g the graph holds as constants (same length).
	Sigmas []float64 `json:"sigmas"`
	Mean   []float64 `json:"mean"`
	Std    []float64 `json:"std"`
	// Calibration summarizes state_energy on held-out demonstration steps.
	Calibration StateEnergyCalibration `json:"calibration"`
	// Model, Train and ExportCheck are informational records of the
	// toolkit, kept as raw JSON.
	Model       json.RawMessage `json:"model,omitempty"`
	Train       json.RawMessage `json:"train,omitempty"`
	ExportCheck json.RawMessage `json:"export_check,omitempty"`
}

// StateEnergyCalibration is state_energy over every step of the held-out
// demonstrations: Quantiles keyed by percent ("50", "90", "99", "99.9").
type StateEnergyCalibration struct {
	Mean      float64            `json:"mean"`
	Std       float64            `json:"std"`
	Quantiles map[string]float64 `json:"quantiles"`
	Max       float64            `json:"max"`
	N         int                `json:"n"`
}

// StateEnergyQuantile is the held-out quantile that is the state score's
// default stop threshold (docs/safety.md).
const StateEnergyQuantile = "99.9"

// Norm holds per-dimension standardization statistics: x_std = (x-mean)/std.
type Norm struct {
	Mean []float32 `json:"mean"`
	Std  []float32 `json:"std"`
}

// ObsSpec is one observation input of the policy.
type ObsSpec struct {
	Name       string      `json:"name"`
	Kind       string      `json:"kind"` // ObsState or ObsImage
	Shape      []int       `json:"shape"`
	Norm       *Norm       `json:"norm,omitempty"`       // state: standardization (optional)
	Graph      string      `json:"graph,omitempty"`      // image: the graph that encodes it
	Features   int         `json:"features,omitempty"`   // image: width of the encoder output
	Preprocess *Preprocess `json:"preprocess,omitempty"` // image: how pixels become the graph input
	Camera     *CameraSpec `json:"camera,omitempty"`     // image: the camera it was trained on (optional)
	Palette    *Palette    `json:"palette,omitempty"`    // image: the colours its demonstrations showed (optional)
}

// Palette is the set of colours an image input's demonstration frames
// showed, written by the toolkit's `python -m energyflow.palette`
// (docs/bundle.md): each channel cut into Levels equal steps, the cells of
// the Levels³ RGB cube that any pixel of any demonstration frame fell in.
// The runtime counts a frame's pixels outside it (camera.Palette) for the
// unseen-colour stop, safety watchdog.camera_unseen.
type Palette struct {
	// Levels is the number of steps per channel: a power of two, 2 to 64.
	Levels int `json:"levels"`
	// Seen is the marked cells, standard base64 of Levels³/8 bytes: cell
	// (r·Levels + g)·Levels + b is bit c%8 of byte c/8.
	Seen string `json:"seen"`
	// Grow is how many steps (along one channel) from a cell a
	// demonstration pixel fell in a cell was marked too: the margin for a
	// decoder other than the recorder's. Informational.
	Grow int `json:"grow"`
	// Frames is how many demonstration frames it was built from.
	Frames int `json:"frames"`
	// Decoded says whose decoding of the frames it was built from:
	// "runtime" (the JPEG frames as the camera sent them, decoded as
	// camera.ToRGB decodes them) or "recorder" (the recorded pixels; ""
	// in palettes written before the field). Informational.
	Decoded string `json:"decoded,omitempty"`
	// HeldOut is its reading on demonstration frames it was not built
	// from: how many, and the most unseen pixels in any one of them.
	HeldOut struct {
		Frames    int `json:"frames"`
		MaxUnseen int `json:"max_unseen"`
	} `json:"held_out"`
}

// CameraSpec names the camera an image input was recorded with and the
// frame size it delivered. A runtime configured with another camera or
// another frame size refuses the bundle (a policy trained on one view reads
// another as nonsense, silently).
type CameraSpec struct {
	// Name is the camera's name as the recording wrote it (the simulator's
	// MuJoCo camera, e.g. "topview"; on a robot, the name the operator gives
	// the mounted camera in camera.name).
	Name string `json:"name"`
	// Width and Height are the frame size in pixels, before preprocessing.
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Preprocess says how camera pixels become the vision graph's input.
type Preprocess struct {
	Resize       []int     `json:"resize"`
	Crop         []int     `json:"crop"`
	ChannelOrder string    `json:"channel_order"`
	Mean         []float32 `json:"mean"`
	Std          []float32 `json:"std"`
}

// Conditioning says how the cond vector is built from the observation
// history.
type Conditioning struct {
	Layout string     `json:"layout"`
	Items  []CondItem `json:"items"`
}

// CondItem is one observation's contribution to a history step of cond.
type CondItem struct {
	Obs   string `json:"obs"`
	Width int    `json:"width"`
}

// Schedule is the noise schedule. Kind selects which fields apply:
// ScheduleGeometric (policy energyflow, Algorithm 2) uses SigmaMin, SigmaMax,
// T and Gamma; ScheduleDDPM (policy diffusion) uses the DDPM fields.
type Schedule struct {
	Kind string `json:"kind"` // ScheduleGeometric or ScheduleDDPM

	SigmaMin float64 `json:"sigma_min"`
	SigmaMax float64 `json:"sigma_max"`
	T        float64 `json:"T"`
	Gamma    float64 `json:"gamma"`

	// NumTrainTimesteps is N, the number of DDPM training timesteps.
	NumTrainTimesteps int `json:"num_train_timesteps,omitempty"`
	// BetaSchedule names the schedule the trainer used (informational:
	// AlphasCumprod is authoritative).
	BetaSchedule string `json:"beta_schedule,omitempty"`
	// PredictionType is what the graph predicts; only "epsilon".
	PredictionType string `json:"prediction_type,omitempty"`
	// ClipSample bounds the predicted x0 to [−ClipSample, ClipSample] in
	// every DDIM step; 0 disables clipping.
	ClipSample float64 `json:"clip_sample,omitempty"`
	// AlphasCumprod holds ᾱ_t for t = 0..N−1 (in (0, 1], non-increasing).
	AlphasCumprod []float64 `json:"alphas_cumprod,omitempty"`
}

// SamplerSpec holds the sampler defaults.
type SamplerSpec struct {
	// Kind is absent for policy energyflow (Euler, Algorithm 2) and
	// SamplerDDIM for policy diffusion.
	Kind string `json:"kind,omitempty"`
	// Steps is K (energyflow) or S (diffusion, 1..N): the default number
	// of sampler steps.
	Steps int `json:"steps"`
	// WarmStart is the warm start the bundle was measured with at K =
	// Steps (energyflow only; docs/engines.md, "Warm starts"): the
	// runtime's default when loop.warm_start leaves it unset and the
	// sampler runs the bundle's K (and its rate, when RateHz is set).
	// Absent: every plan starts cold.
	WarmStart *WarmSpec `json:"warm_start,omitempty"`
}

// WarmSpec is sampler.warm_start: each plan after the first starts from
// the committed one noised to Sigma and integrates Steps Euler steps.
type WarmSpec struct {
	Sigma float64 `json:"sigma"`
	Steps int     `json:"steps"`
	// RateHz is the control rate its success and stop were measured at:
	// the runtime takes it only there (0: at any rate).
	RateHz float64 `json:"rate_hz,omitempty"`
}

// Applies reports whether the warm start is the runtime's default at
// control rate hz and K steps.
func (w *WarmSpec) Applies(hz float64, k, bundleK int) bool {
	return w != nil && k == bundleK && (w.RateHz == 0 || math.Abs(w.RateHz-hz) < 1e-9)
}

// GraphEntry describes one ONNX graph of the bundle.
type GraphEntry struct {
	File    string       `json:"file"`
	Inputs  []TensorSpec `json:"inputs"`
	Outputs []TensorSpec `json:"outputs"`
}

// TensorSpec is a tensor as the manifest writes it; -1 marks the batch.
type TensorSpec struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
}

// FieldError is one problem with a bundle: the file, the field inside it
// (a JSON path such as "action_norm.std[3]", empty for the file as a whole)
// and what was wrong and expected.
type FieldError struct {
	File    string
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("engines: %s: %s", e.File, e.Problem)
	}
	return fmt.Sprintf("engines: %s: field %q: %s", e.File, e.Field, e.Problem)
}

// requiredFields are the manifest keys that must be present (calibration
// may be null but must be written).
var requiredFields = [...]string{
	"format_version", "policy", "name", "created", "source_commit",
	"action_dim", "pred_horizon", "obs_horizon", "action_horizon",
	"action_norm", "obs", "conditioning", "cond_dim", "schedule", "sampler",
	"reference_actions", "graphs", "calibration", "files",
}

// problems collects FieldErrors for one file.
type problems struct {
	file string
	errs []error
}

func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Field: field, Problem: fmt.Sprintf(format, args...)})
}

// ParseManifest decodes manifest JSON and validates it (Validate). file is
// used in error messages.
func ParseManifest(file string, data []byte) (*Manifest, error) {
	p := &problems{file: file}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		p.add("", "not valid JSON: %v — was the file truncated? re-export the bundle", err)
		return nil, p.errs[0]
	}
	for _, k := range requiredFields {
		if _, ok := raw[k]; !ok {
			p.add(k, "missing (required by bundle format %d, docs/bundle.md)", FormatVersion)
		}
	}
	// Check the version first: a future format may not decode at all.
	if v, ok := raw["format_version"]; ok {
		var fv int
		if err := json.Unmarshal(v, &fv); err != nil || fv != FormatVersion {
			p.add("format_version", "got %s, expected %d — this runtime reads bundle format %d only; export the bundle with a matching toolkit or update energyflow", strings.TrimSpace(string(v)), FormatVersion, FormatVersion)
			return nil, joinProblems(p.errs)
		}
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		field := ""
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			field = te.Field
			p.add(field, "got JSON %s, expected %s", te.Value, te.Type)
		} else {
			p.add(field, "cannot decode: %v", err)
		}
		return nil, joinProblems(p.errs)
	}
	if len(p.errs) > 0 {
		return nil, joinProblems(p.errs)
	}
	if err := m.validate(file); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's fields against each other (shapes, norms,
// conditioning, schedule, graphs, files listing). It does not touch files.
func (m *Manifest) Validate() error { return m.validate("manifest.json") }

func (m *Manifest) validate(file string) error {
	p := &problems{file: file}
	if m.FormatVersion != FormatVersion {
		p.add("format_version", "got %d, expected %d", m.FormatVersion, FormatVersion)
	}
	switch m.Policy {
	case PolicyEnergyFlow, PolicyDiffusion:
	default:
		p.add("policy", "got %q, expected %q or %q", m.Policy, PolicyEnergyFlow, PolicyDiffusion)
	}
	if m.Name == "" {
		p.add("name", "empty, expected the bundle's name")
	}
	positive := func(field string, v int) {
		if v <= 0 {
			p.add(field, "got %d, expected a positive integer", v)
		}
	}
	positive("action_dim", m.ActionDim)
	positive("pred_horizon", m.PredHorizon)
	positive("obs_horizon", m.ObsHorizon)
	positive("action_horizon", m.ActionHorizon)
	if m.ActionHorizon > m.PredHorizon && m.PredHorizon > 0 {
		p.add("action_horizon", "got %d, expected at most pred_horizon (%d)", m.ActionHorizon, m.PredHorizon)
	}
	checkNorm(p, "action_norm", m.ActionNorm, m.ActionDim)

	obsIndex := m.validateObs(p)
	m.validateConditioning(p, obsIndex)
	switch m.Policy {
	case PolicyEnergyFlow:
		m.validateSchedule(p)
		if m.Sampler.Kind != "" {
			p.add("sampler.kind", "got %q, expected it absent (Euler, Algorithm 2) for policy %q", m.Sampler.Kind, m.Policy)
		}
		if m.Sampler.Steps < 1 {
			p.add("sampler.steps", "got %d, expected K ≥ 1", m.Sampler.Steps)
		}
		if w := m.Sampler.WarmStart; w != nil {
			if err := CheckWarm(m.Schedule, w.Sigma, w.Steps); err != nil {
				p.add("sampler.warm_start", "%v", err)
			} else if w.Steps > m.Sampler.Steps {
				p.add("sampler.warm_start.steps", "got %d, expected at most sampler.steps (%d): a warm start integrates part of the schedule", w.Steps, m.Sampler.Steps)
			}
			if !(w.RateHz >= 0) || math.IsInf(w.RateHz, 0) {
				p.add("sampler.warm_start.rate_hz", "got %v, expected the control rate it was measured at (Hz > 0), or 0 for any", w.RateHz)
			}
		}
	case PolicyDiffusion:
		m.validateDDPM(p)
		if m.Sampler.Kind != SamplerDDIM {
			p.add("sampler.kind", "got %q, expected %q for policy %q", m.Sampler.Kind, SamplerDDIM, m.Policy)
		}
		if n := m.Schedule.NumTrainTimesteps; m.Sampler.Steps < 1 || n >= 1 && m.Sampler.Steps > n {
			p.add("sampler.steps", "got %d, expected S in 1..num_train_timesteps (%d)", m.Sampler.Steps, n)
		}
		if m.Sampler.WarmStart != nil {
			p.add("sampler.warm_start", "got a warm start, expected it absent for policy %q (its DDIM steps have no warm start)", m.Policy)
		}
		// (validateCalibration holds closed_loop_others to closed_loop's score)
		if c := m.Calibration; c != nil && !(c.ClosedLoop != nil && c.ClosedLoop.Score == ScoreStateEnergy && c.Recommended == (calibration.Recommendation{}) && len(c.Scores) == 0) {
			p.add("calibration", "got a calibration block, expected null: policy %q has no energy to calibrate (only a closed_loop of its state term, score %q, may be written)", m.Policy, ScoreStateEnergy)
		}
	}
	m.validateReferences(p)
	m.validateGraphs(p)
	m.validateStateEnergy(p)
	m.validateWatchCamera(p)
	m.validateLatePolicy(p)
	m.validateCalibration(p)
	m.validateFiles(p)
	return joinProblems(p.errs)
}

func (m *Manifest) validateObs(p *problems) map[string]int {
	idx := make(map[string]int, len(m.Obs))
	if len(m.Obs) == 0 {
		p.add("obs", "empty, expected at least one observation input")
	}
	for i, o := range m.Obs {
		f := fmt.Sprintf("obs[%d]", i)
		if o.Name == "" {
			p.add(f+".name", "empty, expected a name")
		} else if _, dup := idx[o.Name]; dup {
			p.add(f+".name", "%q is used twice, expected unique names", o.Name)
		} else {
			idx[o.Name] = i
		}
		switch o.Kind {
		case ObsState:
			if len(o.Shape) != 1 || o.Shape[0] <= 0 {
				p.add(f+".shape", "got %v, expected [D] with D > 0 for a state input", o.Shape)
				continue
			}
			if o.Norm != nil {
				checkNorm(p, f+".norm", *o.Norm, o.Shape[0])
			}
		case ObsImage:
			if len(o.Shape) != 3 || o.Shape[0] != 3 || o.Shape[1] <= 0 || o.Shape[2] <= 0 {
				p.add(f+".shape", "got %v, expected [3, H, W] for an image input", o.Shape)
			}
			if o.Features <= 0 {
				p.add(f+".features", "got %d, expected the vision graph's feature width (> 0)", o.Features)
			}
			if _, ok := m.Graphs[o.Graph]; !ok {
				p.add(f+".graph", "%q is not in \"graphs\", expected the name of the vision graph", o.Graph)
			}
			if c := o.Camera; c != nil && (c.Name == "" || c.Width <= 0 || c.Height <= 0) {
				p.add(f+".camera", "got name %q, %d×%d, expected a name and a frame size > 0", c.Name, c.Width, c.Height)
			}
			if pl := o.Palette; pl != nil {
				checkPalette(p, f+".palette", pl)
			}
			if o.Preprocess == nil {
				p.add(f+".preprocess", "missing, expected resize/crop/channel_order/mean/std for an image input")
			} else {
				pp := o.Preprocess
				if len(pp.Crop) != 2 || len(o.Shape) == 3 && (pp.Crop[0] != o.Shape[1] || pp.Crop[1] != o.Shape[2]) {
					p.add(f+".preprocess.crop", "got %v, expected [H, W] matching shape %v", pp.Crop, o.Shape)
				}
				if len(pp.Resize) != 2 {
					p.add(f+".preprocess.resize", "got %v, expected [H, W]", pp.Resize)
				}
				if len(pp.Mean) != 3 || len(pp.Std) != 3 {
					p.add(f+".preprocess", "mean/std have %d/%d values, expected 3 each", len(pp.Mean), len(pp.Std))
				}
				for j, s := range pp.Std {
					if !(s > 0) || isInf32(s) {
						p.add(fmt.Sprintf("%s.preprocess.std[%d]", f, j), "got %v, expected a finite value > 0", s)
					}
				}
			}
		default:
			p.add(f+".kind", "got %q, expected \"state\" or \"image\"", o.Kind)
		}
	}
	return idx
}

// Width returns the number of floats an observation contributes to one
// history step of cond: D for a state, the feature width for an image.
func (o *ObsSpec) Width() int {
	if o.Kind == ObsImage {
		return o.Features
	}
	if len(o.Shape) == 1 {
		return o.Shape[0]
	}
	return 0
}

func (m *Manifest) validateConditioning(p *problems, obsIndex map[string]int) {
	c := m.Conditioning
	if c.Layout != LayoutHistoryFlat {
		p.add("conditioning.layout", "got %q, expected %q", c.Layout, LayoutHistoryFlat)
	}
	if len(c.Items) == 0 {
		p.add("conditioning.items", "empty, expected at least one observation")
	}
	seen := make(map[string]bool, len(c.Items))
	sum := 0
	for i, it := range c.Items {
		f := fmt.Sprintf("conditioning.items[%d]", i)
		oi, ok := obsIndex[it.Obs]
		if !ok {
			p.add(f+".obs", "%q is not an entry of \"obs\"", it.Obs)
			continue
		}
		if seen[it.Obs] {
			p.add(f+".obs", "%q is listed twice", it.Obs)
		}
		seen[it.Obs] = true
		if w := m.Obs[oi].Width(); it.Width != w {
			p.add(f+".width", "got %d, expected %d (the width of obs %q)", it.Width, w, it.Obs)
		}
		sum += it.Width
	}
	if want := m.ObsHorizon * sum; m.CondDim != want && len(c.Items) > 0 {
		p.add("cond_dim", "got %d, expected %d (obs_horizon %d × Σ conditioning widths %d)", m.CondDim, want, m.ObsHorizon, sum)
	}
}

func (m *Manifest) validateSchedule(p *problems) {
	s := m.Schedule
	if s.Kind != ScheduleGeometric {
		p.add("schedule.kind", "got %q, expected %q for policy %q", s.Kind, ScheduleGeometric, m.Policy)
	}
	finite := func(field string, v float64) bool {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			p.add(field, "got %v, expected a finite number", v)
			return false
		}
		return true
	}
	ok := finite("schedule.sigma_min", s.SigmaMin) && finite("schedule.sigma_max", s.SigmaMax) &&
		finite("schedule.T", s.T) && finite("schedule.gamma", s.Gamma)
	if !ok {
		return
	}
	if !(s.SigmaMin > 0) {
		p.add("schedule.sigma_min", "got %v, expected > 0", s.SigmaMin)
	}
	if !(s.SigmaMax > s.SigmaMin) {
		p.add("schedule.sigma_max", "got %v, expected > sigma_min (%v)", s.SigmaMax, s.SigmaMin)
	}
	if !(s.T > 0) {
		p.add("schedule.T", "got %v, expected > 0", s.T)
	}
	if !(s.Gamma >= 0 && s.Gamma < s.T) {
		p.add("schedule.gamma", "got %v, expected 0 ≤ gamma < T (%v)", s.Gamma, s.T)
	}
}

// validateDDPM checks the schedule of a diffusion policy.
func (m *Manifest) validateDDPM(p *problems) {
	s := m.Schedule
	if s.Kind != ScheduleDDPM {
		p.add("schedule.kind", "got %q, expected %q for policy %q", s.Kind, ScheduleDDPM, m.Policy)
	}
	n := s.NumTrainTimesteps
	if n < 1 {
		p.add("schedule.num_train_timesteps", "got %d, expected N ≥ 1", n)
	}
	if s.PredictionType != "epsilon" {
		p.add("schedule.prediction_type", "got %q, expected \"epsilon\" (the only prediction type the DDIM sampler runs)", s.PredictionType)
	}
	if !(s.ClipSample >= 0) || math.IsInf(s.ClipSample, 0) {
		p.add("schedule.clip_sample", "got %v, expected a finite number ≥ 0 (0 disables clipping)", s.ClipSample)
	}
	if n >= 1 && len(s.AlphasCumprod) != n {
		p.add("schedule.alphas_cumprod", "has %d values, expected num_train_timesteps = %d", len(s.AlphasCumprod), n)
	}
	for i, v := range s.AlphasCumprod {
		switch {
		case !(v > 0 && v <= 1):
			p.add(fmt.Sprintf("schedule.alphas_cumprod[%d]", i), "got %v, expected a value in (0, 1]", v)
		case i > 0 && v > s.AlphasCumprod[i-1]:
			p.add(fmt.Sprintf("schedule.alphas_cumprod[%d]", i), "got %v, greater than the previous value %v: expected non-increasing", v, s.AlphasCumprod[i-1])
		}
	}
}

func (m *Manifest) validateReferences(p *problems) {
	if len(m.ReferenceActions) == 0 && m.Policy != PolicyDiffusion { // unused by diffusion
		p.add("reference_actions", "empty, expected [M][pred_horizon][action_dim] (M=16)")
	}
	for i, r := range m.ReferenceActions {
		if len(r) != m.PredHorizon {
			p.add(fmt.Sprintf("reference_actions[%d]", i), "has %d rows, expected pred_horizon = %d", len(r), m.PredHorizon)
			continue
		}
		for j, row := range r {
			if len(row) != m.ActionDim {
				p.add(fmt.Sprintf("reference_actions[%d][%d]", i, j), "has %d values, expected action_dim = %d", len(row), m.ActionDim)
				continue
			}
			for k, v := range row {
				if isNaN32(v) || isInf32(v) {
					p.add(fmt.Sprintf("reference_actions[%d][%d][%d]", i, j, k), "got %v, expected a finite number", v)
				}
			}
		}
	}
}

// ExpectedIO returns the tensors the contract fixes for a graph of this
// manifest, inputs in binding order. ok is false for an unknown graph name.
func (m *Manifest) ExpectedIO(graph string) (in, out []TensorInfo, ok bool) {
	switch graph {
	case GraphEnergyGrad, GraphEnergyGradLate:
		if graph == GraphEnergyGradLate && m.LatePolicy == nil {
			return nil, nil, false
		}
		tp, da := int64(m.PredHorizon), int64(m.ActionDim)
		return []TensorInfo{
				{Name: InputActions, Shape: []int64{-1, tp, da}},
				{Name: InputCond, Shape: []int64{-1, int64(m.CondDim)}},
				{Name: InputTime, Shape: []int64{-1}},
			}, []TensorInfo{
				{Name: OutputGrad, Shape: []int64{-1, tp, da}},
				{Name: OutputEnergy, Shape: []int64{-1}},
			}, true
	case GraphEps:
		tp, da := int64(m.PredHorizon), int64(m.ActionDim)
		return []TensorInfo{
				{Name: InputActions, Shape: []int64{-1, tp, da}},
				{Name: InputCond, Shape: []int64{-1, int64(m.CondDim)}},
				{Name: InputTime, Shape: []int64{-1}},
			}, []TensorInfo{
				{Name: OutputEps, Shape: []int64{-1, tp, da}},
			}, true
	case GraphStateEnergy:
		if m.StateEnergy == nil {
			return nil, nil, false
		}
		return []TensorInfo{{Name: InputCond, Shape: []int64{-1, int64(m.CondDim)}}},
			[]TensorInfo{{Name: OutputStateEnergy, Shape: []int64{-1}}}, true
	case GraphVision:
		for _, o := range m.Obs {
			if o.Kind == ObsImage && o.Graph == graph && len(o.Shape) == 3 {
				return []TensorInfo{{Name: InputImage, Shape: []int64{-1, int64(o.Shape[0]), int64(o.Shape[1]), int64(o.Shape[2])}}},
					[]TensorInfo{{Name: OutputFeature, Shape: []int64{-1, int64(o.Features)}}}, true
			}
		}
	}
	return nil, nil, false
}

// PolicyGraph returns the graph the sampler steps on: GraphEps for policy
// diffusion, GraphEnergyGrad otherwise.
func (m *Manifest) PolicyGraph() string {
	if m.Policy == PolicyDiffusion {
		return GraphEps
	}
	return GraphEnergyGrad
}

// HasEnergy reports whether the policy has an energy to score actions
// with (policy energyflow); a diffusion policy has none.
func (m *Manifest) HasEnergy() bool { return m.Policy != PolicyDiffusion }

// HasStateEnergy reports whether the bundle has the optional state term
// (the "state_energy" block and graph), for either policy kind.
func (m *Manifest) HasStateEnergy() bool { return m.StateEnergy != nil }

// validateStateEnergy checks the optional "state_energy" block.
func (m *Manifest) validateStateEnergy(p *problems) {
	se := m.StateEnergy
	if se == nil {
		return
	}
	const f = "state_energy"
	switch {
	case se.Graph == "":
		p.add(f+".graph", "empty, expected the state graph's file name (state_energy.onnx)")
	case checkRelPath(se.Graph) != "":
		p.add(f+".graph", "%s", checkRelPath(se.Graph))
	default:
		if _, ok := m.Files[se.Graph]; !ok {
			p.add(f+".graph", "%q is not listed in \"files\", expected every graph file to have a sha256", se.Graph)
		}
	}
	if se.Input != InputCond {
		p.add(f+".input", "got %q, expected %q (the graph reads the conditioning vector)", se.Input, InputCond)
	}
	if se.Output != OutputStateEnergy {
		p.add(f+".output", "got %q, expected %q", se.Output, OutputStateEnergy)
	}
	switch se.Reading {
	case ReadingMaxSigmaZ:
		if len(se.Components) > 0 {
			p.add(f+".components", "got %q, expected none with reading %q", se.Components, ReadingMaxSigmaZ)
		}
	case ReadingMaxZ:
		if len(se.Components) == 0 || se.Components[0] != "g" {
			p.add(f+".components", "got %q, expected \"g\" first, then transition and/or rnd (reading %q)", se.Components, ReadingMaxZ)
		}
		seen := map[string]bool{}
		for _, c := range se.Components {
			if !isStateComponent(c) || seen[c] {
				p.add(f+".components", "got %q, expected distinct names from g, transition, rnd", se.Components)
				break
			}
			seen[c] = true
		}
	default:
		p.add(f+".reading", "got %q, expected %q or %q (the readings this runtime knows; update energyflow)", se.Reading, ReadingMaxSigmaZ, ReadingMaxZ)
	}
	if len(se.Sigmas) == 0 {
		p.add(f+".sigmas", "empty, expected the noise levels the state term reads")
	}
	if len(se.Mean) != len(se.Sigmas) {
		p.add(f+".mean", "has %d values, expected %d (one per noise level in sigmas)", len(se.Mean), len(se.Sigmas))
	}
	if len(se.Std) != len(se.Sigmas) {
		p.add(f+".std", "has %d values, expected %d (one per noise level in sigmas)", len(se.Std), len(se.Sigmas))
	}
	for i, v := range se.Sigmas {
		if !(v > 0) || !finite(v) {
			p.add(fmt.Sprintf("%s.sigmas[%d]", f, i), "got %v, expected a finite value > 0", v)
		}
	}
	for i, v := range se.Mean {
		if !finite(v) {
			p.add(fmt.Sprintf("%s.mean[%d]", f, i), "got %v, expected a finite number", v)
		}
	}
	for i, v := range se.Std {
		if !(v > 0) || !finite(v) {
			p.add(fmt.Sprintf("%s.std[%d]", f, i), "got %v, expected a finite value > 0", v)
		}
	}
	c := se.Calibration
	if !finite(c.Mean) || !(c.Std >= 0) || !finite(c.Std) || !finite(c.Max) {
		p.add(f+".calibration", "mean %v, std %v, max %v: expected finite numbers, std ≥ 0", c.Mean, c.Std, c.Max)
	}
	if c.N < 1 {
		p.add(f+".calibration.n", "got %d, expected the number (≥ 1) of held-out steps", c.N)
	}
	if q, ok := c.Quantiles[StateEnergyQuantile]; !ok || !finite(q) {
		p.add(f+".calibration.quantiles", "has no finite %q, expected the held-out quantile the stop threshold defaults to", StateEnergyQuantile)
	}
	for _, k := range sortedKeys(c.Quantiles) {
		if !finite(c.Quantiles[k]) {
			p.add(f+".calibration.quantiles."+k, "got %v, expected a finite number", c.Quantiles[k])
		}
	}
}

func (m *Manifest) validateGraphs(p *problems) {
	main, other := m.PolicyGraph(), GraphEps
	if main == GraphEps {
		other = GraphEnergyGrad
	}
	if _, ok := m.Graphs[main]; !ok {
		what := "the energy-gradient graph"
		if main == GraphEps {
			what = "the noise-prediction graph"
		}
		p.add("graphs", "has no %q entry, expected %s of policy %q", main, what, m.Policy)
	}
	usesVision := false
	for _, o := range m.Obs {
		usesVision = usesVision || o.Kind == ObsImage
	}
	for _, name := range sortedKeys(m.Graphs) {
		g := m.Graphs[name]
		f := "graphs." + name
		if g.File == "" {
			p.add(f+".file", "empty, expected the ONNX file name")
		} else if _, ok := m.Files[g.File]; !ok {
			p.add(f+".file", "%q is not listed in \"files\", expected every graph file to have a sha256", g.File)
		}
		if name == other {
			p.add(f, "policy %q has no %q graph, expected %q (and %q for image inputs)", m.Policy, name, main, GraphVision)
			continue
		}
		in, out, ok := m.ExpectedIO(name)
		if !ok {
			if name == GraphVision && !usesVision {
				continue // a vision graph nobody uses is harmless
			}
			if name == GraphEnergyGradLate {
				p.add(f, "a late network without a \"late_policy\" block, expected both or neither")
				continue
			}
			p.add(f, "unknown graph, expected %q or %q", main, GraphVision)
			continue
		}
		checkTensors(p, f+".inputs", g.Inputs, in)
		checkTensors(p, f+".outputs", g.Outputs, out)
	}
}

// validateLatePolicy checks the optional "late_policy" block: an
// energyflow policy, its graph in "graphs" (validateGraphs checks the
// graph's I/O), and a latency at which it takes over.
func (m *Manifest) validateLatePolicy(p *problems) {
	lp := m.LatePolicy
	if lp == nil {
		return
	}
	const f = "late_policy"
	if m.Policy != PolicyEnergyFlow {
		p.add(f, "got a late network, expected it absent for policy %q", m.Policy)
	}
	if lp.Graph != GraphEnergyGradLate {
		p.add(f+".graph", "got %q, expected %q", lp.Graph, GraphEnergyGradLate)
	} else if _, ok := m.Graphs[lp.Graph]; !ok {
		p.add(f+".graph", "%q is not in \"graphs\", expected the late network's entry there", lp.Graph)
	}
	if lp.FromPeriods < 1 {
		p.add(f+".from_periods", "got %d, expected the plan latency (whole control periods, ≥ 1) from which plans sample on the late network", lp.FromPeriods)
	}
}

// checkTensors compares the manifest's tensor list with the contract, by
// name (the order in the manifest does not matter).
func checkTensors(p *problems, field string, got []TensorSpec, want []TensorInfo) {
	if len(got) != len(want) {
		p.add(field, "has %d tensors, expected %d (%s)", len(got), len(want), tensorList(want))
	}
	for _, w := range want {
		found := false
		for i, g := range got {
			if g.Name != w.Name {
				continue
			}
			found = true
			if !shapeEqual(g.Shape, w.Shape) {
				p.add(fmt.Sprintf("%s[%d].shape", field, i), "tensor %q has shape %v, expected %v", g.Name, g.Shape, w.Shape)
			}
		}
		if !found {
			p.add(field, "has no tensor %q, expected %s", w.Name, tensorList(want))
		}
	}
}

func tensorList(ts []TensorInfo) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", t.Name, t.Shape)
	}
	return b.String()
}

// validateCalibration checks the calibration block (calibration.Block's
// Validate, its problems as this file's FieldErrors) and what it needs from
// the rest of the manifest: a closed loop of the state score needs the
// state term.
func (m *Manifest) validateCalibration(p *problems) {
	c := m.Calibration
	if c == nil {
		return
	}
	for _, err := range unwrapJoined(c.Validate()) {
		if ke, ok := err.(*calibration.KeyError); ok {
			p.add(ke.Key, "%s", ke.Problem)
		} else {
			p.add("calibration", "%v", err)
		}
	}
	for i, cl := range c.ClosedLoops() {
		f := "calibration.closed_loop"
		if i > 0 {
			f = fmt.Sprintf("calibration.closed_loop_others[%d]", i-1)
		}
		if cl != nil && cl.Score == ScoreStateEnergy && m.StateEnergy == nil {
			p.add(f+".score", "%q, but the bundle has no \"state_energy\" block: recalibrate (energyflow sim calibrate --score energy) or restore the state term", cl.Score)
		}
	}
}

// unwrapJoined returns the errors joined in err (errors.Join), err alone
// when it joins none, nothing for nil.
func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (m *Manifest) validateFiles(p *problems) {
	if len(m.Files) == 0 {
		p.add("files", "empty, expected a sha256 for every file of the bundle")
	}
	for _, name := range sortedKeys(m.Files) {
		sum := m.Files[name]
		f := "files." + name
		if err := checkRelPath(name); err != "" {
			p.add(f, "%s", err)
		}
		if name == "manifest.json" {
			p.add(f, "manifest.json cannot list itself")
		}
		if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
			p.add(f, "got %q, expected 64 lowercase hex digits (sha256)", sum)
		}
	}
	for i, pl := range m.Plans {
		f := fmt.Sprintf("plans[%d]", i)
		if _, ok := m.Files[pl.File]; !ok {
			p.add(f+".file", "%q is not listed in \"files\"", pl.File)
		}
		if pl.Graph != "" {
			if _, ok := m.Graphs[pl.Graph]; !ok && !(pl.Graph == GraphStateEnergy && m.StateEnergy != nil) {
				p.add(f+".graph", "%q is not in \"graphs\" (nor the \"state_energy\" block's graph)", pl.Graph)
			}
		}
	}
}

// checkRelPath returns a problem description for a file name that is not a
// clean relative, slash-separated path inside the bundle, or "".
func checkRelPath(name string) string {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") ||
		path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Sprintf("file name %q is not a clean relative path inside the bundle", name)
	}
	return ""
}

func checkNorm(p *problems, field string, n Norm, dim int) {
	if len(n.Mean) != dim {
		p.add(field+".mean", "has %d values, expected %d", len(n.Mean), dim)
	}
	if len(n.Std) != dim {
		p.add(field+".std", "has %d values, expected %d", len(n.Std), dim)
	}
	for i, v := range n.Mean {
		if isNaN32(v) || isInf32(v) {
			p.add(fmt.Sprintf("%s.mean[%d]", field, i), "got %v, expected a finite number", v)
		}
	}
	for i, v := range n.Std {
		if !(v > 0) || isInf32(v) {
			p.add(fmt.Sprintf("%s.std[%d]", field, i), "got %v, expected a finite number > 0", v)
		}
	}
}

func shapeEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isNaN32(v float32) bool { return v != v }
func isInf32(v float32) bool { return math.IsInf(float64(v), 0) }

// validateWatchCamera checks the optional second camera: a named camera of
// a size > 0, another than the policy's own, and its palette.
func (m *Manifest) validateWatchCamera(p *problems) {
	w := m.WatchCamera
	if w == nil {
		return
	}
	if c := w.Camera; c.Name == "" || c.Width <= 0 || c.Height <= 0 {
		p.add("watch_camera.camera", "got name %q, %d×%d, expected a name and a frame size > 0", c.Name, c.Width, c.Height)
	}
	for i, o := range m.Obs {
		if o.Kind == ObsImage && o.Camera != nil && o.Camera.Name == w.Camera.Name {
			p.add("watch_camera.camera.name", "%q is obs[%d]'s camera, expected a second camera (the policy's own is watched through its palette)", w.Camera.Name, i)
		}
	}
	checkPalette(p, "watch_camera.palette", &w.Palette)
}

// checkPalette checks an image input's palette: levels a power of two from
// 2 to 64, its cells exactly Levels³/8 bytes of base64.
func checkPalette(p *problems, f string, pl *Palette) {
	if pl.Levels < 2 || pl.Levels > 64 || pl.Levels&(pl.Levels-1) != 0 {
		p.add(f+".levels", "got %d, expected a power of two from 2 to 64 (steps per channel)", pl.Levels)
		return
	}
	want := max(1, pl.Levels*pl.Levels*pl.Levels/8)
	b, err := base64.StdEncoding.DecodeString(pl.Seen)
	switch {
	case err != nil:
		p.add(f+".seen", "not standard base64: %v", err)
	case len(b) != want:
		p.add(f+".seen", "holds %d bytes, expected %d (a bit for each of the %d³ cells)", len(b), want, pl.Levels)
	}
	if pl.Frames <= 0 {
		p.add(f+".frames", "got %d, expected the number of demonstration frames it was built from (> 0)", pl.Frames)
	}
}
