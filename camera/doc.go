// Package camera captures camera frames and turns them into model inputs.
//
// Its one job: get frames from a camera (or a recording of one) to the
// policy's vision engine and to the live view, with honest capture
// timestamps.
//
// # Concepts
//
// A [Source] yields frames. [Source.Read] fills a caller-owned [Frame]
// (the bytes are copied out of driver or network buffers, so the caller
// owns them and may keep them until its next Read into the same Frame).
// Every frame carries a monotonic capture [Frame.Time], its [PixelFormat],
// size and stride. Implementations:
//
//   - [V4L2]: a USB/CSI camera through github.com/blackjack/webcam, opened
//     by path or by stable id (/dev/v4l/by-id/...), MJPEG or YUYV; reopens
//     with backoff after an unplug.
//   - [HTTPSource]: an MJPEG stream over HTTP (multipart/x-mixed-replace),
//     as IP cameras, mjpg-streamer and the simulated robot serve it;
//     reconnects with backoff and honours per-frame X-Timestamp headers.
//   - [Replay]: recorded frames (a directory of images, an MJPEG dump or a
//     raw YUYV dump), once or looping, at a given rate. It is the test
//     double for everything behind the device.
//
// A [Pipeline] converts a frame to packed RGB ([RGB], for the live view)
// and then to the model tensor described by a [Preprocess] spec (resize
// bilinear, center crop, /255, (x-mean)/std, CHW float32) — the same recipe
// as the training toolkit's preprocess_image. YUYV is BT.601 limited range;
// JPEG is JFIF full range; UVC JPEGs without Huffman tables get the standard
// tables spliced in. After warm-up the YUYV path allocates nothing.
//
// A [ViewWatch] tells when a fixed camera has been knocked or turned (most
// of its steady view changing at once), for the safety gate.
//
// A [History] keeps the T_o most recent tensors with their timestamps for
// the runtime to align with arm state. A [Capture] runs Source → Pipeline →
// History in one goroutine and reports staleness through [Capture.Status].
//
// # Ownership and stopping
//
// Drivers use a source; the application (cmd/energyflow) owns it and closes
// it. Halt makes a source inert (streaming off, connection dropped); the
// next Read starts it again. Close is Halt plus releasing the device; it is
// idempotent and makes later Reads return [ErrClosed]. Both work with a
// cancelled context.
package camera
