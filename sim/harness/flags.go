package harness

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
)

// Default simulated robot: Meta-World behind the bridge.
const (
	DefaultTask   = "button-press"
	DefaultBundle = "bundles/metaworld-button-press" // relative to the repository
	// MapFile is the bridge arm's register map, relative to the repository.
	MapFile = "examples/maps/metaworld.yaml"
)

// The bridge's vocabulary, the one Go copy: tasks as sim/world.py's TASKS,
// OOD levels as sim/ood.py's LEVELS, injected faults as sim/world.py's
// FAULTS (sim/tests/test_go_harness.py checks that they agree).
const (
	simTasks  = "button-press drawer-open assembly bin-picking hammer"
	simLevels = "0 S M L"
	simFaults = "push object occlusion zero_state blackout freeze camera_shift watch_shift"
	// simCameras are the Meta-World cameras the bridge renders (sim/bridge.py --camera).
	simCameras = "corner corner2 corner3 corner4 topview behindGripper gripperPOV"
	// DefaultCamera is the bridge's camera when neither --camera nor the bundle names one.
	DefaultCamera = "corner2"
	// DefaultFrozenMotion is --camera-frozen-motion: the hand is in every
	// camera's view, so 1 cm of its motion must change a frame.
	DefaultFrozenMotion = 0.01
	// DefaultCameraMoved is --camera-moved: a knock changes most of a fixed
	// camera's steady view at once, the arm and the objects a few tiles a
	// frame (camera.ViewWatch).
	DefaultCameraMoved = 0.5
	// DefaultCameraUnseen is --camera-unseen: over an hour of the
	// ButtonPress camera bundle's level-0 driving, two frames running
	// showed at most 3 pixels outside its palette; the object fault's 5 cm
	// box, 8 or more in its first second (docs/camera-policy.md, "Unseen
	// colours").
	DefaultCameraUnseen = 6
)

// Levels returns the bridge's OOD levels, in order.
func Levels() []string { return strings.Fields(simLevels) }

// UsageError is a command-line mistake: the command prints it and exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// Flags are the options every sim command takes: the demo's, the
// evaluation's and the calibration's.
type Flags struct {
	Task, Level, Bundle, Camera string
	// CameraName is the simulator's camera the policy sees (--camera; "":
	// the one the bundle was trained on, else DefaultCamera).
	CameraName  string
	RobotState  string // robot.state fields, comma-separated; "": from the bundle
	Seed, Steps int
	Rate        float64
	Verbose     bool
	// FrozenMotion is the frozen-camera check's motion (--camera-frozen-motion,
	// m; 0: off): safety watchdog.camera_frozen_motion for bundles with an image.
	FrozenMotion float64
	// CameraMoved is the knocked-camera check's trigger (--camera-moved, a
	// fraction; 0: off): safety watchdog.camera_moved for bundles with an image.
	CameraMoved float64
	// CameraUnseen is the unseen-colour check's pixels (--camera-unseen; 0:
	// off): safety watchdog.camera_unseen for bundles whose image input
	// carries a palette.
	CameraUnseen int
	// Chunking and ChunkingStrength are --chunking and
	// --chunking-strength: the runtime's loop.realtime_chunking mode and
	// strength (0: the default).
	Chunking         string
	ChunkingStrength float64
	ChunkingSoft     int // --chunking-soft
	// WarmSigma and WarmSteps are --warm-sigma and --warm-steps: the
	// runtime's loop.warm_start (sigma 0: the bundle's sampler.warm_start,
	// set here by Prepare when it applies); Cold is --cold
	// (loop.warm_start.off).
	WarmSigma float64
	WarmSteps int
	Cold      bool
	// LateOff is --late-off: plans never sample on the bundle's late
	// network (loop.late_policy.off).
	LateOff bool

	// Resolved by Prepare.
	BundleDir string   // the bundle to run: --bundle or the task's shipped one
	State     []string // robot.state for the bundle
	// CalibratedOn is the task the bundle's closed-loop stop was calibrated
	// on, when that is not --task: a bundle of another task usually never
	// arms, its state score refusing the scene.
	CalibratedOn string
	// Images reports whether the bundle takes camera images, Palette
	// whether one of them carries the colours its demonstrations showed
	// (the unseen-colour check's).
	Images, Palette bool
	// WatchCamera is the bundle's watch camera the bridge renders at /watch
	// and the runtime reads (camera_watch; "": none). --watch-camera off
	// leaves it out.
	WatchCamera string
	// FromBundle says which of --task and --rate Prepare took from the
	// bundle's calibration, as "task hammer, 20 Hz" ("": neither): a bundle
	// given without them runs the task and the rate its stop was certified
	// on (NoteGiven must have been called).
	FromBundle string

	given     map[string]bool // the flags the command line set (NoteGiven)
	watchFlag string          // --watch-camera
}

// NoteGiven records which flags of fs the command line set (call it after
// fs.Parse): Prepare then takes --task and --rate from the bundle's
// calibration where they were not given. Without it they keep their values.
func (f *Flags) NoteGiven(fs *flag.FlagSet) {
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
}

// fromBundle sets the task and the control rate the bundle's stop was
// certified on, where the command line gave neither and a bundle was named
// (--bundle): the task of its closed-loop calibration, and its rate unless
// the bundle is also certified at the default rate.
func (f *Flags) fromBundle(m *engines.Manifest) {
	if f.given == nil || f.Bundle == "" || m.Calibration == nil || m.Calibration.ClosedLoop == nil {
		return
	}
	var took []string
	cl := m.Calibration.ClosedLoop
	if t := normTask(cl.Task); !f.given["task"] && t != "" && t != f.Task && slices.Contains(strings.Fields(simTasks), t) {
		f.Task = t
		took = append(took, "task "+t)
	}
	if r := f.certifiedRate(m); !f.given["rate"] && r > 0 {
		f.Rate = r
		took = append(took, strconv.FormatFloat(r, 'g', -1, 64)+" Hz")
	}
	f.FromBundle = strings.Join(took, ", ")
}

// certifiedRate is the control rate the closed-loop calibration of the
// score the stop watches by default (state_energy with a state term, else
// energy) was driven at, when none of them was driven at f.Rate and the
// run's K; 0 when one was, or when the stop watches a score no closed-loop
// calibration holds (its threshold does not depend on the rate).
func (f *Flags) certifiedRate(m *engines.Manifest) float64 {
	score := calibration.ScoreEnergy
	if m.HasStateEnergy() {
		score = calibration.ScoreStateEnergy
	}
	k := m.Sampler.Steps
	if f.Steps != 0 {
		k = f.Steps
	}
	rate := 0.0
	for _, cl := range m.Calibration.ClosedLoops() {
		if cl.Score != score {
			continue
		}
		if cl.CertifiedAt(f.Rate, k) {
			return 0
		}
		if rate == 0 && cl.RateHz > 0 {
			rate = cl.RateHz
		}
	}
	return rate
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Task, "task", DefaultTask, "Meta-World task: "+ListOf(simTasks))
	fs.StringVar(&f.Level, "level", "0", "out-of-distribution level: "+ListOf(simLevels))
	fs.StringVar(&f.Bundle, "bundle", "", "engine bundle (default: the shipped bundle for the task, "+DefaultBundle+")")
	fs.IntVar(&f.Seed, "seed", 0, "episode seed")
	fs.IntVar(&f.Steps, "steps", 0, "Euler steps K (0: the bundle's default)")
	fs.Float64Var(&f.Rate, "rate", 10, "control rate in Hz")
	fs.StringVar(&f.Camera, "camera-size", "96x96", "camera image size WxH rendered by the simulator")
	fs.StringVar(&f.CameraName, "camera", "", "the simulator's camera the policy sees: "+ListOf(simCameras)+" (default: the one the bundle was trained on, else "+DefaultCamera+")")
	fs.Float64Var(&f.FrozenMotion, "camera-frozen-motion", DefaultFrozenMotion, "stop when the camera's frames stay identical while the hand moves this far, in m (safety watchdog.camera_frozen_motion; bundles with an image); 0: off, e.g. to measure a policy on a blanked image")
	fs.Float64Var(&f.CameraMoved, "camera-moved", DefaultCameraMoved, "stop when this fraction of the camera's steady image tiles change at once and stay changed: a knocked or turned camera (safety watchdog.camera_moved; bundles with an image); 0: off")
	fs.StringVar(&f.watchFlag, "watch-camera", "", "the bundle's watch camera (a second camera only the stop reads): \"\" runs it when the bundle has one, off leaves it out")
	fs.IntVar(&f.CameraUnseen, "camera-unseen", DefaultCameraUnseen, "stop when this many pixels of each of two frames running have colours no demonstration showed: something new in view (safety watchdog.camera_unseen; bundles whose image input has a palette); 0: off")
	fs.StringVar(&f.RobotState, "robot-state", "", "arm-state fields the policy's state input is built from, comma-separated (default: observation for a 39-wide state input, position,gripper for a 4-wide one)")
	fs.StringVar(&f.Chunking, "chunking", "off", "real-time chunking (loop.realtime_chunking.mode): off, noisy or denoised — each plan sampled with the actions that run while it is computed held (docs/engines.md)")
	fs.Float64Var(&f.ChunkingStrength, "chunking-strength", 1, "real-time chunking's strength, the term's weight against the energy's: with denoised the fraction of the denoised estimate replaced by the held action, in (0, 1]; with noisy any value above 0")
	fs.IntVar(&f.ChunkingSoft, "chunking-soft", -1, "real-time chunking: how many actions after the held ones get decaying weights (-1: the whole overlap; 0: none)")
	fs.Float64Var(&f.WarmSigma, "warm-sigma", 0, "warm starts (loop.warm_start.sigma): each plan starts from the committed one noised to this σ, within the bundle's schedule; 0: the bundle's sampler.warm_start, if it has one (docs/engines.md)")
	fs.IntVar(&f.WarmSteps, "warm-steps", 0, "warm starts: Euler steps from --warm-sigma to γ (0: half of K)")
	fs.BoolVar(&f.Cold, "cold", false, "start every plan from noise, even where the bundle sets a warm start (loop.warm_start.off)")
	fs.BoolVar(&f.LateOff, "late-off", false, "sample every plan on the bundle's main network, even where it has a late network for late plans (loop.late_policy.off)")
	fs.BoolVar(&f.Verbose, "v", false, "debug logging")
}

// WarnTask prints one line to w when Prepare took the task or the rate from
// the bundle (FromBundle), and one when the bundle's stop was calibrated on
// another task (Meta-World's tasks share the 39-wide observation, so the
// width check cannot tell); cmd names the command.
func (f *Flags) WarnTask(w io.Writer, cmd string) {
	if f.FromBundle != "" {
		fmt.Fprintf(w, "%s: %s from bundle %s, as its stop was certified (give --task or --rate to run another)\n", cmd, f.FromBundle, f.BundleDir)
	}
	if f.CalibratedOn != "" {
		fmt.Fprintf(w, "%s: warning: bundle %s was calibrated on task %s, not %s: its stop will likely refuse to arm\n", cmd, f.BundleDir, f.CalibratedOn, f.Task)
	}
}

// ListOf is a space-separated vocabulary as the help and errors show it.
func ListOf(words string) string { return strings.Join(strings.Fields(words), ", ") }

// OneOf returns v normalized by norm, or a usage error naming the flag,
// the value and the valid ones when that is not one of words (a
// space-separated vocabulary).
func OneOf(flagName, what, v, words string, norm func(string) string) (string, error) {
	if n := norm(strings.TrimSpace(v)); slices.Contains(strings.Fields(words), n) {
		return n, nil
	}
	return "", UsageError{fmt.Errorf("%s %q: unknown %s; want one of %s", flagName, v, what, ListOf(words))}
}

// ParseFault returns --fault's value in the bridge's spelling, or a usage
// error naming the faults the bridge injects.
func ParseFault(v string) (string, error) {
	return OneOf("--fault", "fault", v, simFaults, strings.ToLower)
}

// normTask and normLevel spell a task and a level as the bridge does
// (sim/world.py normalize_task, sim/ood.py normalize_level).
func normTask(s string) string  { return strings.TrimSuffix(strings.ToLower(s), "-v3") }
func normLevel(s string) string { return strings.ToUpper(s) }

// Validate checks the flags before anything starts, normalizing task and
// level; it returns every problem, each a usage error on its own line.
func (f *Flags) Validate() error {
	var errs []error
	var err error
	if f.Task, err = OneOf("--task", "task", f.Task, simTasks, normTask); err != nil {
		errs = append(errs, err)
	}
	if f.Level, err = OneOf("--level", "OOD level", f.Level, simLevels, normLevel); err != nil {
		errs = append(errs, err)
	}
	bad := func(format string, a ...any) { errs = append(errs, Usagef(format, a...)) }
	if f.Seed < 0 {
		bad("--seed %d: must be 0 or more", f.Seed)
	}
	if !(f.FrozenMotion >= 0) || math.IsInf(f.FrozenMotion, 0) {
		bad("--camera-frozen-motion %v: must be a distance of 0 (off) or more, in m", f.FrozenMotion)
	}
	if !(f.CameraMoved >= 0 && f.CameraMoved <= 1) {
		bad("--camera-moved %v: must be a fraction in (0, 1], or 0 (off)", f.CameraMoved)
	}
	if f.watchFlag != "" && f.watchFlag != "off" {
		bad("--watch-camera %q: leave it out (the bundle's watch camera, if it has one) or give off", f.watchFlag)
	}
	if f.CameraUnseen < 0 {
		bad("--camera-unseen %d: must be a number of pixels, or 0 (off)", f.CameraUnseen)
	}
	if f.Steps < 0 {
		bad("--steps %d: must be 0 (the bundle's default) or more", f.Steps)
	}
	if !(f.Rate > 0) || math.IsInf(f.Rate, 0) {
		bad("--rate %g: must be a positive control rate in Hz (e.g. 10)", f.Rate)
	}
	if !(f.WarmSigma >= 0) || math.IsInf(f.WarmSigma, 0) || f.WarmSteps < 0 {
		bad("--warm-sigma %g --warm-steps %d: want a σ of the bundle's schedule (0: the bundle's) and 0 (half of K) or more steps", f.WarmSigma, f.WarmSteps)
	} else if f.Cold && (f.WarmSigma > 0 || f.WarmSteps > 0) {
		bad("--cold with --warm-sigma %g --warm-steps %d: give one (--cold: every plan from noise)", f.WarmSigma, f.WarmSteps)
	}
	if m, err := engines.ParseGuideMode(f.Chunking); err != nil {
		bad("--chunking %q: want off, noisy or denoised", f.Chunking)
	} else if m != engines.GuideOff {
		if f.ChunkingSoft < -1 {
			bad("--chunking-soft %d: want -1 (the whole overlap), 0 or more", f.ChunkingSoft)
		}
		if err := engines.CheckStrength(m, f.ChunkingStrength); err != nil {
			bad("--chunking-%v", err)
		}
	}
	var w, h int
	f.Camera = strings.ToLower(strings.TrimSpace(f.Camera))
	if n, err := fmt.Sscanf(f.Camera, "%dx%d", &w, &h); err != nil || n != 2 || w <= 0 || h <= 0 || fmt.Sprintf("%dx%d", w, h) != f.Camera {
		bad("--camera-size %q: want WxH in pixels, e.g. 96x96", f.Camera)
	}
	if f.CameraName != "" {
		if f.CameraName, err = OneOf("--camera", "camera", f.CameraName, simCameras, func(s string) string { return s }); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Prepare validates the flags and resolves the bundle and the robot state
// it needs, before the bridge starts: a mistake costs no simulator start-up.
// Command-line mistakes are usage errors; a shipped bundle not built yet is
// not. root is the repository (ProjectRoot).
func (f *Flags) Prepare(root string) error {
	if err := f.Validate(); err != nil {
		return err
	}
	f.BundleDir = f.resolveBundle(root)
	fi, err := os.Stat(f.BundleDir)
	missing := errors.Is(err, os.ErrNotExist)
	switch {
	case missing && f.Bundle != "":
		return Usagef("--bundle %s: no such folder", f.Bundle)
	case missing:
		return fmt.Errorf("sim: no bundle for task %s at %s: train one (scripts/train-defaults.sh) or pass --bundle", f.Task, f.BundleDir)
	case err != nil:
		return fmt.Errorf("sim: bundle: %w", err)
	case !fi.IsDir():
		return Usagef("--bundle %s: not a folder (want an engine bundle's folder)", f.Bundle)
	}
	if f.State, err = RobotState(f.BundleDir, f.RobotState); err != nil {
		if f.Bundle != "" {
			return UsageError{err}
		}
		return err
	}
	f.CalibratedOn, f.FromBundle = "", ""
	m, err := ReadManifest(f.BundleDir)
	if err == nil {
		f.fromBundle(m)
	}
	if err == nil && m.Calibration != nil {
		if cl := m.Calibration.ClosedLoop; cl != nil && cl.Task != "" && cl.Task != f.Task {
			f.CalibratedOn = cl.Task
		}
	}
	f.Images = err == nil && slices.ContainsFunc(m.Obs, func(o engines.ObsSpec) bool { return o.Kind == engines.ObsImage })
	f.Palette = err == nil && slices.ContainsFunc(m.Obs, func(o engines.ObsSpec) bool { return o.Palette != nil })
	if err == nil && f.CameraName == "" {
		// the camera is part of the bundle: render the one it was trained on, at its size
		for _, o := range m.Obs {
			if o.Camera != nil {
				f.CameraName = o.Camera.Name
				f.Camera = fmt.Sprintf("%dx%d", o.Camera.Width, o.Camera.Height)
			}
		}
	}
	f.WatchCamera = ""
	if err == nil && m.WatchCamera != nil && f.watchFlag != "off" {
		w := m.WatchCamera
		if size := fmt.Sprintf("%dx%d", w.Camera.Width, w.Camera.Height); size != f.Camera {
			return fmt.Errorf("sim: bundle %s's watch camera %q was recorded at %s, but the simulator renders its cameras at %s (--camera-size); --watch-camera off runs without it",
				f.BundleDir, w.Camera.Name, size, f.Camera)
		}
		f.WatchCamera = w.Camera.Name
	}
	if f.CameraName == "" {
		f.CameraName = DefaultCamera
	}
	if err == nil {
		f.bundleWarm(m)
	}
	return nil
}

// bundleWarm sets --warm-sigma and --warm-steps to the bundle's
// sampler.warm_start where the runtime would take it (runtime.WarmConfig):
// no warm flag, no --cold, the bundle's K and its rate, real-time chunking
// off. So the runtime gets it explicitly, and the summaries record what
// ran. (A diffusion bundle with a warm start is refused at load.)
func (f *Flags) bundleWarm(m *engines.Manifest) {
	w := m.Sampler.WarmStart
	k := m.Sampler.Steps
	if f.Steps != 0 {
		k = f.Steps
	}
	if f.Cold || f.WarmSigma != 0 || (f.Chunking != "" && f.Chunking != "off") || !w.Applies(f.Rate, k, m.Sampler.Steps) {
		return
	}
	f.WarmSigma, f.WarmSteps = w.Sigma, w.Steps
}

// resolveBundle is --bundle, or the shipped bundle of the task.
func (f *Flags) resolveBundle(root string) string {
	if f.Bundle != "" {
		return f.Bundle
	}
	return filepath.Join(root, "bundles", "metaworld-"+f.Task)
}

// RobotState returns robot.state for a bundle on the Meta-World bridge:
// the flag's list when given, else what the bundle's state input's width
// says — the full 39-wide observation (state policies), or the arm's own
// state, hand position and gripper opening (observation[0:4]), for image
// policies trained with that proprioception (docs/sim.md).
func RobotState(bundle, flagValue string) ([]string, error) {
	if flagValue != "" {
		return strings.Split(flagValue, ","), nil
	}
	mpath := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(mpath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sim: %s has no manifest.json — is it an engine bundle? (export one with `python -m energyflow export`)", bundle)
	}
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	m, err := engines.ParseManifest(mpath, data)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	for i := range m.Obs {
		if m.Obs[i].Kind != engines.ObsState {
			continue
		}
		switch w := m.Obs[i].Width(); w {
		case 39:
			return []string{"observation"}, nil
		case 4:
			return []string{"position", "gripper"}, nil
		default:
			return nil, fmt.Errorf("sim: bundle %s has a %d-wide state input %q: the Meta-World arm gives observation (39) or position,gripper (4); pass --robot-state", bundle, w, m.Obs[i].Name)
		}
	}
	return nil, fmt.Errorf("sim: bundle %s has no state input; the runtime needs one (pass --robot-state to choose the arm fields)", bundle)
}

// ReadManifest parses (and validates) a bundle's manifest.json without
// checking its files.
func ReadManifest(bundle string) (*engines.Manifest, error) {
	mpath := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, err
	}
	return engines.ParseManifest(mpath, data)
}
