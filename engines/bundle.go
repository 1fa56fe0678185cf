package engines

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Bundle is a loaded, validated engine bundle: its directory and manifest.
// A Bundle is read-only after LoadBundle and safe to share.
type Bundle struct {
	Dir      string // absolute path of the bundle directory
	Manifest Manifest
}

// LoadBundle reads dir/manifest.json, validates every field (Manifest.Validate),
// checks the sha256 of every file listed in "files" and refuses ONNX files
// that are not structurally complete protobuf (so a truncated or corrupted
// graph never reaches a backend). All problems are reported together; each
// is a *FieldError naming the file and the field.
func LoadBundle(dir string) (*Bundle, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("engines: bundle %s: %w", dir, err)
	}
	mpath := filepath.Join(abs, "manifest.json")
	data, err := os.ReadFile(mpath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("engines: %s: no manifest.json — is %s an engine bundle? (export one with `python -m energyflow export`)", mpath, dir)
		}
		return nil, fmt.Errorf("engines: read bundle manifest: %w", err)
	}
	m, err := ParseManifest(mpath, data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range sortedKeys(m.Files) {
		if err := checkFile(abs, name, m.Files[name]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := joinProblems(errs); err != nil {
		return nil, err
	}
	return &Bundle{Dir: abs, Manifest: *m}, nil
}

// checkFile verifies one listed file: present, regular, matching sha256 and,
// for .onnx files, a complete protobuf message.
func checkFile(dir, name, want string) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	fe := func(format string, args ...any) error {
		return &FieldError{File: p, Field: "", Problem: fmt.Sprintf(format, args...) + fmt.Sprintf(" (manifest field files.%s)", name)}
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fe("missing, expected by the manifest — copy the whole bundle directory")
		}
		return fe("cannot open: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return fe("not a regular file")
	}
	h := sha256.New()
	var head []byte
	if strings.HasSuffix(name, ".onnx") {
		// ONNX graphs are read whole for the structure check.
		head, err = io.ReadAll(f)
		if err == nil {
			h.Write(head)
		}
	} else {
		_, err = io.Copy(h, f)
	}
	if err != nil {
		return fe("read: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fe("sha256 is %s, expected %s — the file is corrupted, truncated or from another export; re-copy or re-export the bundle", got, want)
	}
	if head != nil {
		if err := checkONNX(head); err != nil {
			return fe("not a valid ONNX model: %v", err)
		}
	}
	return nil
}

// checkONNX walks the top level of an ONNX ModelProto (protobuf wire
// format): every field must be well formed, the message must end exactly at
// the end of the data, and ir_version (1) and graph (7) must be present.
func checkONNX(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty file")
	}
	var haveIR, haveGraph bool
	for i := 0; i < len(b); {
		key, n := uvarint(b[i:])
		if n <= 0 {
			return fmt.Errorf("bad field key at byte %d", i)
		}
		i += n
		field, wire := key>>3, key&7
		switch wire {
		case 0:
			_, n = uvarint(b[i:])
			if n <= 0 {
				return fmt.Errorf("truncated varint in field %d at byte %d", field, i)
			}
			i += n
		case 1:
			i += 8
		case 5:
			i += 4
		case 2:
			l, n := uvarint(b[i:])
			if n <= 0 {
				return fmt.Errorf("truncated length of field %d at byte %d", field, i)
			}
			i += n
			if l > uint64(len(b)-i) {
				return fmt.Errorf("field %d claims %d bytes at byte %d but only %d remain (truncated file)", field, l, i, len(b)-i)
			}
			i += int(l)
		default:
			return fmt.Errorf("field %d has unknown wire type %d at byte %d", field, wire, i)
		}
		if i > len(b) {
			return fmt.Errorf("field %d runs past the end of the file (truncated)", field)
		}
		switch {
		case field == 1 && wire == 0:
			haveIR = true
		case field == 7 && wire == 2:
			haveGraph = true
		}
	}
	if !haveIR || !haveGraph {
		return fmt.Errorf("no ir_version or graph field (ir_version %v, graph %v)", haveIR, haveGraph)
	}
	return nil
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// Path returns the absolute path of a bundle file given its manifest name.
func (b *Bundle) Path(name string) string {
	return filepath.Join(b.Dir, filepath.FromSlash(name))
}

// GraphSpec returns what a Backend needs to open one of the bundle's graphs
// (GraphEnergyGrad, GraphEps, GraphVision, or GraphStateEnergy when the
// bundle has the state term): the ONNX path, the contract's inputs and
// outputs in binding order, and the manifest's TensorRT plans for it.
func (b *Bundle) GraphSpec(graph string, maxBatch int) (GraphSpec, error) {
	g, ok := b.Manifest.Graphs[graph]
	if graph == GraphStateEnergy && b.Manifest.StateEnergy != nil {
		g, ok = GraphEntry{File: b.Manifest.StateEnergy.Graph}, true
	}
	if !ok {
		return GraphSpec{}, fmt.Errorf("engines: bundle %s has no graph %q", b.Dir, graph)
	}
	in, out, ok := b.Manifest.ExpectedIO(graph)
	if !ok {
		return GraphSpec{}, fmt.Errorf("engines: bundle %s: graph %q is not used by any input", b.Dir, graph)
	}
	if maxBatch < 1 {
		return GraphSpec{}, fmt.Errorf("engines: graph %q: max batch %d, expected ≥ 1", graph, maxBatch)
	}
	var plans []PlanInfo
	for _, p := range b.Manifest.Plans {
		if p.Graph == graph || p.Graph == "" && graph == GraphEnergyGrad {
			plans = append(plans, p)
		}
	}
	return GraphSpec{
		Path:     b.Path(g.File),
		Name:     graph,
		Inputs:   in,
		Outputs:  out,
		MaxBatch: maxBatch,
		Plans:    plans,
	}, nil
}

func joinProblems(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
