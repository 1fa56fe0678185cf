package enginebuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// object is a JSON object that keeps its keys' order and its values' exact
// text, so updating "plans" and "files" leaves the rest of manifest.json as
// the training toolkit wrote it (float32 digits included). It works on
// generic JSON and does not depend on package engines' manifest types.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("want an object key, got %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level object")
	}
	return o, nil
}

// get decodes key into v; a missing key leaves v alone and returns false.
func (o *object) get(key string, v any) (bool, error) {
	raw, ok := o.vals[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return true, fmt.Errorf("manifest key %q: %w", key, err)
	}
	return true, nil
}

func (o *object) set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
	return nil
}

func (o *object) marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(o.vals[k])
	}
	buf.WriteByte('}')
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, buf.Bytes()); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// RecordPlan adds (or replaces) a plan entry in the bundle's manifest.json
// and records the sha256 of the plan file and of extra files (e.g. the
// timing cache) in "files". Paths are bundle-relative with '/'.
func RecordPlan(bundle string, plan PlanEntry, extra ...string) error {
	path := filepath.Join(bundle, "manifest.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("enginebuild: %w", err)
	}
	o, err := parseObject(data)
	if err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	var plans []map[string]any
	if _, err := o.get("plans", &plans); err != nil {
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
	if err := o.set("plans", kept); err != nil {
		return err
	}
	files := map[string]string{}
	if _, err := o.get("files", &files); err != nil {
		return fmt.Errorf("enginebuild: %s: %w", path, err)
	}
	for _, rel := range append([]string{plan.File}, extra...) {
		sum, err := fileSHA256(filepath.Join(bundle, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("enginebuild: %w", err)
		}
		files[rel] = sum
	}
	if err := o.set("files", files); err != nil { // json.Marshal sorts map keys
		return err
	}
	out, err := o.marshal()
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
