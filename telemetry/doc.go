// Package telemetry lets operators watch the robot from a browser: a live
// WebRTC video feed with the policy's energy drawn over it, a data channel
// with per-tick telemetry, a viewer page with STOP and RESET buttons,
// Prometheus metrics and GPU/CPU statistics.
//
// # Concepts
//
// The runtime owns a *Server and feeds it; telemetry never imports the
// runtime or the safety layer (dependencies flow runtime → telemetry):
//
//   - Publish(Sample) at the control rate: never blocks, allocates nothing
//     after warm-up; samples go to the overlay and, as JSON, to every
//     viewer's data channel.
//   - PublishEvent(Event) for safety events (trips, stops, resets) with the
//     energy trace that led to them.
//   - SubmitFrame(rgb, w, h, t) from the camera pipeline: copies the frame
//     into a small pool and returns; when the encoder is busy or the frame
//     comes sooner than the configured frame rate allows, the frame is
//     dropped and counted, never queued. One goroutine draws the overlay,
//     converts to I420, encodes VP8 once (telemetry/vpx) and queues the frame
//     for every viewer; each viewer's track is fed by its own goroutine and
//     starts at a keyframe, so a slow viewer never holds up the others.
//   - Metrics() returns the collectors the runtime observes (tick duration
//     and jitter, inference latency, energy, safety trips, Modbus).
//   - Controller is what the page's STOP and RESET reach; the runtime
//     implements it on top of its safety layer.
//   - EpisodeControl (optional, nil on a real robot) restarts the scene: the
//     simulated robot's episodes and out-of-distribution level, from the
//     page's Episode panel.
//
// Access needs a bearer token. A view token allows watching and STOP; a
// reset token additionally allows RESET and the episode controls. Tokens are configured or generated
// at first start, persisted to a file and printed once.
//
// Signaling is one POST of an SDP offer (non-trickle) answered with the SDP
// answer after ICE gathering; offers are size-limited and validated, and
// malformed input is answered 400.
package telemetry
