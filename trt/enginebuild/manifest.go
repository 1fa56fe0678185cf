package enginebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/energyflow/edge/engines/manifestedit"
)

// RecordPlan adds (or replaces) a plan entry in the bundle's manifest.json
// and records the sha256 of the plan file and of extra files (e.g. the
// timing cache) in "files". Paths are bundle-relative with '/'.
func RecordPlan(bundle string, plan PlanEntry, extra ...string) error {
	path := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("enginebuild: %w", err)
	}
	o, err := manifestedit.Parse(data)
	if err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	var plans []map[string]any
	if _, err := o.Get("plans", &plans); err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	kept := plans[:0]
	for _, p := range plans {
		same := p["graph"] == plan.Graph && p["trt_version"] == plan.TRTVersion && p["gpu"] == plan.GPU && p["precision"] == plan.Precision
		if !same && p["file"] != plan.File {
			kept = append(kept, p)
		}
	}
	kept = append(kept, map[string]any{
		"graph": plan.Graph, "file": plan.File, "trt_version": plan.TRTVersion, "gpu": plan.GPU, "precision": plan.Precision,
	})
	if err := o.Set("plans", kept); err != nil {
		return err
	}
	files := map[string]string{}
	if _, err := o.Get("files", &files); err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	for _, rel := range append([]string{plan.File}, extra...) {
		sum, err := fileSHA256(filepath.Join(bundle, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("enginebuild: %w", err)
		}
		files[rel] = sum
	}
	if err := o.Set("files", files); err != nil { // json.Marshal sorts map keys
		return err
	}
	out, err := o.Marshal("  ")
	if err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	return writeAtomic(path, out)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeAtomic replaces path with data through a temporary file and rename.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".manifest-*.json")
	if err != nil {
		return fmt.Errorf("enginebuild: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("enginebuild: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("enginebuild: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("enginebuild: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("enginebuild: %w", err)
	}
	return nil
}
