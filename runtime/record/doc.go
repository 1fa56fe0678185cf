// Package record writes control episodes in the robomimic-style HDF5 layout
// that the training toolkit reads (training/energyflow data loader):
//
//	data/                      attrs: env, total, source="energyflow-runtime"
//	data/demo_0/               attrs: num_samples, success, stop_reason
//	data/demo_0/obs/<key>      float32 [L, ...] (images: uint8 [L, H, W, 3])
//	data/demo_0/actions        float32 [L, D_a]
//	data/demo_0/scores/<name>  float32 [L] (energy, centered_energy, ...)
//	data/demo_0/safety_events  attribute: JSON array of events
//
// One file per episode. A file is written under a temporary name, synced,
// and renamed only when complete, so a crash or power loss never leaves a
// half-written recording under a final name, and never touches earlier ones.
package record
