package engines

import "fmt"

// ObsFrame is one step of the observation history: ObsFrame[i] belongs to
// Manifest.Obs[i] — the raw (un-standardized) state vector for a "state"
// input, the vision features (VisionEncoder.Encode) for an "image" input.
// Entries the conditioning does not use may be nil.
type ObsFrame [][]float32

// Conditioner builds the energy graph's cond vector from the observation
// history exactly as the manifest's "conditioning" says (layout
// "history_flat": for each step oldest first, the listed items in order;
// state items standardized with their obs norm). It holds no buffers and
// is safe for concurrent use.
type Conditioner struct {
	horizon int
	dim     int
	items   []condItem
}

type condItem struct {
	obs       int // index into Manifest.Obs
	name      string
	width     int
	mean, std []float32 // nil when the item is not standardized (images)
}

// NewConditioner prepares the conditioning of a validated manifest.
func NewConditioner(m *Manifest) (*Conditioner, error) {
	if m.Conditioning.Layout != LayoutHistoryFlat {
		return nil, fmt.Errorf("engines: conditioning layout %q, expected %q", m.Conditioning.Layout, LayoutHistoryFlat)
	}
	c := &Conditioner{horizon: m.ObsHorizon, dim: m.CondDim}
	sum := 0
	for _, it := range m.Conditioning.Items {
		idx := -1
		for i := range m.Obs {
			if m.Obs[i].Name == it.Obs {
				idx = i
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("engines: conditioning item %q is not an obs entry", it.Obs)
		}
		ci := condItem{obs: idx, name: it.Obs, width: it.Width}
		if o := m.Obs[idx]; o.Kind == ObsState && o.Norm != nil {
			ci.mean, ci.std = o.Norm.Mean, o.Norm.Std
		}
		c.items = append(c.items, ci)
		sum += it.Width
	}
	if sum*c.horizon != c.dim {
		return nil, fmt.Errorf("engines: conditioning widths give %d×%d, but cond_dim is %d", c.horizon, sum, c.dim)
	}
	return c, nil
}

// Dim returns cond_dim.
func (c *Conditioner) Dim() int { return c.dim }

// Horizon returns T_o, the number of history steps Build needs.
func (c *Conditioner) Horizon() int { return c.horizon }

// Build writes cond (len Dim()) from history (len Horizon(), oldest
// first). It allocates nothing unless it returns an error.
func (c *Conditioner) Build(history []ObsFrame, cond []float32) error {
	if len(history) != c.horizon {
		return fmt.Errorf("engines: conditioning needs %d history steps (obs_horizon), got %d", c.horizon, len(history))
	}
	if len(cond) != c.dim {
		return fmt.Errorf("engines: cond buffer has %d floats, expected cond_dim %d", len(cond), c.dim)
	}
	o := 0
	for s, frame := range history {
		for _, it := range c.items {
			if it.obs >= len(frame) || len(frame[it.obs]) != it.width {
				n := -1
				if it.obs < len(frame) {
					n = len(frame[it.obs])
				}
				return fmt.Errorf("engines: history step %d: obs %q has %d values, expected %d", s, it.name, n, it.width)
			}
			x := frame[it.obs]
			dst := cond[o : o+it.width]
			if it.std != nil {
				for j, v := range x {
					dst[j] = (v - it.mean[j]) / it.std[j]
				}
			} else {
				copy(dst, x)
			}
			o += it.width
		}
	}
	return nil
}
