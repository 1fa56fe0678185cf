package runtime

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
)

// ImageSource gives the loop the vision features of a bundle's image
// inputs. The App implements it with the camera pipeline; tests may use
// any frame source.
type ImageSource interface {
	// Features writes into dst the features of image input obs (an index
	// into Manifest.Obs) computed from the newest frame captured at or
	// before t: the frame the robot could have seen when its arm state was
	// read at t. It fails when there is no such frame, when that frame is
	// older than the source's maximum age, or when it was captured before
	// since (zero: no bound): a frame of an earlier scene, after a new
	// episode replaced it.
	Features(obs int, t, since time.Time, dst []float32) error
}

// errNoImage is returned while no usable frame exists for an observation time.
var errNoImage = errors.New("no camera frame")

// visionPipeline turns camera frames into the features of one image input:
// RGB → the manifest's preprocessing → the bundle's vision graph, and keeps
// the features with their capture times for the loop to align with the arm
// state. Encode is called by one goroutine (the camera reader); Features by
// any number of others.
type visionPipeline struct {
	obs    int // index into Manifest.Obs
	name   string
	camera *engines.CameraSpec // the camera it was trained on; nil takes any frame size
	pre    *camera.Preprocessor
	enc    *engines.VisionEncoder
	tensor []float32
	feats  []float32
	hist   *camera.History
	minGap time.Duration // frames closer than this to the last encoded one are skipped
	maxAge time.Duration // a frame older than this before the observation is not used
	last   time.Time
	stages *StageTimes // records preprocess and encoder; nil: nothing

	mu  sync.Mutex // guards out (Features' scratch)
	out camera.Obs
}

// visionDepth is the number of encoded frames kept: at the default 20 Hz
// and a 30 fps camera, about a second and a half, far more than the
// T_o = 2 steps the policy looks back.
const visionDepth = 32

// newVisionPipeline opens the vision graph of image input obs on be.
// minGap is typically half the control period (no point encoding frames
// faster than the loop can use them); maxAge the camera watchdog's bound.
// stages (nil: none) receives the preprocess and encoder time of every
// encoded frame.
func newVisionPipeline(b *engines.Bundle, be engines.Backend, obs int, minGap, maxAge time.Duration, stages *StageTimes) (*visionPipeline, error) {
	o := b.Manifest.Obs[obs]
	if o.Preprocess == nil {
		return nil, fmt.Errorf("runtime: bundle image input %q has no preprocess block", o.Name)
	}
	spec, err := camera.PreprocessFromSlices(o.Preprocess.Resize, o.Preprocess.Crop, o.Preprocess.ChannelOrder,
		o.Preprocess.Mean, o.Preprocess.Std)
	if err != nil {
		return nil, fmt.Errorf("runtime: bundle image input %q: %w", o.Name, err)
	}
	pre, err := camera.NewPreprocessor(spec)
	if err != nil {
		return nil, fmt.Errorf("runtime: bundle image input %q: %w", o.Name, err)
	}
	enc, err := engines.NewVisionEncoder(b, be, o.Name)
	if err != nil {
		return nil, err
	}
	if n := enc.Features(); n != o.Features {
		enc.Close()
		return nil, fmt.Errorf("runtime: bundle image input %q: the vision graph gives %d features, the manifest says %d", o.Name, n, o.Features)
	}
	return &visionPipeline{obs: obs, name: o.Name, camera: o.Camera, pre: pre, enc: enc,
		tensor: make([]float32, enc.ImageSize()), feats: make([]float32, enc.Features()),
		hist: camera.NewHistory(visionDepth, enc.Features()), minGap: minGap, maxAge: maxAge, stages: stages}, nil
}

// Encode preprocesses and encodes one RGB frame captured at t (skipping it
// when it follows the last encoded frame by less than minGap) and stores
// its features. It reports whether the frame was encoded.
func (v *visionPipeline) Encode(rgb *camera.RGB, t time.Time, seq uint64) (bool, error) {
	if !v.last.IsZero() && t.Sub(v.last) < v.minGap && !t.Before(v.last) {
		return false, nil
	}
	if c := v.camera; c != nil && (rgb.Width != c.Width || rgb.Height != c.Height) {
		return false, fmt.Errorf("runtime: camera frame %dx%d, but %q was trained on %dx%d frames from camera %q", rgb.Width, rgb.Height, v.name, c.Width, c.Height, c.Name)
	}
	if h, w := v.pre.Spec().OutputSize(rgb.Width, rgb.Height); 3*h*w != len(v.tensor) {
		return false, fmt.Errorf("runtime: camera frame %dx%d preprocesses to 3×%d×%d, but the vision graph of %q takes %d floats", rgb.Width, rgb.Height, h, w, v.name, len(v.tensor))
	}
	t0 := time.Now()
	if err := v.pre.Apply(v.tensor, rgb); err != nil {
		return false, fmt.Errorf("runtime: preprocess for %q: %w", v.name, err)
	}
	t1 := time.Now()
	v.stages.Record(StagePreprocess, t1.Sub(t0))
	if err := v.enc.Encode(v.tensor, v.feats); err != nil {
		return false, err
	}
	v.stages.Since(StageEncoder, t1)
	if err := v.hist.Push(t, seq, v.feats); err != nil {
		return false, err
	}
	v.last = t
	return true, nil
}

// Reset forgets the stored features (after a camera reconnect).
func (v *visionPipeline) Reset() { v.hist.Reset() }

// features implements ImageSource for this pipeline's input.
func (v *visionPipeline) features(t, since time.Time, dst []float32) error {
	if len(dst) != len(v.feats) {
		return fmt.Errorf("runtime: image %q: feature buffer of %d floats, expected %d", v.name, len(dst), len(v.feats))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.hist.AtOrBefore(t, &v.out); err != nil {
		return fmt.Errorf("runtime: image %q: %w captured at or before the observation", v.name, errNoImage)
	}
	if age := t.Sub(v.out.Time); v.maxAge > 0 && age > v.maxAge {
		return fmt.Errorf("runtime: image %q: %w within %v of the observation (newest usable is %v older)", v.name, errNoImage, v.maxAge, age.Round(time.Millisecond))
	}
	if v.out.Time.Before(since) {
		return fmt.Errorf("runtime: image %q: %w of the new scene yet (the newest was captured %v before it was replaced)", v.name, errNoImage, since.Sub(v.out.Time).Round(time.Millisecond))
	}
	copy(dst, v.out.Tensor)
	return nil
}

// Close closes the vision session.
func (v *visionPipeline) Close() error { return v.enc.Close() }

// visionSet is the ImageSource of every image input of a bundle.
type visionSet []*visionPipeline

// Features implements ImageSource.
func (s visionSet) Features(obs int, t, since time.Time, dst []float32) error {
	for _, v := range s {
		if v.obs == obs {
			return v.features(t, since, dst)
		}
	}
	return fmt.Errorf("runtime: observation %d is not an image input", obs)
}
