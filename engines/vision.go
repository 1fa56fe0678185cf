package engines

import "fmt"

// VisionEncoder runs a bundle's vision graph on one preprocessed image
// (CHW float32, normalized as the obs entry's "preprocess" says) and gives
// the features that go into cond for that image input.
//
// Like the Sampler it has one owner, owns its session, and allocates
// nothing per Encode after the first.
type VisionEncoder struct {
	obs     int // index into Manifest.Obs
	name    string
	sess    Session
	in, out []float32
	closed  bool
}

// NewVisionEncoder opens the graph of the image input obsName on be.
func NewVisionEncoder(b *Bundle, be Backend, obsName string) (*VisionEncoder, error) {
	idx := -1
	for i, o := range b.Manifest.Obs {
		if o.Name == obsName && o.Kind == ObsImage {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("engines: bundle %s has no image input %q", b.Dir, obsName)
	}
	spec, err := b.GraphSpec(b.Manifest.Obs[idx].Graph, 1)
	if err != nil {
		return nil, err
	}
	s, err := be.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("engines: vision encoder for %q: %w", obsName, err)
	}
	in, out, err := s.Bind(1)
	if err == nil && (len(in) != 1 || len(out) != 1) {
		err = fmt.Errorf("backend bound %d inputs and %d outputs, expected 1 and 1", len(in), len(out))
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("engines: vision encoder for %q: %w", obsName, err)
	}
	return &VisionEncoder{obs: idx, name: obsName, sess: s, in: in[0], out: out[0]}, nil
}

// Obs returns the index of the encoder's input in Manifest.Obs (where its
// features go in an ObsFrame).
func (v *VisionEncoder) Obs() int { return v.obs }

// ImageSize returns the number of floats of one input image (3×H×W).
func (v *VisionEncoder) ImageSize() int { return len(v.in) }

// Features returns the width of the output.
func (v *VisionEncoder) Features() int { return len(v.out) }

// Encode runs the graph on image (len ImageSize) and writes features (len
// Features).
func (v *VisionEncoder) Encode(image, features []float32) error {
	if v.closed {
		return fmt.Errorf("engines: vision encoder %q is closed", v.name)
	}
	if len(image) != len(v.in) || len(features) != len(v.out) {
		return fmt.Errorf("engines: vision %q: image %d and features %d floats, expected %d and %d", v.name, len(image), len(features), len(v.in), len(v.out))
	}
	copy(v.in, image)
	if err := v.sess.Run(); err != nil {
		return fmt.Errorf("engines: vision %q: %w", v.name, err)
	}
	copy(features, v.out)
	return nil
}

// Close closes the session. Idempotent.
func (v *VisionEncoder) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	return v.sess.Close()
}
