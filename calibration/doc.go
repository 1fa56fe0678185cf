// Package calibration holds the energy stop's calibration as a bundle
// carries it: the manifest's "calibration" block (docs/bundle.md), read by
// the bundle loader (engines) and used by the safety gate (safety), and
// written by `energyflow sim calibrate`. It is one set of types with one
// validation, so the loader and the gate cannot disagree about what a
// calibration means. It has no hardware and no runtime code: every package
// may import it.
//
// # Concepts
//
//   - Block is the whole calibration block: the held-out statistics of each
//     score (ScoreStats), the recommended stop threshold (Recommendation)
//     and the closed-loop calibrations.
//   - ClosedLoop is a closed-loop, conformal, time-varying threshold: Bands
//     of Mean + Q·Std by the time since the gate was armed (counted in a
//     BandUnit), certified for an n-of-m Rule at level Alpha, with an
//     optional one-tick Ceiling and the PlanLatency of its driving.
//   - Validate (on Block and on ClosedLoop) reports every problem as a
//     *KeyError naming the manifest key ("calibration.closed_loop.alpha").
package calibration
