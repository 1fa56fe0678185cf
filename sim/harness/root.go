package harness

import (
	"errors"
	"os"
	"path/filepath"
)

// ProjectRoot finds the repository root: $ENERGYFLOW_ROOT, else the first
// parent of the working directory or of the executable holding go.mod and
// sim/. The bridge, the shipped bundles and the register map are under it.
func ProjectRoot() (string, error) {
	if r := os.Getenv("ENERGYFLOW_ROOT"); r != "" {
		return r, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			if fileExists(filepath.Join(d, "go.mod")) && fileExists(filepath.Join(d, "sim")) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("cannot find the EnergyFlow Edge checkout (set ENERGYFLOW_ROOT or run from the repository)")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
