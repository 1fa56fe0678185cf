package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/energyflow/edge/calibration"
	"github.com/energyflow/edge/engines"
	"github.com/energyflow/edge/engines/manifestedit"
)

// WriteClosedLoop writes cl, with the plan latency of its driving when it
// records one, into the bundle's manifest.json — as calibration.closed_loop,
// or beside it in closed_loop_others when closed_loop was certified at
// another rate or K (placeClosedLoop) — and leaves every other byte of
// meaning alone: keys keep their order, numbers their text (the manifest's
// file hashes do not cover manifest.json itself). The manifest is checked
// by the runtime's parser before it is written. It returns where cl went.
func WriteClosedLoop(bundle string, cl *calibration.ClosedLoop) (string, error) {
	return writeManifest(bundle, func(cal *manifestedit.Object) (string, error) { return placeClosedLoop(cal, cl) })
}

// writeManifest writes the bundle's manifest.json with its calibration
// object edited by place (calibratedManifest), atomically, and returns
// where place said it wrote.
func writeManifest(bundle string, place func(cal *manifestedit.Object) (string, error)) (string, error) {
	path, data, where, err := calibratedManifest(bundle, place)
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	return where, os.Rename(tmp, path)
}

// checkCalibratable builds, without writing it, the bundle's manifest with a
// placeholder closed-loop calibration of score at rateHz and k sampler
// steps: a manifest that could not take one fails before any episode is
// driven.
func checkCalibratable(bundle, score string, rateHz float64, k int) error {
	cl := &calibration.ClosedLoop{Score: score, Alpha: 0.1, Q: 1, BandUnit: calibration.BandTicks, RateHz: rateHz, StepsK: k,
		Rule:  calibration.Rule{Kind: calibration.RuleNOfM, N: 3, M: 5},
		Bands: []calibration.Band{{From: 0, Mean: 0, Std: 1, Threshold: 1}}}
	_, _, _, err := calibratedManifest(bundle, func(cal *manifestedit.Object) (string, error) {
		return placeClosedLoop(cal, cl)
	})
	return err
}

// calibratedManifest returns the path of the bundle's manifest.json, its
// bytes with the calibration object edited by place (placeClosedLoop,
// placeCeiling), checked by the parser the runtime uses, and where place
// wrote.
func calibratedManifest(bundle string, place func(cal *manifestedit.Object) (string, error)) (string, []byte, string, error) {
	path := filepath.Join(bundle, "manifest.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, "", err
	}
	top, err := manifestedit.Parse(raw)
	if err != nil {
		return "", nil, "", fmt.Errorf("%s: %w", path, err)
	}
	cal := &manifestedit.Object{}
	if calRaw := top.Raw("calibration"); calRaw != nil && !bytes.Equal(bytes.TrimSpace(calRaw), []byte("null")) {
		if cal, err = manifestedit.Parse(calRaw); err != nil {
			return "", nil, "", fmt.Errorf("%s: calibration: %w", path, err)
		}
	}
	where, err := place(cal)
	if err != nil {
		return "", nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if err := top.Set("calibration", cal); err != nil {
		return "", nil, "", err
	}
	// one space per level: the training toolkit's json.dump(indent=1)
	out, err := top.Marshal(" ")
	if err != nil {
		return "", nil, "", err
	}
	if _, err := engines.ParseManifest(path, out); err != nil {
		return "", nil, "", fmt.Errorf("the calibrated manifest would not parse, nothing written: %w", err)
	}
	return path, out, where, nil
}

// loopKey is what tells closed-loop calibrations apart in one bundle.
type loopKey struct {
	Score  string  `json:"score"`
	RateHz float64 `json:"rate_hz"`
	StepsK int     `json:"steps_k"`
}

// placeClosedLoop puts cl into the calibration object and says where: it
// replaces closed_loop when there is none, when closed_loop was certified
// at cl's rate and K, or when it calibrated another score (then any
// closed_loop_others, of that score, are dropped: a bundle's closed-loop
// calibrations are all of one score). Otherwise closed_loop stays the one
// used at any other rate or K, and cl replaces the entry of
// closed_loop_others at its rate and K, or is appended to them.
func placeClosedLoop(cal *manifestedit.Object, cl *calibration.ClosedLoop) (string, error) {
	var primary *loopKey
	if _, err := cal.Get("closed_loop", &primary); err != nil {
		return "", err
	}
	var others []json.RawMessage
	if _, err := cal.Get("closed_loop_others", &others); err != nil {
		return "", err
	}
	same := func(k *loopKey) bool { return k != nil && k.RateHz == cl.RateHz && k.StepsK == cl.StepsK }
	// a closed_loop that did not record its rate or K cannot be told apart
	if primary == nil || primary.Score != cl.Score || same(primary) || !(primary.RateHz > 0) || primary.StepsK < 1 {
		where := "calibration.closed_loop"
		if primary != nil && primary.Score != cl.Score && len(others) > 0 {
			cal.Delete("closed_loop_others")
			where += fmt.Sprintf(" (its %d closed_loop_others, of score %s, dropped)", len(others), primary.Score)
		}
		return where, cal.Set("closed_loop", cl)
	}
	raw, err := json.Marshal(cl)
	if err != nil {
		return "", err
	}
	i := len(others)
	for j, o := range others {
		var k *loopKey
		if err := json.Unmarshal(o, &k); err != nil {
			return "", fmt.Errorf("calibration.closed_loop_others[%d]: %w", j, err)
		}
		if same(k) {
			i = j
			break
		}
	}
	if i == len(others) {
		others = append(others, nil)
	}
	others[i] = raw
	where := fmt.Sprintf("calibration.closed_loop_others[%d] (%g Hz, K=%d; closed_loop, at %g Hz and K=%d, is kept for other rates)",
		i, cl.RateHz, cl.StepsK, primary.RateHz, primary.StepsK)
	return where, cal.Set("closed_loop_others", others)
}

// placeCeiling sets the "ceiling" of the closed-loop calibration certified
// at rateHz and k (placeInLoop).
func placeCeiling(cal *manifestedit.Object, rateHz float64, k int, ceil *calibration.Ceiling) (string, error) {
	return placeInLoop(cal, rateHz, k, "ceiling", ceil)
}

// placeInLoop sets key to value in the closed-loop calibration certified
// at rateHz and k — closed_loop, or the entry of closed_loop_others — and
// says where; the calibration's other keys are left as they are.
func placeInLoop(cal *manifestedit.Object, rateHz float64, k int, key string, value any) (string, error) {
	same := func(raw json.RawMessage) (bool, error) {
		var key loopKey
		if err := json.Unmarshal(raw, &key); err != nil {
			return false, err
		}
		return key.RateHz == rateHz && key.StepsK == k, nil
	}
	set := func(raw json.RawMessage) (json.RawMessage, error) {
		o, err := manifestedit.Parse(raw)
		if err != nil {
			return nil, err
		}
		if err := o.Set(key, value); err != nil {
			return nil, err
		}
		return o.MarshalJSON()
	}
	if raw := cal.Raw("closed_loop"); raw != nil {
		ok, err := same(raw)
		if err != nil {
			return "", fmt.Errorf("calibration.closed_loop: %w", err)
		}
		if ok {
			out, err := set(raw)
			if err != nil {
				return "", err
			}
			cal.SetRaw("closed_loop", out)
			return "calibration.closed_loop." + key, nil
		}
	}
	var others []json.RawMessage
	if _, err := cal.Get("closed_loop_others", &others); err != nil {
		return "", err
	}
	for i, raw := range others {
		ok, err := same(raw)
		if err != nil {
			return "", fmt.Errorf("calibration.closed_loop_others[%d]: %w", i, err)
		}
		if !ok {
			continue
		}
		if others[i], err = set(raw); err != nil {
			return "", err
		}
		return fmt.Sprintf("calibration.closed_loop_others[%d].%s", i, key), cal.Set("closed_loop_others", others)
	}
	return "", fmt.Errorf("no closed-loop calibration at %g Hz and K=%d to add the %s to", rateHz, k, key)
}
