// Package calibrate is `energyflow sim calibrate`: it fits the energy
// stop's closed-loop calibration offline, on the scores of level-0 episodes
// driven through the runtime against the simulated robot (or recorded by
// sim eval), and writes it into the bundle's manifest (docs/safety.md).
// It is harness code: nothing here runs on the robot, which only reads the
// result (calibration.ClosedLoop in the bundle's manifest).
//
// # Concepts
//
//   - A trace is one episode's score at each running control tick since the
//     gate was armed, NaN where the tick had no fresh score (eval.Result's
//     Trace, with the energy stop observing only).
//   - Fit splits the traces into fit episodes, which set each band's mean
//     and std, and conformal episodes, whose scores set the split-conformal
//     quantile q: a fresh episode exchangeable with them trips the n-of-m
//     rule with probability at most alpha. FitCeiling adds a one-tick
//     ceiling to a calibration fitted earlier.
//   - Run is the command: drive (or read --traces), fit, print, and write
//     with WriteClosedLoop — calibration.closed_loop, or beside it in
//     closed_loop_others for another control rate or K — leaving every
//     other byte of the manifest alone. --ceiling-only and --latency-only
//     add a ceiling or the plan latency to the calibration at this rate and
//     K instead.
package calibrate
