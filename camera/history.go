package camera

import (
	"fmt"
	"sync"
	"time"
)

// Obs is one processed observation: a model tensor and its capture time.
type Obs struct {
	Time   time.Time // capture time, local monotonic clock
	Seq    uint64    // the frame's sequence number from its source
	Tensor []float32 // CHW float32, as the vision engine takes it
}

// History holds the most recent processed frames (a ring of fixed depth,
// at least the policy's T_o) with their timestamps, for the runtime to
// align with arm state. Push copies in, reads copy out into caller
// buffers, so neither side holds the other's memory; nothing allocates
// after NewHistory. Safe for concurrent use (one writer, many readers).
type History struct {
	mu    sync.Mutex
	slots []Obs
	n     int // filled slots
	head  int // index of the next slot to write
	width int // tensor length
}

// NewHistory returns a history of the given depth for tensors of length
// tensorLen.
func NewHistory(depth, tensorLen int) *History {
	if depth < 1 {
		depth = 1
	}
	h := &History{slots: make([]Obs, depth), width: tensorLen}
	for i := range h.slots {
		h.slots[i].Tensor = make([]float32, tensorLen)
	}
	return h
}

// Depth is the number of observations kept.
func (h *History) Depth() int { return len(h.slots) }

// TensorLen is the length of every tensor.
func (h *History) TensorLen() int { return h.width }

// Len is the number of observations held (≤ Depth).
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Push records tensor (copied) captured at t, evicting the oldest entry
// when full. Times should not go backwards; an entry older than the newest
// is still stored, in arrival order.
func (h *History) Push(t time.Time, seq uint64, tensor []float32) error {
	if len(tensor) != h.width {
		return fmt.Errorf("camera: history push of %d floats, want %d", len(tensor), h.width)
	}
	h.mu.Lock()
	s := &h.slots[h.head]
	s.Time, s.Seq = t, seq
	copy(s.Tensor, tensor)
	h.head = (h.head + 1) % len(h.slots)
	if h.n < len(h.slots) {
		h.n++
	}
	h.mu.Unlock()
	return nil
}

// Reset forgets every entry (for example after a camera reconnect when old
// frames must not be mixed with new ones).
func (h *History) Reset() {
	h.mu.Lock()
	h.n, h.head = 0, 0
	h.mu.Unlock()
}

// at returns the i-th newest slot (0 = newest). Caller holds mu.
func (h *History) at(i int) *Obs {
	return &h.slots[(h.head-1-i+2*len(h.slots))%len(h.slots)]
}

func copyObs(dst *Obs, src *Obs) {
	dst.Time, dst.Seq = src.Time, src.Seq
	if cap(dst.Tensor) < len(src.Tensor) {
		dst.Tensor = make([]float32, len(src.Tensor))
	}
	dst.Tensor = dst.Tensor[:len(src.Tensor)]
	copy(dst.Tensor, src.Tensor)
}

// Latest copies the newest observation into dst (reusing dst.Tensor).
// It returns ErrNoFrame when the history is empty.
func (h *History) Latest(dst *Obs) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return ErrNoFrame
	}
	copyObs(dst, h.at(0))
	return nil
}

// Window copies the len(dst) most recent observations into dst, oldest
// first (the order the conditioning vector wants). It returns ErrNoFrame
// when fewer than len(dst) are held; len(dst) must not exceed Depth.
func (h *History) Window(dst []Obs) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(dst) > len(h.slots) {
		return fmt.Errorf("camera: window of %d exceeds history depth %d", len(dst), len(h.slots))
	}
	if h.n < len(dst) {
		return ErrNoFrame
	}
	for i := range dst {
		copyObs(&dst[i], h.at(len(dst)-1-i))
	}
	return nil
}

// AtOrBefore copies the newest observation captured at or before t into
// dst: the frame the robot could have seen at time t (for aligning camera
// frames with arm-state samples). It returns ErrNoFrame when every held
// frame is newer than t, or the history is empty.
func (h *History) AtOrBefore(t time.Time, dst *Obs) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; i < h.n; i++ {
		o := h.at(i)
		if !o.Time.After(t) {
			copyObs(dst, o)
			return nil
		}
	}
	return ErrNoFrame
}

// NewestTime returns the capture time of the newest entry (zero when
// empty); now.Sub of it is the observation's age.
func (h *History) NewestTime() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return time.Time{}
	}
	return h.at(0).Time
}
