// Package calibrate fits the energy stop's closed-loop calibration
// offline, on the scores of level-0 episodes driven through the runtime
// (energyflow sim calibrate, docs/safety.md). It is harness code: nothing
// here runs on the robot, which only reads the result
// (calibration.ClosedLoop in the bundle's manifest).
//
// # Concepts
//
//   - A trace is one episode's score at each running control tick since the
//     gate was armed, NaN where the tick had no fresh score.
//   - Fit splits the traces into fit episodes, which set each band's mean
//     and std, and conformal episodes, whose scores set the split-conformal
//     quantile q: a fresh episode exchangeable with them trips the n-of-m
//     rule with probability at most alpha. FitCeiling adds a one-tick
//     ceiling to a calibration fitted earlier.
package calibrate
