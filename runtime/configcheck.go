package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/energyflow/edge/actuators"
	"github.com/energyflow/edge/camera"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/trt"
)

// Check is what `energyflow config check` runs after LoadConfig's
// validation: that everything the configuration refers to is there and
// usable on this machine — the register map parses, the bundle loads with
// its hashes and can give the scores safety.energy asks of it (no energy
// score of a diffusion policy, no state_energy without the state term), the
// token file's folder exists, the tracking monitor (safety.tracking) has
// the map's position signal to watch, camera_watch matches the bundle's
// watch camera, the replay cameras' frames
// and the ONNX Runtime library exist, and a TensorRT backend is asked only
// of a binary built with TensorRT. Every problem is reported, each with its
// key and line.
func (c *Config) Check() error {
	var errs []error
	add := func(key string, err error) { errs = append(errs, c.keyError(key, err)) }
	if c.Robot.Map != "" {
		if m, err := actuators.LoadMap(c.Robot.Map); err != nil {
			add("robot.map", err)
		} else if c.Safety.Tracking.Enabled && m.Signals.Position == nil {
			add("safety.tracking.enabled", fmt.Errorf("the tracking monitor compares the arm's measured position with its commands, but the register map %s has no position signal — map it, or turn the monitor off", c.Robot.Map))
		}
	}
	if c.Policy.Bundle != "" {
		if b, err := engines.LoadBundle(c.Policy.Bundle); err != nil {
			add("policy.bundle", err)
		} else {
			if _, err := safetyConfig(c, b, slog.New(slog.DiscardHandler)); err != nil {
				errs = append(errs, err) // already names its key and line
			}
			if err := checkWatchCamera(c, b, slog.New(slog.DiscardHandler)); err != nil {
				errs = append(errs, err) // already names its key and line
			}
		}
	}
	if c.Policy.ONNXRuntimeLib != "" && c.Policy.Backend != "trt" {
		if err := mustExist(c.Policy.ONNXRuntimeLib, false); err != nil {
			add("policy.onnxruntime_lib", err)
		}
	}
	if c.Policy.Backend == "trt" {
		if _, err := trt.Probe(0); errors.Is(err, trt.ErrNoTensorRT) {
			add("policy.backend", fmt.Errorf("trt, but this binary was built without TensorRT: use backend: ort, or build with TensorRT (docs/jetson.md)"))
		} else if err != nil {
			add("policy.backend", fmt.Errorf("trt: %w", err))
		}
	}
	if c.Telemetry.Enabled && c.Telemetry.Auth.TokenFile != "" {
		if err := mustExist(filepath.Dir(c.Telemetry.Auth.TokenFile), true); err != nil {
			add("telemetry.auth.token_file", fmt.Errorf("its folder: %w (the tokens are written there on first start)", err))
		}
	}
	if c.Camera.Enabled && c.Camera.Source == camera.KindReplay {
		if d := c.Camera.Replay.Dir; d != "" {
			if err := mustExist(d, true); err != nil {
				add("camera.replay.dir", err)
			}
		}
		if f := c.Camera.Replay.File; f != "" {
			if err := mustExist(f, false); err != nil {
				add("camera.replay.file", err)
			}
		}
	}
	if c.CameraWatch.On() && c.CameraWatch.Source == camera.KindReplay && c.CameraWatch.Replay.Dir != "" {
		if err := mustExist(c.CameraWatch.Replay.Dir, true); err != nil {
			add("camera_watch.replay.dir", err)
		}
	}
	return errors.Join(errs...)
}

// mustExist says, in one line, why path is not an existing folder (dir) or
// file.
func mustExist(path string, dir bool) error {
	what := "file"
	if dir {
		what = "folder"
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: no such %s", path, what)
	case err != nil:
		return err
	case dir && !st.IsDir():
		return fmt.Errorf("%s: not a folder", path)
	case !dir && st.IsDir():
		return fmt.Errorf("%s: a folder, not a file", path)
	}
	return nil
}
